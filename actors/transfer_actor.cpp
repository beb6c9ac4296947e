#include "actors/transfer_actor.hpp"

#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <spdlog/spdlog.h>
#include <thread>

namespace mstar::actors {
namespace {

struct transfer_state {
  std::shared_ptr<const void> keep_alive;  ///< the pools: registered memory outlives the agent
  std::unique_ptr<transport::agent> agent;
  pool_regions regions;
  transport::local_arena_id kv = 0;
  std::vector<transport::local_arena_id> blocks;
  std::vector<std::string> described;
  /// Attached peer arenas with their parsed descriptors, by descriptor text
  /// (parsed once: every pull of a request names the same few).
  std::map<std::string, std::pair<transport::remote_arena_id, transport::arena_descriptor>>
      attached;
  static inline const char* name = "mstar.transfer";
};

using self_ptr = transfer_actor::stateful_pointer<transfer_state>;

caf::expected<transport::remote_arena_id> attach(transfer_state& st, const std::string& text,
                                                 transport::arena_descriptor& out) {
  if (auto it = st.attached.find(text); it != st.attached.end()) {
    out = it->second.second;
    return it->second.first;
  }
  auto d = transport::descriptor_from_json(text);
  if (!d)
    return d.error();
  auto id = st.agent->attach(*d);
  if (!id)
    return id.error();
  out = *d;
  st.attached.emplace(text, std::make_pair(*id, std::move(*d)));
  return id;
}

// A test hook: MSTAR_TEST_TRANSFER_DELAY_MS=N holds every pull N ms before
// its bytes move (and logs it), so a test can kill a node mid-transfer.
void maybe_delay(const pull_order& o) {
  const char* v = std::getenv("MSTAR_TEST_TRANSFER_DELAY_MS");
  if (v == nullptr)
    return;
  const auto ms = std::strtol(v, nullptr, 10);
  spdlog::info("pull of {} page(s) and {} slot(s): held {} ms (MSTAR_TEST_TRANSFER_DELAY_MS)",
               o.pages.size(), o.slots.size(), ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// A test hook: MSTAR_TEST_CORRUPT_TRANSFER=1 flips one byte of the first
// unit that landed, as a fault in flight would (tests/launcher/, and the GPU
// P/D test on device memory).
caf::expected<void> maybe_corrupt(const transport::transfer_plan& plan,
                                  std::span<std::byte* const> bases,
                                  std::span<kernels::arena* const> arenas,
                                  transport::memory_kind memory) {
  if (std::getenv("MSTAR_TEST_CORRUPT_TRANSFER") == nullptr)
    return {};
  return corrupt_first_unit(plan, bases, arenas, memory);
}

using micros = std::chrono::microseconds;

micros since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<micros>(std::chrono::steady_clock::now() - t0);
}

// Where one plan's bytes land here: our arenas by plan arena index and the
// memory they are in.
struct landing {
  std::span<std::byte* const> bases;
  std::span<kernels::arena* const> arenas;  ///< as `bases`; null where unknown
  transport::memory_kind memory = transport::memory_kind::host;
};

// Moves `plan` and verifies what landed; adds to `out`.
caf::expected<void> run(transfer_state& st, transport::transfer_plan plan,
                        const std::vector<transport::arena_pair>& pairs, const landing& to,
                        const std::vector<transport::unit_checksum>& sums,
                        std::chrono::milliseconds timeout, pull_result& out) {
  const auto t0 = std::chrono::steady_clock::now();
  // The adopted units were just allocated, and a device pool zeroes what it
  // frees on its model's stream: the copies (on the agent's streams) must
  // land after that.
  if (to.memory == transport::memory_kind::cuda) {
    if (auto ok = settle(to.arenas); !ok)
      return ok.error();
  }
  auto h =
      st.agent->start(transport::direction::read, plan, pairs, transport::clock::now() + timeout);
  if (!h)
    return h.error();
  if (auto done = st.agent->wait(*h); !done)
    return done.error();
  out.copy += since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  if (auto ok = maybe_corrupt(plan, to.bases, to.arenas, to.memory); !ok)
    return ok.error();
  if (auto ok = verify_landed(plan, to.bases, to.memory, sums); !ok)
    return ok.error();
  out.verify += since(t1);
  out.bytes += static_cast<std::int64_t>(plan.total_bytes);
  return {};
}

caf::expected<pull_result> pull(transfer_state& st, const pull_order& o) {
  const auto t0 = std::chrono::steady_clock::now();
  maybe_delay(o);
  pull_result out;
  // The peer's arenas, KV first then blocks in name order (as ours).
  std::optional<std::pair<transport::remote_arena_id, transport::arena_layout>> kv;
  std::vector<transport::remote_arena_id> block_ids;
  std::vector<transport::arena_layout> block_layouts;
  for (const auto& text : o.arenas) {
    transport::arena_descriptor d;
    auto id = attach(st, text, d);
    if (!id)
      return id.error();
    out.mapped = st.agent->is_mapped(*id);
    const auto path = st.agent->path_of(*id);
    out.device = path && *path == transport::attach_path::cuda_ipc;
    if (d.layout.kind == transport::arena_kind::kv_pages) {
      kv.emplace(*id, d.layout);
    } else {
      block_ids.push_back(*id);
      block_layouts.push_back(d.layout);
    }
  }
  if (!o.pages.empty()) {
    if (!kv || st.regions.kv_base == nullptr)
      return caf::make_error(caf::sec::invalid_argument, "a page pull without KV arenas");
    auto plan = transport::plan_pages(kv->second, st.regions.kv, o.pages);
    if (!plan)
      return plan.error();
    std::byte* const bases[] = {st.regions.kv_base};
    kernels::arena* const arenas[] = {st.regions.kv_arena};
    const landing to{bases, arenas, st.regions.kv_memory};
    if (auto ok = run(st, std::move(*plan), {{st.kv, kv->first}}, to, o.kv_sums, o.timeout, out);
        !ok)
      return ok.error();
  }
  if (!o.slots.empty()) {
    auto plan = transport::plan_slots(block_layouts, st.regions.blocks, o.slots);
    if (!plan)
      return plan.error();
    std::vector<transport::arena_pair> pairs;
    for (std::size_t i = 0; i < block_ids.size() && i < st.blocks.size(); ++i)
      pairs.push_back({st.blocks[i], block_ids[i]});
    auto memory = blocks_memory(st.regions);
    if (!memory)
      return memory.error();
    std::vector<kernels::arena*> arenas = st.regions.block_arenas;
    arenas.resize(st.regions.block_bases.size(), nullptr);
    const landing to{st.regions.block_bases, arenas, *memory};
    if (auto ok = run(st, std::move(*plan), pairs, to, o.slot_sums, o.timeout, out); !ok)
      return ok.error();
  }
  out.took = since(t0);
  return out;
}

transfer_actor::behavior_type transfer_behavior(self_ptr self,
                                                std::shared_ptr<transfer_state> made) {
  self->state = std::move(*made);
  // The agent (in the state) stops its progress thread when destroyed.
  return {
      [self](describe_atom) { return self->state.described; },
      [self](pull_atom, const pull_order& o) -> caf::result<pull_result> {
        auto ok = pull(self->state, o);
        if (!ok) {
          // The peer may be gone or its endpoint closed: attach afresh next time.
          for (const auto& text : o.arenas)
            self->state.attached.erase(text);
          return ok.error();
        }
        return *ok;
      },
  };
}

}  // namespace

caf::expected<transfer_actor> spawn_transfer_actor(caf::actor_system& sys, transfer_setup setup) {
  auto st = std::make_shared<transfer_state>();
  auto agent = transport::agent::make(std::move(setup.agent));
  if (!agent)
    return agent.error();
  st->agent = std::move(*agent);
  st->regions = setup.regions;
  auto describe = [&](transport::local_arena_id id) -> caf::expected<void> {
    auto d = st->agent->describe(id);
    if (!d)
      return d.error();
    st->described.push_back(transport::to_json(*d));
    return {};
  };
  if (st->regions.kv_base != nullptr) {
    auto id = st->agent->register_arena(st->regions.kv_base, st->regions.kv, st->regions.kv_segment,
                                        st->regions.kv_memory);
    if (!id)
      return id.error();
    st->kv = *id;
    if (auto ok = describe(*id); !ok)
      return ok.error();
  }
  for (std::size_t i = 0; i < st->regions.blocks.size(); ++i) {
    const auto& r = st->regions;
    auto id = st->agent->register_arena(
        r.block_bases[i], r.blocks[i],
        i < r.block_segments.size() ? r.block_segments[i] : std::string{},
        i < r.block_memory.size() ? r.block_memory[i] : transport::memory_kind::host);
    if (!id)
      return id.error();
    st->blocks.push_back(*id);
    if (auto ok = describe(*id); !ok)
      return ok.error();
  }
  if (auto ok = st->agent->start_progress_thread(); !ok)
    return ok.error();
  st->keep_alive = std::move(setup.keep_alive);
  return sys.spawn<caf::detached>(transfer_behavior, std::move(st));
}

}  // namespace mstar::actors
