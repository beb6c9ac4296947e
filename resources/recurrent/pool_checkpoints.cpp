// recurrent_state_pool: prefix-reuse checkpoints (pool.hpp, "Prefix-reuse
// checkpoints"). Checkpoint slots sit after the addressable ones in the same
// arenas, so a capture or a resume is one `copy_slot` per block, on the
// pool's own memory (host or device). Bookkeeping only here: which key a
// checkpoint slot holds, its lease count and last use.
#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"

namespace mstar::resources {

std::size_t recurrent_state_pool::digest_hash::operator()(const digest256& d) const noexcept {
  std::size_t h = 0;
  std::memcpy(&h, d.data(), sizeof h);  // SHA-256 bytes are already uniform
  return h;
}

void recurrent_state_pool::init_checkpoints() {
  // Checkpoint slots follow the addressable ones; handed out ascending.
  const auto first = static_cast<std::int32_t>(config_.max_slots);
  for (auto s = static_cast<std::int32_t>(config_.arena_slots()) - 1; s >= first; --s)
    ckpt_free_.push_back(s);
  ckpt_counts_.slots = config_.checkpoint_slots;
}

void recurrent_state_pool::ingest_request(const request_id& rid, const kv_prefix_seed* keys) {
  ingest_request(rid);
  if (config_.checkpoint_slots <= 0 || keys == nullptr || keys->keys.empty() ||
      ckpt_streams_.contains(rid))
    return;
  auto chain = start_page_chain(*keys, config_.checkpoint_page_size);
  if (!chain)
    return;  // keys that do not describe a prompt key nothing
  checkpoint_stream cs;
  cs.prompt_slots = static_cast<std::int64_t>(
      keys->slots.value_or(static_cast<std::uint64_t>(chain->keyed_pages) *
                               static_cast<std::uint64_t>(config_.checkpoint_page_size) +
                           chain->unkeyed.size()));
  cs.chain = std::move(*chain);
  cs.ends = keys->ends;
  ckpt_streams_.emplace(rid, std::move(cs));
}

void recurrent_state_pool::extend_chain(const request_id& rid, std::span<const token_id> ids) {
  const auto it = ckpt_streams_.find(rid);
  if (it == ckpt_streams_.end())
    return;
  if (!extend_page_chain(it->second.chain, ids, config_.checkpoint_page_size)) {
    // A chain that cannot key its next page keys nothing more.
    it->second.chain.keyed_pages = 0;
    it->second.chain.keys.clear();
  }
}

void recurrent_state_pool::release_lease(checkpoint_stream& cs) {
  if (!cs.lease)
    return;
  if (const auto it = ckpt_index_.find(*cs.lease); it != ckpt_index_.end())
    --it->second.leases;
  cs.lease.reset();
  cs.lease_tokens = 0;
}

void recurrent_state_pool::forget_checkpoint_stream(const request_id& rid) {
  const auto it = ckpt_streams_.find(rid);
  if (it == ckpt_streams_.end())
    return;
  release_lease(it->second);
  ckpt_streams_.erase(it);
}

std::optional<std::pair<digest256, std::int64_t>> recurrent_state_pool::deepest_checkpoint(
    const checkpoint_stream& cs, std::int64_t limit) const {
  const std::int64_t ps = config_.checkpoint_page_size;
  const std::int64_t pages_per = config_.checkpoint_stride / ps;
  std::optional<std::pair<digest256, std::int64_t>> best;
  std::int64_t pages = std::min(cs.chain.keyed_pages, limit / ps);
  pages -= pages % pages_per;
  for (; pages > 0; pages -= pages_per) {
    const auto& key = cs.chain.keys[static_cast<std::size_t>(pages - 1)];
    if (ckpt_index_.contains(key)) {
      best = {key, pages * ps};
      break;
    }
  }
  // An item's end (an image ending inside a page) may lie deeper.
  for (const auto& e : cs.ends) {
    const auto at = static_cast<std::int64_t>(e.slot);
    if (at <= limit && (!best || at > best->second) && ckpt_index_.contains(e.key))
      best = {e.key, at};
  }
  return best;
}

std::optional<std::int64_t> recurrent_state_pool::resolve_cached_prefix(const request_id& rid) {
  if (config_.checkpoint_slots <= 0)
    return std::nullopt;
  const auto it = ckpt_streams_.find(rid);
  if (it == ckpt_streams_.end())
    return 0;
  auto& cs = it->second;
  if (cs.lease)
    return cs.lease_tokens;  // a repeated probe
  if (cs.length > 0 || has_state(rid))
    return 0;  // already running: nothing to resume
  // Short of the prompt's last token: at least one token runs for logits.
  const auto found = deepest_checkpoint(cs, cs.prompt_slots - 1);
  if (!found)
    return 0;
  ++ckpt_index_.at(found->first).leases;
  cs.lease = found->first;
  cs.lease_tokens = found->second;
  return cs.lease_tokens;
}

std::int64_t recurrent_state_pool::apply_cached_prefix(const request_id& rid, std::int64_t agreed) {
  if (config_.checkpoint_slots <= 0)
    return agreed;
  const auto it = ckpt_streams_.find(rid);
  if (it == ckpt_streams_.end())
    return agreed > 0 ? 0 : agreed;
  auto& cs = it->second;
  if (agreed <= 0) {
    release_lease(cs);
    undo_resume(rid, cs);
    return 0;
  }
  if (cs.length == agreed && has_state(rid))
    return agreed;  // applied already (a repeated round)
  // An earlier round resumed at another length: that state is not the one
  // agreed on now (a request running from fewer tokens on the state of
  // more would be wrong).
  undo_resume(rid, cs);
  // The checkpoint at exactly `agreed`, else the deepest one below it.
  const auto found = deepest_checkpoint(cs, agreed);
  if (!found || found->second != agreed) {
    release_lease(cs);
    return found ? found->second : 0;
  }
  // Resume: a slot for "main" (as an admit would take it) with the state.
  auto& labels = slots_[rid];
  if (!labels.contains("main")) {
    if (free_.empty()) {
      release_lease(cs);
      return 0;
    }
    labels.emplace("main", slot_state{free_.back(), false, 0, 0});
    free_.pop_back();
    cs.took_slot = true;
  }
  slot_state& slot = labels.at("main");
  auto& ck = ckpt_index_.at(found->first);
  copy_slot(ck.index, slot.index);
  slot.has_state = true;
  ck.used = ++ckpt_clock_;
  ++ck.uses;
  release_lease(cs);
  cs.length = agreed;
  cs.resumed = true;
  ++ckpt_counts_.hits;
  ckpt_counts_.hit_tokens += agreed;
  return agreed;
}

void recurrent_state_pool::undo_resume(const request_id& rid, checkpoint_stream& cs) {
  if (!cs.resumed)
    return;
  --ckpt_counts_.hits;
  ckpt_counts_.hit_tokens -= cs.length;
  cs.length = 0;
  cs.resumed = false;
  const auto req = slots_.find(rid);
  if (req == slots_.end())
    return;
  const auto slot = req->second.find("main");
  if (slot == req->second.end())
    return;
  if (cs.took_slot) {
    release_slot(slot->second.index);  // zeroed, and handed out next as it was
    req->second.erase(slot);
  } else {
    zero_slot(slot->second.index);
    slot->second.has_state = false;
  }
  cs.took_slot = false;
}

std::optional<std::int32_t> recurrent_state_pool::take_checkpoint_slot() {
  if (!ckpt_free_.empty()) {
    const auto s = ckpt_free_.back();
    ckpt_free_.pop_back();
    return s;
  }
  // The least recently used checkpoint no request is about to resume from,
  // one that served a single request first (segmented LRU): a prefix many
  // requests crossed or resumed from (a shared system prompt) outlives a
  // burst of boundaries only one request will ever reach.
  auto victim = ckpt_index_.end();
  auto rank = [](const checkpoint& c) { return std::pair{c.uses > 1, c.used}; };
  for (auto it = ckpt_index_.begin(); it != ckpt_index_.end(); ++it) {
    if (it->second.leases == 0 &&
        (victim == ckpt_index_.end() || rank(it->second) < rank(victim->second)))
      victim = it;
  }
  if (victim == ckpt_index_.end())
    return std::nullopt;
  const auto s = victim->second.index;
  ckpt_index_.erase(victim);
  ++ckpt_counts_.evicted;
  return s;  // overwritten whole by the capture
}

void recurrent_state_pool::capture_checkpoint(const request_id& rid, std::int32_t slot,
                                              std::int64_t span) {
  const auto it = ckpt_streams_.find(rid);
  if (it == ckpt_streams_.end())
    return;
  auto& cs = it->second;
  cs.length += span;
  cs.resumed = false;  // a step ran on the resumed state: it is the stream's own now
  cs.took_slot = false;
  const std::int64_t ps = config_.checkpoint_page_size;
  if (cs.length % config_.checkpoint_stride == 0 && cs.length / ps <= cs.chain.keyed_pages)
    capture_under(cs.chain.keys[static_cast<std::size_t>(cs.length / ps - 1)], slot);
  // The state right after an image that ends inside a page (the scheduler
  // ends a prefill chunk there), under that end's key.
  for (const auto& e : cs.ends) {
    if (static_cast<std::int64_t>(e.slot) == cs.length)
      capture_under(e.key, slot);
  }
}

void recurrent_state_pool::capture_under(const digest256& key, std::int32_t slot) {
  if (const auto found = ckpt_index_.find(key); found != ckpt_index_.end()) {
    found->second.used = ++ckpt_clock_;  // the same prefix, the same state
    ++found->second.uses;
    return;
  }
  const auto target = take_checkpoint_slot();
  if (!target)
    return;
  copy_slot(slot, *target);
  ckpt_index_.emplace(key, checkpoint{*target, ++ckpt_clock_, 0, 1});
  ++ckpt_counts_.captured;
}

recurrent_state_pool::checkpoint_stats recurrent_state_pool::checkpoints() const noexcept {
  auto s = ckpt_counts_;
  s.held = static_cast<std::int64_t>(ckpt_index_.size());
  s.leased = 0;
  for (const auto& [key, ck] : ckpt_index_)
    s.leased += ck.leases > 0 ? 1 : 0;
  return s;
}

bool recurrent_state_pool::has_checkpoint(const digest256& key) const {
  return ckpt_index_.contains(key);
}

result<void> recurrent_state_pool::check_checkpoints() const {
  auto fail = [&](std::string what) {
    return make_error(errc::out_of_range, fmt::format("recurrent state pool '{}' checkpoints: {}",
                                                      key_, std::move(what)));
  };
  const auto first = config_.max_slots;
  const auto end = config_.arena_slots();
  std::vector<std::uint8_t> seen(static_cast<std::size_t>(end - first), 0);
  auto mark = [&](std::int32_t s, const char* as) -> result<void> {
    if (s < first || s >= end)
      return fail(fmt::format("{} slot {} is outside [{}, {})", as, s, first, end));
    auto& m = seen[static_cast<std::size_t>(s - first)];
    if (m != 0)
      return fail(fmt::format("slot {} is both free and held, or held twice", s));
    m = 1;
    return {};
  };
  for (const auto s : ckpt_free_) {
    if (auto ok = mark(s, "free"); !ok)
      return ok;
  }
  std::int64_t leases = 0;
  for (const auto& [key, ck] : ckpt_index_) {
    if (auto ok = mark(ck.index, "held"); !ok)
      return ok;
    if (ck.leases < 0)
      return fail(fmt::format("slot {} has {} leases", ck.index, ck.leases));
    leases += ck.leases;
  }
  std::size_t importing = 0;
  for (const auto& [rid, pending] : ckpt_imports_) {
    for (const auto& c : pending) {
      if (auto ok = mark(c.slot, "importing"); !ok)
        return ok;
      ++importing;
    }
  }
  if (static_cast<std::int64_t>(ckpt_free_.size() + ckpt_index_.size() + importing) !=
      config_.checkpoint_slots) {
    return fail(fmt::format("{} free + {} held + {} importing != {} checkpoint slots",
                            ckpt_free_.size(), ckpt_index_.size(), importing,
                            config_.checkpoint_slots));
  }
  std::int64_t held_leases = 0;
  for (const auto& [rid, held] : ckpt_exports_) {
    for (const auto& key : held) {
      if (!ckpt_index_.contains(key))
        return fail(fmt::format("the export of {} holds a checkpoint that is gone", rid));
      ++held_leases;
    }
  }
  for (const auto& [rid, cs] : ckpt_streams_) {
    if (!cs.lease)
      continue;
    if (!ckpt_index_.contains(*cs.lease))
      return fail(fmt::format("{} leases a checkpoint that is gone", rid));
    ++held_leases;
  }
  if (held_leases != leases)
    return fail(
        fmt::format("{} leases counted, {} held by requests and exports", leases, held_leases));
  return {};
}

}  // namespace mstar::resources
