// kv_pool: prefix reuse (leases, conversion, indexing at commit, generation
// keying), retention, inspection and the conservation check.
#include <algorithm>
#include <fmt/format.h>

#include "resources/kv/kv_pool.hpp"
#include "resources/kv/kv_pool_state.hpp"

namespace mstar::resources {

kv_prefix_seed make_prefix_seed(prompt_keys keyed, std::int64_t page_size, byte_view root) {
  kv_prefix_seed seed;
  if (page_size >= 1 && keyed.total_slots % static_cast<std::uint64_t>(page_size) != 0) {
    const auto partial = keyed.total_slots / static_cast<std::uint64_t>(page_size);
    if (const auto it = keyed.items.find(partial); it != keyed.items.end())
      seed.tail_items = std::move(it->second);
  }
  seed.keys = std::move(keyed.keys);
  seed.tail = std::move(keyed.tail);
  seed.slots = keyed.total_slots;
  seed.root.assign(root.begin(), root.end());
  seed.ends = std::move(keyed.ends);
  return seed;
}

result<kv_prefix_seed> prefix_seed_from_rows(std::vector<digest256> keys,
                                             std::vector<token_id> tail,
                                             std::span<const prefix_span> rows,
                                             std::int64_t page_size) {
  auto layout = layout_of_rows(rows);
  if (!layout)
    return layout.error();
  auto items = page_items(*layout, page_size);
  if (!items)
    return items.error().with_context("prefix_layout");
  prompt_keys prompt;
  prompt.keys = std::move(keys);
  prompt.tail = std::move(tail);
  prompt.items = std::move(*items);
  for (const auto& span : *layout)
    prompt.total_slots += span.length;  // page_items refused a sum past 2^32
  // The chain generation would start from checks keys, tail and items agree.
  if (auto ok = start_page_chain(prompt, page_size); !ok)
    return ok.error().with_context("prefix_keys, prefix_tail and prefix_layout");
  prompt.ends = item_ends_of_rows(rows, page_size);
  return make_prefix_seed(std::move(prompt), page_size);
}

result<page_chain> start_page_chain(const kv_prefix_seed& seed, std::int64_t page_size) {
  if (page_size < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("page_size must be >= 1, got {}", page_size));
  }
  const auto ps = static_cast<std::uint64_t>(page_size);
  prompt_keys prompt;
  prompt.keys = seed.keys;
  prompt.tail = seed.tail;
  if (seed.slots) {
    prompt.total_slots = *seed.slots;
  } else {
    // An ids-only seed: with a tail, the last key is the partial page's. A
    // seed with a tail but no keys at all (a hostile sim line) keys nothing
    // yet; without the guard keyed_pages went to -1 and the next extend
    // indexed keys[-2] (found by tests/fuzz/tool_sim_fuzz.cpp).
    const auto whole = seed.keys.size() - (seed.tail.empty() || seed.keys.empty() ? 0 : 1);
    prompt.total_slots = whole * ps + seed.tail.size();
  }
  if (!seed.tail_items.empty())
    prompt.items[prompt.total_slots / ps] = seed.tail_items;
  return start_page_chain(prompt, page_size, seed.root);
}

std::optional<kv_pool::chain_state> kv_pool::make_chain(const kv_prefix_seed& seed) const {
  auto page = start_page_chain(seed, config_.geometry.page_size);
  if (!page)
    return std::nullopt;  // keys that describe no prompt key nothing
  chain_state c;
  c.page = std::move(*page);
  c.rooted.reserve(c.page.keys.size());
  for (const auto& k : c.page.keys)
    c.rooted.push_back(fingerprint(root_, k));
  c.prompt_slots = seed.slots.value_or(0);
  for (const auto& e : seed.ends)
    c.ends.push_back({e.slot, fingerprint(root_, e.key), false});
  return c;
}

std::optional<std::int64_t> kv_pool::resolve_cached_prefix(const request_id& rid) {
  if (!index_)
    return std::nullopt;
  const auto it = requests_.find(rid);
  if (it == requests_.end() || !it->second->prefix_cache || it->second->seeds.empty()) {
    return std::nullopt;
  }
  std::optional<std::int64_t> answer;
  for (const auto& [label, seed] : it->second->seeds) {
    stream_state& st = stream_for(rid, label, nullptr);
    std::int64_t tokens = 0;
    if (st.converted || st.stored_len > 0) {
      tokens = st.stored_len;  // a repeat probe after conversion
    } else if (st.end_lease) {
      tokens = st.end_lease->tokens;
    } else if (!st.lease.empty()) {
      tokens = static_cast<std::int64_t>(st.lease.size()) * config_.geometry.page_size;
    } else if (st.chain && !st.chain->rooted.empty()) {
      auto matched = index_->lookup(st.chain->rooted);
      // Stop one key short: a fully cached prompt still runs one token.
      const auto limit = st.chain->rooted.size() - 1;
      if (matched.size() > limit)
        matched.resize(limit);
      for (const page_id p : matched)
        arena_.retain(p);
      st.lease = std::move(matched);
      tokens = static_cast<std::int64_t>(st.lease.size()) * config_.geometry.page_size;
      // An image ending inside the next page: its head may be cached too.
      if (const auto end = lease_item_end(st))
        tokens = *end;
    }
    answer = answer ? std::min(*answer, tokens) : tokens;
  }
  return answer;
}

std::int64_t kv_pool::apply_cached_prefix(const request_id& rid, std::int64_t agreed) {
  const auto it = requests_.find(rid);
  if (it == requests_.end())
    return agreed;
  const std::int64_t ps = config_.geometry.page_size;
  const auto keep = static_cast<std::size_t>(std::max<std::int64_t>(0, agreed) / ps);
  const bool inside = agreed > 0 && agreed % ps != 0;
  std::int64_t kept = agreed;
  for (auto& [label, st] : it->second->streams) {
    // Inside a page an end lease serves (or served) the agreed length: an
    // item end's, or one made now from the page it ends in when the lease
    // or the end copy holds that page (the other pools' deepest state may
    // lie inside a page this one matched whole). Without one the stream
    // keeps whole pages, and says so.
    bool served = st.converted && st.stored_len == agreed;
    if (inside && !served && !st.converted)
      served = (st.end_lease && st.end_lease->tokens == agreed) || lease_head(st, agreed);
    while (st.lease.size() > keep) {
      arena_.release(st.lease.back());
      st.lease.pop_back();
    }
    if (st.end_lease && st.end_lease->tokens != agreed)
      release_end_lease(st);
    if (inside && !served)
      kept = std::min(kept, static_cast<std::int64_t>(keep) * ps);
  }
  return kept;
}

void kv_pool::convert_lease(stream_state& st) {
  // The lease's references become the stream's ownership of its first pages.
  st.pages = std::move(st.lease);
  st.lease.clear();
  st.stored_len = static_cast<std::int64_t>(st.pages.size()) * config_.geometry.page_size;
  if (st.chain)
    st.chain->cursor = static_cast<std::int64_t>(st.pages.size());
  convert_end_lease(st);
  st.converted = true;
  ++st.generation;
}

void kv_pool::index_pages(const request_id& rid, const std::string& label, stream_state& st) {
  (void)label;
  if (!index_ || !st.chain)
    return;
  if (st.released > 0) {
    st.chain.reset();  // pages no longer start at slot 0: keys cannot name them
    return;
  }
  const auto& req = *requests_.at(rid);
  if (!req.prefix_cache)
    return;
  auto& c = *st.chain;
  std::int64_t whole = std::min(st.stored_len / config_.geometry.page_size, c.page.keyed_pages);
  if (st.retention)
    whole = std::min(whole, st.protected_prefix / config_.geometry.page_size);
  for (std::int64_t i = c.cursor; i < whole; ++i) {
    std::optional<page_id> parent;
    if (i > 0) {
      // Chain under the page the index names for the previous key: after a
      // lost race the stream's own copy is private.
      parent = index_->page_for(c.rooted[static_cast<std::size_t>(i - 1)]);
      if (!parent)
        break;  // the parent was evicted: nothing below it can be indexed
    }
    (void)index_->insert(c.rooted[static_cast<std::size_t>(i)],
                         st.pages[static_cast<std::size_t>(i)], parent);
    c.cursor = i + 1;
  }
  if (!st.retention)
    index_item_ends(st);
}

void kv_pool::extend_prefix_chain(const request_id& rid, const std::string& label,
                                  std::span<const token_id> ids) {
  stream_state* st = find_stream(rid, label);
  if (st == nullptr || !st->chain)
    return;
  auto& c = *st->chain;
  const auto added = extend_page_chain(c.page, ids, config_.geometry.page_size);
  if (!added) {
    st->chain.reset();  // a chain that cannot key its next page keys nothing more
    return;
  }
  const auto first = static_cast<std::size_t>(c.page.keyed_pages - *added);
  c.rooted.resize(std::max(c.rooted.size(), c.page.keys.size()));
  for (auto i = first; i < static_cast<std::size_t>(c.page.keyed_pages); ++i)
    c.rooted[i] = fingerprint(root_, c.page.keys[i]);
}

std::int64_t kv_pool::release_front(stream_state& st, std::int64_t tokens) {
  const std::int64_t ps = config_.geometry.page_size;
  const std::int64_t first = (st.protected_prefix + ps - 1) / ps;  // the straddling page stays
  const std::int64_t releasable = st.stored_len / ps - first;      // a partial tail page stays
  const std::int64_t k = std::min(tokens / ps, releasable);
  if (k <= 0)
    return 0;
  const auto b = st.pages.begin() + first;
  for (auto p = b; p != b + k; ++p)
    arena_.release(*p);
  st.pages.erase(b, b + k);
  st.stored_len -= k * ps;
  st.released += k * ps;
  ++st.generation;
  st.chain.reset();
  return k * ps;
}

result<void> kv_pool::protect_prefix(const request_id& rid, const std::string& label,
                                     std::int64_t tokens) {
  stream_state* st = find_stream(rid, label);
  if (st == nullptr) {
    return make_error(errc::not_found, fmt::format("no stream {}/{}", rid, label));
  }
  if (tokens < 0 || tokens > st->stored_len) {
    return make_error(errc::out_of_range,
                      fmt::format("protect_prefix({}) on {}/{} is outside the committed {} tokens",
                                  tokens, rid, label, st->stored_len));
  }
  if (st->protected_prefix == tokens)
    return {};
  if (st->released > 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("protect_prefix on {}/{} must precede any release", rid, label));
  }
  if (st->protected_prefix != 0) {
    return make_error(errc::invalid_argument, fmt::format("{}/{} already protects {} tokens", rid,
                                                          label, st->protected_prefix));
  }
  st->protected_prefix = tokens;
  return {};
}

result<std::int64_t> kv_pool::release_oldest(const request_id& rid, const std::string& label,
                                             std::int64_t tokens) {
  stream_state* st = find_stream(rid, label);
  if (st == nullptr) {
    return make_error(errc::not_found, fmt::format("no stream {}/{}", rid, label));
  }
  if (st->step_in_flight || st->importing) {
    return make_error(
        errc::invalid_argument,
        fmt::format("release_oldest on {}/{} under an admitted step or an import", rid, label));
  }
  if (tokens < 0) {
    return make_error(errc::invalid_argument, fmt::format("cannot release {} tokens", tokens));
  }
  return release_front(*st, tokens);
}

std::optional<kv_stream_info> kv_pool::stream(const request_id& rid,
                                              const std::string& label) const {
  const stream_state* st = find_stream(rid, label);
  if (st == nullptr)
    return std::nullopt;
  return kv_stream_info{st->stored_len,
                        st->released,
                        st->protected_prefix,
                        st->pages,
                        st->generation,
                        st->reset_generation,
                        static_cast<std::int64_t>(st->lease.size())};
}

std::map<std::string, kv_stream_info> kv_pool::streams() const {
  std::map<std::string, kv_stream_info> out;
  for (const auto& [rid, req] : requests_) {
    for (const auto& [label, st] : req->streams)
      out.emplace(rid + "/" + label, *stream(rid, label));
  }
  return out;
}

result<void> kv_pool::check_invariants() const {
  if (auto ok = storage_->status(); !ok)
    return ok.error().with_context("kv pool '" + key_ + "' storage");
  if (auto ok = arena_.check_invariants(); !ok)
    return ok;
  if (index_) {
    if (auto ok = index_->check_invariants(); !ok)
      return ok;
  }
  std::vector<std::int32_t> refs(static_cast<std::size_t>(arena_.num_pages()), 0);
  refs[sink_page] = 1;
  for (page_id p = 0; p < arena_.num_pages(); ++p) {
    if (index_ && index_->indexes(p))
      ++refs[static_cast<std::size_t>(p)];
  }
  for (const auto& [rid, held] : exports_) {
    for (const auto& [label, pages] : held) {
      for (const page_id p : pages)
        ++refs[static_cast<std::size_t>(p)];
    }
  }
  if (auto ok = check_transfers(); !ok)
    return ok;
  const std::int64_t ps = config_.geometry.page_size;
  for (const auto& [rid, req] : requests_) {
    for (const auto& [label, st] : req->streams) {
      const std::string name = rid + "/" + label;
      if (static_cast<std::int64_t>(st.pages.size()) < (st.stored_len + ps - 1) / ps) {
        return make_error(errc::out_of_range, fmt::format("{} stores {} tokens in only {} pages",
                                                          name, st.stored_len, st.pages.size()));
      }
      for (const page_id p : st.pages)
        ++refs[static_cast<std::size_t>(p)];
      for (const page_id p : st.lease)
        ++refs[static_cast<std::size_t>(p)];
      if (st.end_lease) {
        ++refs[static_cast<std::size_t>(st.end_lease->cached)];
        ++refs[static_cast<std::size_t>(st.end_lease->fresh)];
      }
      if (!st.importing && !st.import_ends.empty())
        return make_error(errc::out_of_range,
                          fmt::format("{} holds end copies of an import it is not in", name));
      for (const auto& e : st.import_ends)
        ++refs[static_cast<std::size_t>(e.page)];
      if (st.stored_len % ps != 0) {
        const page_id frontier = st.pages[static_cast<std::size_t>(st.stored_len / ps)];
        // An export holds the frontier it published.
        const std::int32_t expected = st.exported ? 2 : 1;
        if (arena_.owners(frontier) != expected) {
          return make_error(errc::out_of_range,
                            fmt::format("{}'s frontier page {} has {} owners (must be {})", name,
                                        frontier, arena_.owners(frontier), expected));
        }
      }
    }
  }
  for (page_id p = 0; p < arena_.num_pages(); ++p) {
    if (refs[static_cast<std::size_t>(p)] != arena_.owners(p)) {
      return make_error(errc::out_of_range,
                        fmt::format("page {} has {} owners but {} references", p, arena_.owners(p),
                                    refs[static_cast<std::size_t>(p)]));
    }
  }
  return {};
}

}  // namespace mstar::resources
