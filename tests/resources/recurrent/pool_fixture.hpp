#pragma once

// Shared support of the recurrent state pool tests: small configs, a fixture
// whose step driver checks the invariants after every call, byte patterns
// written through block views (to see copies and zeroing), and a resource
// that refuses on demand. Test code only.
#include <cstdint>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "resources/recurrent/pool.hpp"
#include "resources/step/step.hpp"

namespace mstar::resources::test {

/// §5.1's blocks: a [4,16,16] fp32 state and a [96,3] bf16 conv window.
inline recurrent_blocks padding_test_blocks() {
  recurrent_blocks blocks;
  blocks.emplace("state", recurrent_block_config({4, 16, 16}, dtype::float32, {0}));
  blocks.emplace("conv", recurrent_block_config({96, 3}, dtype::bfloat16, {0}));
  return blocks;
}

/// Two tiny blocks, for walks that check every byte after every call.
inline recurrent_blocks tiny_blocks() {
  recurrent_blocks blocks;
  blocks.emplace("state", recurrent_block_config({2, 3}, dtype::float32));
  blocks.emplace("conv", recurrent_block_config({5, 2}, dtype::bfloat16));
  return blocks;
}

/// A validated config of `slots` slots over two layers.
inline recurrent_state_config config_of(std::int64_t slots, bool sink = true,
                                        recurrent_blocks blocks = padding_test_blocks()) {
  return recurrent_state_config::make(2, std::move(blocks), slots, !sink).value();
}

/// The byte at offset `k` of layer `layer` of block number `b` of a slot
/// filled with pattern `seed`; never zero, so a filled slot never reads as
/// a zeroed one.
inline std::uint8_t pattern_byte(std::uint32_t seed, std::size_t b, std::int64_t layer,
                                 std::size_t k) {
  return static_cast<std::uint8_t>(
      1 + (seed * 131 + static_cast<std::uint32_t>(layer) * 17 + b * 7 + k) % 255);
}

/// Writes pattern `seed` over slot `slot` in every layer of every block,
/// at the pool's block views' addresses, as a kernel would (through the
/// block's arena, so device arenas work too).
inline void fill_slot(recurrent_state_pool& pool, std::int32_t slot, std::uint32_t seed) {
  std::size_t b = 0;
  for (const auto& [name, block] : pool.config().blocks) {
    kernels::arena& arena = *pool.storage(name);
    for (std::int64_t layer = 0; layer < pool.config().num_layers; ++layer) {
      const auto view = pool.block(name, layer).value();
      std::vector<std::byte> bytes(static_cast<std::size_t>(view.strides_bytes[0]));
      for (std::size_t k = 0; k < bytes.size(); ++k)
        bytes[k] = std::byte{pattern_byte(seed, b, layer, k)};
      const auto at = static_cast<std::size_t>(view.data - arena.data()) +
                      static_cast<std::size_t>(slot * view.strides_bytes[0]);
      ASSERT_TRUE(arena.write(at, bytes).has_value());
    }
    ++b;
  }
}

/// Whether slot `slot` holds pattern `seed` in every layer of every block,
/// or, for nullopt, zeros everywhere.
inline bool slot_holds(recurrent_state_pool& pool, std::int32_t slot,
                       std::optional<std::uint32_t> seed) {
  std::size_t b = 0;
  for (const auto& [name, block] : pool.config().blocks) {
    kernels::arena& arena = *pool.storage(name);
    for (std::int64_t layer = 0; layer < pool.config().num_layers; ++layer) {
      const auto view = pool.block(name, layer).value();
      std::vector<std::byte> bytes(static_cast<std::size_t>(view.strides_bytes[0]));
      const auto at = static_cast<std::size_t>(view.data - arena.data()) +
                      static_cast<std::size_t>(slot * view.strides_bytes[0]);
      if (!arena.read(at, bytes))
        return false;
      const std::byte* p = bytes.data();
      for (std::size_t k = 0; k < bytes.size(); ++k) {
        const std::uint8_t want = seed ? pattern_byte(*seed, b, layer, k) : 0;
        if (std::to_integer<std::uint8_t>(p[k]) != want)
          return false;
      }
    }
    ++b;
  }
  return true;
}

/// A recurrent step over `segs` with the given forks.
inline recurrent_step rstep(std::vector<segment> segs, std::vector<fork> pre = {},
                            std::vector<fork> post = {},
                            std::optional<std::vector<request_id>> fork_rids = std::nullopt) {
  recurrent_step s;
  s.segments = std::move(segs);
  s.pre_forks = std::move(pre);
  s.post_forks = std::move(post);
  s.fork_rids = std::move(fork_rids);
  return s;
}

/// The plan a step context holds for `key`.
inline std::shared_ptr<const recurrent_plan> plan_in(const step_context& ctx,
                                                     const std::string& key = "rec") {
  return std::dynamic_pointer_cast<const recurrent_plan>(ctx.plan_results.at(key));
}

/// A resource that admits or refuses as told, holding nothing: the
/// "refusing refuser planned after the pool" of the reference's tests.
class refusing_resource final : public resource {
 public:
  /// A resource keyed `key`, planned after `after` (if not empty).
  explicit refusing_resource(std::string key, std::vector<std::string> after = {})
      : key_(std::move(key)), after_(std::move(after)) {}
  /// The resource key.
  const std::string& key() const override { return key_; }
  /// The keys this resource is planned after.
  std::vector<std::string> depends_on() const override { return after_; }
  /// Refuses (allocation_failed) while `refuse` is set.
  admit_outcome admit(const resource_step&, step_context&) override {
    ++admits;
    if (refuse)
      return admit_outcome::refused(allocation_failed{key_ + " refuses", 1, "main", "?"});
    return admit_outcome::admitted();
  }
  /// Counts rollbacks; it holds nothing to give back.
  void rollback_admit(const resource_step&, step_context&) override { ++rollbacks; }
  /// An empty plan.
  result<std::shared_ptr<const plan_result>> plan(const resource_step&, step_context&) override {
    return std::shared_ptr<const plan_result>(std::make_shared<plan_result>());
  }
  /// Nothing to record.
  result<void> commit(const resource_step&, step_context&) override { return {}; }

  bool refuse = false;  ///< refuse every admit while set
  int admits = 0;       ///< admits seen
  int rollbacks = 0;    ///< rollbacks seen

 private:
  std::string key_;
  std::vector<std::string> after_;
};

/// A pool keyed "rec" and a step driver that checks the pool's invariants
/// after every call.
class recurrent_pool_test : public ::testing::Test {
 protected:
  void make(recurrent_state_config c) { pool_ = recurrent_state_pool::make("rec", c).value(); }
  void SetUp() override { make(config_of(6)); }

  void check() {
    const auto ok = pool_->check_invariants();
    ASSERT_TRUE(ok.has_value()) << ok.error().message();
  }

  admit_outcome admit(const recurrent_step& s, step_context& ctx) {
    auto out = pool_->admit(s, ctx);
    check();
    return out;
  }

  std::shared_ptr<const recurrent_plan> plan(const recurrent_step& s, step_context& ctx) {
    auto planned = pool_->plan(s, ctx);
    check();
    EXPECT_TRUE(planned.has_value()) << planned.error().message();
    if (!planned)
      return nullptr;
    return std::dynamic_pointer_cast<const recurrent_plan>(*planned);
  }

  void commit(const recurrent_step& s, step_context& ctx) {
    const auto ok = pool_->commit(s, ctx);
    EXPECT_TRUE(ok.has_value()) << ok.error().message();
    check();
  }

  void rollback(const recurrent_step& s, step_context& ctx) {
    pool_->rollback_admit(s, ctx);
    check();
  }

  /// Admits (which must succeed), plans and commits; returns the plan.
  std::shared_ptr<const recurrent_plan> run(const recurrent_step& s, step_context ctx = {}) {
    const auto out = admit(s, ctx);
    EXPECT_TRUE(out.ok) << (out.reason ? refusal_message(*out.reason) : "");
    if (!out.ok)
      return nullptr;
    auto p = plan(s, ctx);
    commit(s, ctx);
    return p;
  }

  /// The addressing of `label` in `p` (which must have it).
  static const recurrent_addressing& rows(const std::shared_ptr<const recurrent_plan>& p,
                                          const std::string& label = "main") {
    return *p->addressing(label).value();
  }

  std::int32_t slot(const request_id& rid, const std::string& label = "main") const {
    return pool_->slot_of(rid, label).value();
  }

  std::unique_ptr<recurrent_state_pool> pool_;
};

}  // namespace mstar::resources::test
