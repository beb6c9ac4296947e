// The in-process group: every collective is two barriers. At the first each
// rank has posted its buffer; between them each reads its peers' buffers
// into its own scratch; at the second every read is done, so each rank may
// overwrite its buffer and the next collective may post again.
#include "parallel/local_group.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace mstar::parallel {
namespace {

/// What a rank brought to the collective it is in.
struct posting {
  std::string_view op;
  const void* data = nullptr;
  std::size_t count = 0;  ///< elements (bytes for broadcast)
  int root = -1;
};

/// The state the ranks share; every field under `mu`, except `posted`
/// entries, which a rank writes only before its first barrier and peers read
/// only between the two.
struct shared_group {
  shared_group(int n, std::chrono::milliseconds t)
      : size(n), timeout(t), posted(static_cast<std::size_t>(n)), phase(posted.size(), 0) {}

  std::mutex mu;
  std::condition_variable cv;
  const int size;
  const std::chrono::milliseconds timeout;
  std::uint64_t generation = 0;  ///< barriers completed
  int arrived = 0;               ///< ranks waiting at the current barrier
  std::vector<posting> posted;
  std::vector<std::uint64_t> phase;  ///< per rank: the barriers it reached
  std::optional<error> broken;       ///< a timeout or a mismatch
  int gone = -1;                     ///< the first rank that left or aborted
  std::string gone_reason;
};

class local_rank final : public communicator {
 public:
  local_rank(std::shared_ptr<shared_group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  ~local_rank() override { leave("its communicator was destroyed"); }
  local_rank(const local_rank&) = delete;
  local_rank& operator=(const local_rank&) = delete;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return group_->size; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept override {
    return group_->timeout;
  }

  result<void> all_reduce_sum(std::span<float> data) override {
    constexpr std::string_view op = "all_reduce_sum";
    if (auto ok = meet({op, data.data(), data.size(), -1}); !ok)
      return ok;
    scratch_.assign(data.size(), 0.0F);
    for (const auto& p : group_->posted) {
      const auto* src = static_cast<const float*>(p.data);
      for (std::size_t i = 0; i < scratch_.size(); ++i)
        scratch_[i] += src[i];
    }
    if (auto ok = barrier(op); !ok)
      return ok;
    std::copy(scratch_.begin(), scratch_.end(), data.begin());
    return {};
  }

  result<void> all_gather(std::span<const float> in, std::span<float> out) override {
    constexpr std::string_view op = "all_gather";
    if (out.size() != in.size() * static_cast<std::size_t>(size())) {
      auto e = make_error(errc::invalid_argument,
                          fmt::format("tensor parallel {} on rank {}: output holds {} floats, not "
                                      "{} ranks x {}",
                                      op, rank_, out.size(), size(), in.size()));
      fail(e);
      return e;
    }
    if (auto ok = meet({op, in.data(), in.size(), -1}); !ok)
      return ok;
    scratch_.resize(out.size());
    for (std::size_t q = 0; q < group_->posted.size(); ++q) {
      const auto* src = static_cast<const float*>(group_->posted[q].data);
      std::copy_n(src, in.size(), scratch_.begin() + static_cast<std::ptrdiff_t>(q * in.size()));
    }
    if (auto ok = barrier(op); !ok)
      return ok;
    std::copy(scratch_.begin(), scratch_.end(), out.begin());
    return {};
  }

  result<void> broadcast(std::span<std::byte> data, int root) override {
    constexpr std::string_view op = "broadcast";
    if (root < 0 || root >= size()) {
      auto e = make_error(errc::invalid_argument,
                          fmt::format("tensor parallel {} on rank {}: root {} is not a rank of {}",
                                      op, rank_, root, size()));
      fail(e);
      return e;
    }
    if (auto ok = meet({op, data.data(), data.size(), root}); !ok)
      return ok;
    // Only the root's buffer is read, and the root does not write it.
    if (rank_ != root && !data.empty())
      std::memcpy(data.data(), group_->posted[static_cast<std::size_t>(root)].data, data.size());
    return barrier(op);
  }

  void abort(const std::string& reason) override { leave(reason); }

 private:
  // Posts `p`, waits for every rank, then checks they all called the same
  // collective with the same count.
  result<void> meet(posting p) {
    group_->posted[static_cast<std::size_t>(rank_)] = p;
    if (auto ok = barrier(p.op); !ok)
      return ok;
    for (int q = 0; q < size(); ++q) {
      const auto& o = group_->posted[static_cast<std::size_t>(q)];
      if (o.op != p.op || o.count != p.count || o.root != p.root) {
        auto e = make_error(
            errc::internal,
            fmt::format("tensor parallel group out of step: rank {} called {} (count {}, root {}) "
                        "while rank {} called {} (count {}, root {})",
                        rank_, p.op, p.count, p.root, q, o.op, o.count, o.root));
        fail(e);
        return e;
      }
    }
    return {};
  }

  result<void> barrier(std::string_view op) {
    auto& g = *group_;
    std::unique_lock lock(g.mu);
    if (auto e = failure_locked(op))
      return *e;
    const auto gen = g.generation;
    g.phase[static_cast<std::size_t>(rank_)] = gen + 1;
    if (++g.arrived == g.size) {
      g.arrived = 0;
      ++g.generation;
      g.cv.notify_all();
      return {};
    }
    const auto deadline = std::chrono::steady_clock::now() + g.timeout;
    while (g.generation == gen && !g.broken && g.gone < 0) {
      if (g.cv.wait_until(lock, deadline) == std::cv_status::timeout && g.generation == gen &&
          !g.broken && g.gone < 0) {
        int late = 0;
        while (late < g.size && g.phase[static_cast<std::size_t>(late)] > gen)
          ++late;
        g.broken = peer_timeout(op, rank_, late, g.timeout);
        g.cv.notify_all();
      }
    }
    if (g.generation != gen)
      return {};  // every rank arrived, whatever broke the group since
    return *failure_locked(op);
  }

  std::optional<error> failure_locked(std::string_view op) const {
    const auto& g = *group_;
    if (g.broken)
      return *g.broken;
    if (g.gone >= 0)
      return peer_gone(op, rank_, g.gone, g.gone_reason);
    return std::nullopt;
  }

  void fail(const error& e) {
    std::lock_guard lock(group_->mu);
    if (!group_->broken)
      group_->broken = e;
    group_->cv.notify_all();
  }

  void leave(const std::string& reason) {
    std::lock_guard lock(group_->mu);
    if (group_->gone < 0) {
      group_->gone = rank_;
      group_->gone_reason = reason;
    }
    group_->cv.notify_all();
  }

  std::shared_ptr<shared_group> group_;
  int rank_;
  std::vector<float> scratch_;
};

}  // namespace

result<std::vector<std::unique_ptr<communicator>>> local_group::make(
    int size, std::chrono::milliseconds timeout) {
  if (size < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("tensor parallel group: size {} is not positive", size));
  }
  if (timeout.count() <= 0) {
    return make_error(
        errc::invalid_argument,
        fmt::format("tensor parallel group: timeout {} ms is not positive", timeout.count()));
  }
  auto group = std::make_shared<shared_group>(size, timeout);
  std::vector<std::unique_ptr<communicator>> ranks;
  for (int r = 0; r < size; ++r)
    ranks.push_back(std::make_unique<local_rank>(group, r));
  return ranks;
}

}  // namespace mstar::parallel
