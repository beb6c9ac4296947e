// kv_pool: item ends (reference §1.7 `end_key`, §3.6.7 "image ends"). When
// an image ends inside a page, that page's key also names the text after
// it, so a prompt with the same text and image but other text after misses
// the page. The page's head, its slots up to the image's end, is indexed
// under the end key instead: a copy (the request's own page keeps its full
// key), taken from free pages only and held by the index alone. A probe
// whose matched run stops right before such a page looks the end key up,
// leases the copy and takes a fresh page, into which the head is copied
// when the lease converts at admit. A length the pools agree on inside a
// page the lease holds whole (another pool's state stops at an item end
// there) is served the same way, from that page (`lease_head`). A stream
// moving to another pool takes the copies of its ends along
// (`kv_export::ends`), so the importer's index holds what the exporter's
// does for the moved pages.
#include <algorithm>

#include "resources/kv/kv_pool.hpp"
#include "resources/kv/kv_pool_state.hpp"

namespace mstar::resources {

std::optional<std::int64_t> kv_pool::lease_item_end(stream_state& st) {
  if (!index_ || !st.chain || st.end_lease)
    return std::nullopt;
  const auto ps = static_cast<std::uint64_t>(config_.geometry.page_size);
  const auto from = static_cast<std::uint64_t>(st.lease.size()) * ps;
  // The deepest end on the page right after the matched run, short of the
  // prompt's last slot (one token at least runs for the logits).
  auto& ends = st.chain->ends;
  for (auto e = ends.rbegin(); e != ends.rend(); ++e) {
    if (e->slot <= from || e->slot >= from + ps || e->slot >= st.chain->prompt_slots)
      continue;
    const auto found = index_->lookup(std::span<const digest256>{&e->rooted, 1});
    if (found.empty())
      continue;
    // Leased first, so taking the page for the copy never evicts it.
    arena_.retain(found.front());
    const auto fresh = take_head_page();
    if (!fresh) {
      arena_.release(found.front());
      return std::nullopt;
    }
    st.end_lease = kv_end_lease{found.front(), *fresh, static_cast<std::int64_t>(e->slot)};
    return st.end_lease->tokens;
  }
  return std::nullopt;
}

std::optional<page_id> kv_pool::take_head_page() {
  // A page of the stream's own for a head, evicting one cached page if that
  // is what it takes (leased pages have two owners: never evicted).
  if (arena_.num_free() == 0 && index_->evictable() > 0)
    (void)index_->evict(1);
  std::vector<page_id> fresh;
  if (!arena_.try_allocate(1, fresh))
    return std::nullopt;
  return fresh.front();
}

bool kv_pool::lease_head(stream_state& st, std::int64_t tokens) {
  const std::int64_t ps = config_.geometry.page_size;
  const auto page = static_cast<std::size_t>(tokens / ps);
  // The end copy of that page is as long or longer: its head serves.
  if (st.end_lease && static_cast<std::size_t>(st.end_lease->tokens / ps) == page &&
      st.end_lease->tokens >= tokens) {
    st.end_lease->tokens = tokens;
    return true;
  }
  // A whole leased page: its first slots are the prompt's as an end copy's
  // would be (the page's key names them and the slots before).
  if (st.lease.size() <= page)
    return false;
  std::optional<page_id> fresh;
  if (st.end_lease) {
    // An end past that page (the page after the lease): its own page takes
    // this head instead.
    fresh = st.end_lease->fresh;
    arena_.release(st.end_lease->cached);
    st.end_lease.reset();
  } else {
    fresh = take_head_page();
    if (!fresh)
      return false;
  }
  arena_.retain(st.lease[page]);  // the lease lets go of it when trimmed to `page`
  st.end_lease = kv_end_lease{st.lease[page], *fresh, tokens};
  return true;
}

void kv_pool::release_end_lease(stream_state& st) {
  if (!st.end_lease)
    return;
  arena_.release(st.end_lease->cached);
  arena_.release(st.end_lease->fresh);
  st.end_lease.reset();
}

void kv_pool::convert_end_lease(stream_state& st) {
  if (!st.end_lease)
    return;
  const auto& lease = *st.end_lease;
  const std::int64_t ps = config_.geometry.page_size;
  // Only a lease right after the whole pages converted with it applies.
  if (lease.tokens / ps != static_cast<std::int64_t>(st.pages.size())) {
    release_end_lease(st);
    return;
  }
  storage_->copy_slots(config_.geometry, lease.cached, lease.fresh,
                       static_cast<std::size_t>(lease.tokens % ps));
  st.pages.push_back(lease.fresh);
  st.stored_len = lease.tokens;
  arena_.release(lease.cached);
  st.end_lease.reset();
}

void kv_pool::index_item_ends(stream_state& st) {
  auto& c = *st.chain;
  const std::int64_t ps = config_.geometry.page_size;
  for (auto& e : c.ends) {
    if (e.indexed || static_cast<std::int64_t>(e.slot) > st.stored_len)
      continue;
    const auto page = static_cast<std::size_t>(e.slot / static_cast<std::uint64_t>(ps));
    if (page >= st.pages.size())
      continue;
    e.indexed = true;  // one offer per end, whatever its outcome
    if (index_->page_for(e.rooted))
      continue;  // cached already (this stream may have been served from it)
    std::optional<page_id> parent;
    if (page > 0) {
      parent = index_->page_for(c.rooted[page - 1]);
      if (!parent)
        continue;  // the pages before it are not cached: nothing would find it
    }
    // A copy from free pages only: the cache never evicts to grow itself.
    std::vector<page_id> copy;
    if (!arena_.try_allocate(1, copy))
      continue;
    storage_->copy_slots(config_.geometry, st.pages[page], copy.front(),
                         static_cast<std::size_t>(e.slot % static_cast<std::uint64_t>(ps)));
    const bool indexed = index_->insert(e.rooted, copy.front(), parent);
    arena_.release(copy.front());  // the index, when it took it, is the sole owner
    (void)indexed;
  }
}

std::vector<kv_end_page> kv_pool::exported_ends(const stream_state& st,
                                                std::size_t keyed_pages) const {
  std::vector<kv_end_page> out;
  if (!index_ || !st.chain)
    return out;
  const std::int64_t ps = config_.geometry.page_size;
  for (const auto& e : st.chain->ends) {
    const auto slot = static_cast<std::int64_t>(e.slot);
    // Inside a stored page whose parent (if any) the export keys.
    if (slot % ps == 0 || slot > st.stored_len || static_cast<std::size_t>(slot / ps) > keyed_pages)
      continue;
    if (const auto copy = index_->page_for(e.rooted))
      out.push_back({slot, e.rooted, *copy});
  }
  return out;
}

void kv_pool::take_import_ends(stream_state& st, const kv_export& from, kv_import& out) {
  const std::int64_t ps = config_.geometry.page_size;
  for (const auto& e : from.ends) {
    if (index_->page_for(e.key))
      continue;  // cached here already
    if (std::any_of(st.import_ends.begin(), st.import_ends.end(),
                    [&](const kv_import_end& taken) { return taken.key == e.key; }))
      continue;
    // A copy from free pages only, as the exporter took it.
    std::vector<page_id> copy;
    if (!arena_.try_allocate(1, copy))
      break;
    const auto page = static_cast<std::size_t>(e.slot / ps);
    std::optional<digest256> parent;
    if (page > 0)
      parent = from.page_keys[page - 1];
    st.import_ends.push_back({e.key, parent, copy.front()});
    out.end_fetch.push_back({copy.front(), e.page});
  }
}

void kv_pool::index_import(stream_state& st) {
  if (!st.chain) {
    // No chain to continue (check_export), but the whole pages' keys came
    // along: they name these pages here as they do on the exporter.
    for (std::size_t i = 0; i < st.import_keys.size(); ++i) {
      std::optional<page_id> parent;
      if (i > 0) {
        parent = index_->page_for(st.import_keys[i - 1]);
        if (!parent)
          break;
      }
      (void)index_->insert(st.import_keys[i], st.pages[i], parent);
    }
  }
  for (const auto& e : st.import_ends) {
    std::optional<page_id> parent;
    if (e.parent)
      parent = index_->page_for(*e.parent);
    if (!e.parent || parent)
      (void)index_->insert(e.key, e.page, parent);
    arena_.release(e.page);  // the index, when it took it, is the sole owner
  }
  st.import_ends.clear();
  st.import_keys.clear();
}

void kv_pool::drop_import_ends(stream_state& st, bool exact) {
  if (exact) {
    std::vector<page_id> pages;
    for (const auto& e : st.import_ends)
      pages.push_back(e.page);
    arena_.unallocate(pages);
  } else {
    for (const auto& e : st.import_ends)
      arena_.release(e.page);
  }
  st.import_ends.clear();
  st.import_keys.clear();
}

}  // namespace mstar::resources
