// recurrent_state_pool: construction, storage, request lifecycle and the
// invariant check. The step cycle lives in pool_step.cpp, forks in
// pool_forks.cpp, plans in pool_plan.cpp.
#include "resources/recurrent/pool.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <utility>

namespace mstar::resources {

result<const recurrent_addressing*> recurrent_plan::addressing(const std::string& label) const {
  const auto it = labels.find(label);
  if (it == labels.end()) {
    return make_error(errc::not_found,
                      fmt::format("recurrent state has no plan for label '{}'; every label a "
                                  "forward runs must carry a segment in the step",
                                  label));
  }
  return &it->second;
}

result<std::unique_ptr<recurrent_state_pool>> recurrent_state_pool::make(
    std::string key, recurrent_state_config config, const kernels::arena_factory& memory) {
  const std::string context = "recurrent state pool '" + key + "'";
  if (auto ok = config.validate(); !ok)
    return ok.error().with_context(context);
  if (config.arena_slots() > std::numeric_limits<std::int32_t>::max()) {
    return make_error(errc::invalid_argument,
                      fmt::format("max_slots is {} but slot ids are int32", config.max_slots))
        .with_context(context);
  }
  const auto slots = static_cast<std::size_t>(config.arena_slots());
  const auto layers = static_cast<std::size_t>(config.num_layers);
  std::map<std::string, block_storage> blocks;
  for (const auto& [name, block] : config.blocks) {
    const auto bytes = static_cast<std::size_t>(block.nbytes());
    auto arena = kernels::make_arena(memory, layers * slots * bytes);
    if (!arena)
      return arena.error().with_context(context + " block '" + name + "'");
    blocks.emplace(name, block_storage{block, bytes, std::move(*arena)});
  }
  return std::unique_ptr<recurrent_state_pool>(
      new recurrent_state_pool(std::move(key), std::move(config), std::move(blocks)));
}

recurrent_state_pool::recurrent_state_pool(std::string key, recurrent_state_config config,
                                           std::map<std::string, block_storage> blocks)
    : key_(std::move(key)), config_(std::move(config)), blocks_(std::move(blocks)) {
  const auto slots = static_cast<std::size_t>(config_.max_slots);
  // Descending, so taking from the back hands out ascending ids; the sink
  // is taken first and never returns.
  free_.reserve(slots);
  for (auto s = static_cast<std::int32_t>(slots) - 1; s >= 0; --s)
    free_.push_back(s);
  if (!config_.disable_sink_slot)
    free_.pop_back();
  init_checkpoints();
}

recurrent_state_pool::~recurrent_state_pool() = default;

recurrent_state_pool::slot_state* recurrent_state_pool::find_slot(const request_id& rid,
                                                                  const std::string& label) {
  const auto req = slots_.find(rid);
  if (req == slots_.end())
    return nullptr;
  const auto it = req->second.find(label);
  return it == req->second.end() ? nullptr : &it->second;
}

const recurrent_state_pool::slot_state* recurrent_state_pool::find_slot(
    const request_id& rid, const std::string& label) const {
  return const_cast<recurrent_state_pool*>(this)->find_slot(rid, label);
}

kernels::arena* recurrent_state_pool::storage(const std::string& name) {
  const auto it = blocks_.find(name);
  return it == blocks_.end() ? nullptr : it->second.arena.get();
}

result<recurrent_block_view> recurrent_state_pool::block(const std::string& name,
                                                         std::int64_t layer) {
  const auto it = blocks_.find(name);
  if (it == blocks_.end()) {
    std::vector<std::string> names;
    for (const auto& entry : blocks_)
      names.push_back(entry.first);
    return make_error(errc::not_found,
                      fmt::format("recurrent state pool '{}' has no block '{}' (blocks: {})", key_,
                                  name, fmt::join(names, ", ")));
  }
  if (layer < 0 || layer >= config_.num_layers) {
    return make_error(errc::out_of_range,
                      fmt::format("recurrent state pool '{}' block '{}' has no layer {} (it has "
                                  "{} layers)",
                                  key_, name, layer, config_.num_layers));
  }
  block_storage& b = it->second;
  recurrent_block_view view;
  view.data = b.arena->data() + static_cast<std::size_t>(layer) *
                                    static_cast<std::size_t>(config_.arena_slots()) * b.slot_bytes;
  view.dtype = b.config.dtype();
  view.shape.push_back(config_.arena_slots());
  view.shape.insert(view.shape.end(), b.config.shape().begin(), b.config.shape().end());
  view.strides_bytes.resize(view.shape.size());
  auto stride = static_cast<std::int64_t>(size_of(view.dtype));
  for (std::size_t axis = view.shape.size(); axis-- > 0;) {
    view.strides_bytes[axis] = stride;
    stride *= view.shape[axis];
  }
  return view;
}

kernels::slot_block recurrent_state_pool::layout_of(const block_storage& b) const {
  return b.slots(static_cast<std::size_t>(config_.num_layers),
                 static_cast<std::size_t>(config_.arena_slots()));
}

void recurrent_state_pool::zero_slot(std::int32_t index) {
  for (auto& [name, b] : blocks_)
    b.arena->zero_slot(layout_of(b), index);
}

void recurrent_state_pool::copy_slot(std::int32_t from, std::int32_t to) {
  if (from == to)
    return;
  for (auto& [name, b] : blocks_)
    b.arena->copy_slot(layout_of(b), from, to);
}

result<std::vector<std::int32_t>> recurrent_state_pool::nonzero_slots(
    std::span<const std::int32_t> candidates) const {
  const auto slots = static_cast<std::size_t>(config_.arena_slots());
  std::vector<std::uint8_t> dirty(slots, 0);
  std::vector<std::byte> copy;
  for (const auto& [name, b] : blocks_) {
    // Host bytes are read in place; device bytes come over once per block.
    const std::byte* bytes = b.arena->data();
    if (b.arena->kind() != kernels::memory_kind::host) {
      copy.resize(b.arena->size());
      if (auto ok = b.arena->read(0, copy); !ok)
        return ok.error().with_context(
            fmt::format("recurrent state pool '{}' block '{}'", key_, name));
      bytes = copy.data();
    }
    for (std::size_t layer = 0; layer < static_cast<std::size_t>(config_.num_layers); ++layer) {
      for (const std::int32_t s : candidates) {
        const std::byte* slot =
            bytes + (layer * slots + static_cast<std::size_t>(s)) * b.slot_bytes;
        if (std::any_of(slot, slot + b.slot_bytes, [](std::byte x) { return x != std::byte{0}; }))
          dirty[static_cast<std::size_t>(s)] = 1;
      }
    }
  }
  std::vector<std::int32_t> out;
  for (const std::int32_t s : candidates) {
    if (dirty[static_cast<std::size_t>(s)] != 0)
      out.push_back(s);
  }
  return out;
}

void recurrent_state_pool::release_slot(std::int32_t index) {
  zero_slot(index);
  free_.push_back(index);
}

std::optional<std::int32_t> recurrent_state_pool::slot_of(const request_id& rid,
                                                          const std::string& label) const {
  const slot_state* s = find_slot(rid, label);
  return s == nullptr ? std::nullopt : std::optional<std::int32_t>{s->index};
}

bool recurrent_state_pool::has_state(const request_id& rid, const std::string& label) const {
  const slot_state* s = find_slot(rid, label);
  return s != nullptr && s->has_state;
}

std::uint64_t recurrent_state_pool::generation(const request_id& rid,
                                               const std::string& label) const {
  const slot_state* s = find_slot(rid, label);
  return s == nullptr ? 0 : s->generation;
}

void recurrent_state_pool::build_accelerator_graph_buffers(int slots, int max_bs, int max_seq_len) {
  (void)slots;
  (void)max_seq_len;
  graph_max_rows_ = std::max(graph_max_rows_, max_bs);
}

void recurrent_state_pool::ingest_request(const request_id& rid) {
  slots_.try_emplace(rid);
}

void recurrent_state_pool::drop_stage_naming(const request_id& rid) {
  if (!stage_.active)
    return;
  const auto& segs = stage_.identity.segments;
  if (std::any_of(segs.begin(), segs.end(), [&](const segment& s) { return s.rid == rid; }))
    clear_preplan();
}

void recurrent_state_pool::reset_request(const request_id& rid, bool free) {
  const auto req = slots_.find(rid);
  if (req == slots_.end() || req->second.empty())
    return;
  // A staged plan addressing this request addresses what is being reset.
  drop_stage_naming(rid);
  for (auto it = req->second.begin(); it != req->second.end();) {
    slot_state& slot = it->second;
    if (slot.exported) {
      // Its bytes are published: the request lets go of the slot and the
      // export hold keeps it, unchanged, until release_export.
      it = req->second.erase(it);
      continue;
    }
    zero_slot(slot.index);
    slot.has_state = false;
    slot.importing = false;
    if (free)
      free_.push_back(slot.index);
    ++it;
  }
  if (free)
    req->second.clear();
  // Rewound: what it holds is no longer a prefix of its keys' stream.
  forget_checkpoint_stream(rid);
  // Freed or let go here, so a later rollback or abort must not free them again.
  std::erase_if(live_,
                [&](const reservation& r) { return r.rid == rid && !find_slot(rid, r.label); });
  std::erase_if(imports_, [&](const reservation& r) { return r.rid == rid; });
  drop_checkpoint_imports(rid);
}

void recurrent_state_pool::remove_request(const request_id& rid) {
  reset_request(rid, /*free=*/true);
  slots_.erase(rid);
  forget_checkpoint_stream(rid);
  drop_checkpoint_imports(rid);
}

result<void> recurrent_state_pool::check_invariants() const {
  const auto slots = static_cast<std::size_t>(config_.max_slots);
  const bool sink = !config_.disable_sink_slot;
  // 0 unseen, 1 free, 2 held.
  std::vector<std::uint8_t> seen(slots, 0);
  auto fail = [&](std::string what) {
    return make_error(errc::out_of_range,
                      fmt::format("recurrent state pool '{}': {}", key_, std::move(what)));
  };
  for (const auto& [name, b] : blocks_) {
    if (auto ok = b.arena->status(); !ok)
      return ok.error().with_context(
          fmt::format("recurrent state pool '{}' block '{}'", key_, name));
  }
  for (const std::int32_t s : free_) {
    if (s < 0 || static_cast<std::size_t>(s) >= slots)
      return fail(fmt::format("free slot {} is out of range", s));
    if (sink && s == sink_slot)
      return fail("the sink slot is on the free list");
    if (seen[static_cast<std::size_t>(s)] != 0)
      return fail(fmt::format("slot {} is on the free list twice", s));
    seen[static_cast<std::size_t>(s)] = 1;
  }
  auto dirty = nonzero_slots(free_);
  if (!dirty)
    return dirty.error();
  if (!dirty->empty())
    return fail(fmt::format("free slot {} is not zero", dirty->front()));
  std::size_t held = 0;
  for (const auto& [rid, labels] : slots_) {
    for (const auto& [label, slot] : labels) {
      const std::int32_t s = slot.index;
      if (s < 0 || static_cast<std::size_t>(s) >= slots)
        return fail(fmt::format("{}/{} holds out-of-range slot {}", rid, label, s));
      if (sink && s == sink_slot)
        return fail(fmt::format("{}/{} holds the sink slot", rid, label));
      if (seen[static_cast<std::size_t>(s)] == 1)
        return fail(fmt::format("{}/{} holds slot {}, which is free", rid, label, s));
      if (seen[static_cast<std::size_t>(s)] == 2)
        return fail(fmt::format("slot {} is held twice ({}/{} is one holder)", s, rid, label));
      seen[static_cast<std::size_t>(s)] = 2;
      ++held;
    }
  }
  auto detached = check_transfers(seen);
  if (!detached)
    return detached.error();
  if (free_.size() + held + *detached + (sink ? 1 : 0) != slots) {
    return fail(fmt::format("{} free + {} held + {} held by exports only{} != {} slots",
                            free_.size(), held, *detached, sink ? " + the sink" : "", slots));
  }
  auto check_records = [&](const std::vector<reservation>& records,
                           const char* list) -> result<void> {
    for (const auto& r : records) {
      const slot_state* s = find_slot(r.rid, r.label);
      if (s == nullptr || s->index != r.index) {
        return fail(fmt::format("the {} list records slot {} for {}/{}, which does not hold it",
                                list, r.index, r.rid, r.label));
      }
    }
    return {};
  };
  if (auto ok = check_records(live_, "live"); !ok)
    return ok;
  if (auto ok = check_records(imports_, "import"); !ok)
    return ok;
  if (stage_.active) {
    if (auto ok = check_records(stage_.reservations, "staged"); !ok)
      return ok;
  }
  return check_checkpoints();
}

}  // namespace mstar::resources
