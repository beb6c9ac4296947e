// recurrent_state_pool: moving a stream's slot between pools (ARCHITECTURE.md
// "Disaggregated prefill and decode"): export holds on the publishing side,
// import / finish / abort on the adopting side. Bookkeeping only: the
// transfer agent copies the slot's bytes between the two calls.
#include <algorithm>
#include <fmt/format.h>

#include "resources/recurrent/pool.hpp"

namespace mstar::resources {

result<recurrent_export> recurrent_state_pool::export_slot(const request_id& rid,
                                                           const std::string& label) {
  const auto refuse = [&](errc code, std::string_view why) {
    return make_error(code, fmt::format("recurrent state pool '{}' cannot export {}/{}: {}", key_,
                                        rid, label, why));
  };
  slot_state* slot = find_slot(rid, label);
  if (slot == nullptr)
    return refuse(errc::not_found, "it holds no slot");
  if (slot->importing)
    return refuse(errc::invalid_argument, "it is still importing");
  if (slot->exported)
    return refuse(errc::invalid_argument, "it is already exported (release_export first)");
  if (std::any_of(live_.begin(), live_.end(),
                  [&](const reservation& r) { return r.rid == rid && r.label == label; })) {
    return refuse(errc::invalid_argument, "the admitted step reserved it");
  }
  drop_stage_naming(rid);  // a staged step would write what is published
  slot->exported = true;
  exports_[rid][label] = slot->index;
  recurrent_export out{slot->index,
                       slot->has_state,
                       slot->generation,
                       static_cast<std::int64_t>(config_.slot_bytes()),
                       {}};
  if (label == "main")
    out.checkpoints = export_checkpoints(rid);
  return out;
}

std::vector<recurrent_checkpoint> recurrent_state_pool::export_checkpoints(const request_id& rid) {
  std::vector<recurrent_checkpoint> out;
  const auto cs = ckpt_streams_.find(rid);
  if (cs == ckpt_streams_.end())
    return out;
  auto& held = ckpt_exports_[rid];
  for (const auto& e : cs->second.ends) {
    const auto ck = ckpt_index_.find(e.key);
    if (static_cast<std::int64_t>(e.slot) > cs->second.length || ck == ckpt_index_.end() ||
        std::find(held.begin(), held.end(), e.key) != held.end())
      continue;
    ++ck->second.leases;  // published: no capture evicts it until release_export
    held.push_back(e.key);
    out.push_back({e.key, ck->second.index});
  }
  if (held.empty())
    ckpt_exports_.erase(rid);
  return out;
}

void recurrent_state_pool::release_export_checkpoints(const request_id& rid) {
  const auto held = ckpt_exports_.find(rid);
  if (held == ckpt_exports_.end())
    return;
  for (const auto& key : held->second) {
    if (const auto ck = ckpt_index_.find(key); ck != ckpt_index_.end())
      --ck->second.leases;
  }
  ckpt_exports_.erase(held);
}

void recurrent_state_pool::import_checkpoints(const request_id& rid, const recurrent_export& from,
                                              recurrent_import& out) {
  if (config_.checkpoint_slots <= 0 || from.checkpoints.empty())
    return;
  auto& pending = ckpt_imports_[rid];
  for (const auto& c : from.checkpoints) {
    const auto same = [&](const recurrent_checkpoint& p) { return p.key == c.key; };
    if (ckpt_index_.contains(c.key) || std::any_of(pending.begin(), pending.end(), same))
      continue;
    // A slot as a capture here would take it (a free one, else the least
    // recently used unleased checkpoint's).
    const auto target = take_checkpoint_slot();
    if (!target)
      break;
    pending.push_back({c.key, *target});
    out.checkpoints.push_back({*target, c.slot});
  }
  if (pending.empty())
    ckpt_imports_.erase(rid);
}

void recurrent_state_pool::finish_checkpoint_imports(const request_id& rid) {
  const auto pending = ckpt_imports_.find(rid);
  if (pending == ckpt_imports_.end())
    return;
  for (const auto& c : pending->second) {
    if (ckpt_index_.contains(c.key))
      ckpt_free_.push_back(c.slot);  // captured here meanwhile
    else
      ckpt_index_.emplace(c.key, checkpoint{c.slot, ++ckpt_clock_, 0, 1});
  }
  ckpt_imports_.erase(pending);
}

void recurrent_state_pool::drop_checkpoint_imports(const request_id& rid) {
  const auto pending = ckpt_imports_.find(rid);
  if (pending == ckpt_imports_.end())
    return;
  for (auto c = pending->second.rbegin(); c != pending->second.rend(); ++c)
    ckpt_free_.push_back(c->slot);  // newest first, so the free stack reads as before
  ckpt_imports_.erase(pending);
}

result<void> recurrent_state_pool::release_export(const request_id& rid) {
  const auto it = exports_.find(rid);
  if (it == exports_.end()) {
    return make_error(errc::not_found, fmt::format("recurrent state pool '{}' holds no export of "
                                                   "request {}",
                                                   key_, rid));
  }
  for (const auto& [label, index] : it->second) {
    slot_state* slot = find_slot(rid, label);
    if (slot != nullptr && slot->index == index && slot->exported)
      slot->exported = false;  // the request still holds it
    else
      release_slot(index);
  }
  exports_.erase(it);
  release_export_checkpoints(rid);
  return {};
}

bool recurrent_state_pool::held_by_export(const request_id& rid, const std::string& label,
                                          std::int32_t index) const {
  const auto it = exports_.find(rid);
  if (it == exports_.end())
    return false;
  const auto held = it->second.find(label);
  return held != it->second.end() && held->second == index;
}

result<recurrent_import> recurrent_state_pool::import_slot(const request_id& rid,
                                                           const std::string& label,
                                                           const recurrent_export& from) {
  // Its state arrives from elsewhere: no checkpoint is taken of a stream
  // whose length this pool did not see grow.
  forget_checkpoint_stream(rid);
  const std::string context =
      fmt::format("recurrent state pool '{}' importing {}/{}", key_, rid, label);
  if (from.slot_bytes != static_cast<std::int64_t>(config_.slot_bytes())) {
    return make_error(errc::invalid_argument,
                      fmt::format("{}: the export's slot holds {} bytes but this pool's hold {}",
                                  context, from.slot_bytes, config_.slot_bytes()));
  }
  if (find_slot(rid, label) != nullptr)
    return make_error(errc::invalid_argument, context + ": it holds a slot already");
  if (free_.empty()) {
    return make_error(errc::out_of_range,
                      fmt::format("{}: the pool is full ({} usable slots, none free; 1 slot short)",
                                  context, config_.usable_slots()));
  }
  std::vector<reservation> taken;
  slot_state& slot = *take_slot(rid, label, taken);  // a slot is free: cannot fail
  slot.importing = true;
  slot.imported_state = from.has_state;
  slot.generation = from.generation;
  imports_.push_back(taken.front());
  recurrent_import out{slot.index, from.slot, {}};
  import_checkpoints(rid, from, out);
  return out;
}

result<void> recurrent_state_pool::finish_import(const request_id& rid) {
  bool any = false;
  for (auto it = imports_.begin(); it != imports_.end();) {
    if (it->rid != rid) {
      ++it;
      continue;
    }
    if (slot_state* slot = find_slot(rid, it->label)) {
      slot->importing = false;
      slot->has_state = slot->imported_state;
    }
    it = imports_.erase(it);
    any = true;
  }
  if (!any) {
    return make_error(errc::not_found, fmt::format("recurrent state pool '{}' has no import of "
                                                   "request {} to finish",
                                                   key_, rid));
  }
  finish_checkpoint_imports(rid);
  return {};
}

result<void> recurrent_state_pool::abort_import(const request_id& rid) {
  std::vector<reservation> mine;
  for (auto it = imports_.begin(); it != imports_.end();) {
    if (it->rid == rid) {
      mine.push_back(std::move(*it));
      it = imports_.erase(it);
    } else {
      ++it;
    }
  }
  if (mine.empty()) {
    return make_error(errc::not_found, fmt::format("recurrent state pool '{}' has no import of "
                                                   "request {} to abort",
                                                   key_, rid));
  }
  drop_checkpoint_imports(rid);
  unwind(mine, 0);  // the admit unwind: newest first, zeroed, free list restored
  return {};
}

bool recurrent_state_pool::importing(const request_id& rid) const {
  return std::any_of(imports_.begin(), imports_.end(),
                     [&](const reservation& r) { return r.rid == rid; });
}

std::vector<std::string> recurrent_state_pool::labels(const request_id& rid) const {
  std::vector<std::string> out;
  if (const auto it = slots_.find(rid); it != slots_.end()) {
    for (const auto& [label, slot] : it->second)
      out.push_back(label);
  }
  return out;
}

result<std::size_t> recurrent_state_pool::check_transfers(std::vector<std::uint8_t>& seen) const {
  auto fail = [&](std::string what) {
    return make_error(errc::out_of_range,
                      fmt::format("recurrent state pool '{}': {}", key_, std::move(what)));
  };
  // `seen`: 0 unseen, 1 free, 2 held by a request; 3 marks a slot only an
  // export holds.
  std::size_t detached = 0;
  for (const auto& [rid, held] : exports_) {
    for (const auto& [label, index] : held) {
      if (index < 0 || static_cast<std::size_t>(index) >= seen.size())
        return fail(
            fmt::format("the export of {}/{} holds out-of-range slot {}", rid, label, index));
      const slot_state* slot = find_slot(rid, label);
      if (slot != nullptr && slot->index == index && slot->exported)
        continue;
      auto& mark = seen[static_cast<std::size_t>(index)];
      if (mark != 0) {
        return fail(fmt::format("the export of {}/{} holds slot {}, which is {}", rid, label, index,
                                mark == 1 ? "free" : "held elsewhere"));
      }
      mark = 3;
      ++detached;
    }
  }
  std::size_t importing = 0;
  for (const auto& [rid, labels] : slots_) {
    for (const auto& [label, slot] : labels) {
      if (slot.exported && !held_by_export(rid, label, slot.index))
        return fail(fmt::format("{}/{} is marked exported but no export holds it", rid, label));
      if (slot.importing)
        ++importing;
    }
  }
  if (importing != imports_.size()) {
    return fail(
        fmt::format("{} importing slots but {} import records", importing, imports_.size()));
  }
  return detached;
}

}  // namespace mstar::resources
