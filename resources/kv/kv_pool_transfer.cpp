// kv_pool: moving a stream between pools (ARCHITECTURE.md "Disaggregated
// prefill and decode"): export holds on the publishing side, import /
// finish / abort on the adopting side. Bookkeeping only: the transfer agent
// copies the bytes between the two calls.
#include <algorithm>
#include <fmt/format.h>

#include "resources/kv/kv_pool.hpp"
#include "resources/kv/kv_pool_state.hpp"

namespace mstar::resources {

result<kv_export> kv_pool::export_stream(const request_id& rid, const std::string& label) {
  stream_state* st = find_stream(rid, label);
  const auto refuse = [&](errc code, std::string_view why) {
    return make_error(code,
                      fmt::format("kv pool '{}' cannot export {}/{}: {}", key_, rid, label, why));
  };
  if (st == nullptr)
    return refuse(errc::not_found, "no such stream");
  if (st->importing)
    return refuse(errc::invalid_argument, "it is still importing");
  if (st->step_in_flight)
    return refuse(errc::invalid_argument, "a step is admitted on it");
  if (st->released > 0)
    return refuse(errc::unsupported,
                  "it released front pages (windowed streams are not exported yet)");
  if (const auto held = exports_.find(rid); held != exports_.end() && held->second.contains(label))
    return refuse(errc::invalid_argument, "it is already exported (release_export first)");
  const std::int64_t ps = config_.geometry.page_size;
  kv_export out;
  out.stored_len = st->stored_len;
  out.reset_generation = st->reset_generation;
  out.page_size = ps;
  out.page_bytes = static_cast<std::int64_t>(config_.geometry.page_bytes());
  out.root = root_;
  out.pages.assign(st->pages.begin(), st->pages.begin() + pages_for(st->stored_len));
  if (index_ && st->chain) {
    const chain_state& c = *st->chain;
    const auto whole = static_cast<std::size_t>(std::min(st->stored_len / ps, c.page.keyed_pages));
    out.page_keys.assign(c.rooted.begin(), c.rooted.begin() + static_cast<long>(whole));
    // kv_key_chain carries neither items on the page being filled nor a
    // salt root; an importer continues only a chain it can key the same way.
    if (c.page.unkeyed_items.empty() && (c.page.keyed_pages > 0 || c.page.root.empty()))
      out.chain = kv_key_chain{c.page.keys, c.page.keyed_pages, c.page.unkeyed};
    out.ends = exported_ends(*st, whole);
  }
  // Sealed before the hold makes them shared: nobody writes a published page.
  auto& held = exports_[rid][label];
  held = out.pages;
  for (const auto& e : out.ends)
    held.push_back(e.page);  // cached pages, sealed already
  for (const page_id p : held) {
    arena_.seal(p);
    arena_.retain(p);
  }
  st->exported = true;
  return out;
}

result<void> kv_pool::release_export(const request_id& rid) {
  const auto it = exports_.find(rid);
  if (it == exports_.end()) {
    return make_error(errc::not_found,
                      fmt::format("kv pool '{}' holds no export of request {}", key_, rid));
  }
  for (const auto& [label, pages] : it->second) {
    for (const page_id p : pages)
      arena_.release(p);
    if (stream_state* st = find_stream(rid, label))
      st->exported = false;
  }
  exports_.erase(it);
  return {};
}

result<void> kv_pool::check_export(const kv_export& from) const {
  const std::int64_t ps = config_.geometry.page_size;
  const auto bytes = static_cast<std::int64_t>(config_.geometry.page_bytes());
  if (from.page_size != ps || from.page_bytes != bytes) {
    return make_error(errc::invalid_argument,
                      fmt::format("the export has pages of {} tokens / {} bytes but this pool's "
                                  "hold {} / {}",
                                  from.page_size, from.page_bytes, ps, bytes));
  }
  if (from.stored_len < 0 ||
      static_cast<std::int64_t>(from.pages.size()) != pages_for(from.stored_len)) {
    return make_error(errc::invalid_argument,
                      fmt::format("the export stores {} tokens in {} pages (must be {})",
                                  from.stored_len, from.pages.size(), pages_for(from.stored_len)));
  }
  if (static_cast<std::int64_t>(from.page_keys.size()) > from.stored_len / ps) {
    return make_error(errc::invalid_argument,
                      fmt::format("the export keys {} pages but holds only {} whole pages",
                                  from.page_keys.size(), from.stored_len / ps));
  }
  if (std::any_of(from.pages.begin(), from.pages.end(), [](page_id p) { return p <= sink_page; })) {
    return make_error(errc::invalid_argument, "the export names the sink or a negative page");
  }
  for (const auto& e : from.ends) {
    if (e.slot <= 0 || e.slot % ps == 0 || e.slot > from.stored_len ||
        e.slot / ps > static_cast<std::int64_t>(from.page_keys.size()) || e.page <= sink_page) {
      return make_error(errc::invalid_argument,
                        fmt::format("the export's end copy at slot {} (page {}) lies on a page "
                                    "boundary, past the stored tokens, after a page without a key "
                                    "or on the sink",
                                    e.slot, e.page));
    }
  }
  if (from.chain &&
      (from.chain->keyed_pages < 0 ||
       from.chain->keyed_pages > static_cast<std::int64_t>(from.chain->keys.size()))) {
    return make_error(errc::invalid_argument,
                      fmt::format("the export's chain keys {} whole pages with {} keys",
                                  from.chain->keyed_pages, from.chain->keys.size()));
  }
  return {};
}

bool kv_pool::shares_keys(const request_id& rid, const kv_export& from) const {
  if (!index_ || from.root != root_)
    return false;  // another model, layout or tenant: equal keys name other bytes
  const auto req = requests_.find(rid);
  return req == requests_.end() || req->second->prefix_cache;
}

std::vector<page_id> kv_pool::adoptable(const request_id& rid, const kv_export& from) const {
  std::vector<page_id> local(from.pages.size(), -1);
  if (!shares_keys(rid, from))
    return local;
  for (std::size_t i = 0; i < from.page_keys.size(); ++i) {
    if (const auto p = index_->page_for(from.page_keys[i]))
      local[i] = *p;
  }
  return local;
}

result<kv_import> kv_pool::import_stream(const request_id& rid, const std::string& label,
                                         const kv_export& from) {
  const std::string context = fmt::format("kv pool '{}' importing {}/{}", key_, rid, label);
  if (auto ok = check_export(from); !ok)
    return ok.error().with_context(context);
  if (find_stream(rid, label) != nullptr)
    return make_error(errc::invalid_argument, context + ": the stream exists already");
  const std::vector<page_id> local = adoptable(rid, from);
  std::vector<page_id> adopted;
  for (const page_id p : local) {
    if (p >= 0) {
      arena_.retain(p);  // before any eviction, so what is adopted stays
      adopted.push_back(p);
    }
  }
  const auto fresh_n = static_cast<std::int32_t>(local.size() - adopted.size());
  if (fresh_n > arena_.num_free() && index_ && index_->evictable() >= fresh_n - arena_.num_free())
    (void)index_->evict(fresh_n - arena_.num_free());
  std::vector<page_id> fresh;
  if (!arena_.try_allocate(fresh_n, fresh)) {
    for (const page_id p : adopted)
      arena_.release(p);
    return make_error(
        errc::out_of_range,
        fmt::format("{}: needs {} fresh pages but has {} free ({} pages short)", context, fresh_n,
                    arena_.num_free(), fresh_n - arena_.num_free()));
  }
  kv_import out;
  out.adopted = static_cast<std::int64_t>(adopted.size());
  std::size_t next = 0;
  for (std::size_t i = 0; i < local.size(); ++i) {
    if (local[i] >= 0) {
      out.pages.push_back(local[i]);
    } else {
      out.pages.push_back(fresh[next]);
      out.fetch.push_back({fresh[next++], from.pages[i]});
    }
  }
  stream_state& st = stream_for(rid, label, nullptr);
  st.pages = out.pages;
  st.stored_len = from.stored_len;
  st.reset_generation = from.reset_generation;
  ++st.generation;
  st.importing = true;
  st.adopted = std::move(adopted);
  st.chain.reset();  // the exporter's chain, not a seed's, describes these pages
  const bool keyed = shares_keys(rid, from);
  if (keyed && from.chain) {
    chain_state c;
    c.page.keys = from.chain->keys;
    for (const auto& k : c.page.keys)
      c.rooted.push_back(fingerprint(root_, k));
    c.page.keyed_pages = from.chain->keyed_pages;
    c.page.unkeyed = from.chain->unkeyed;
    st.chain = std::move(c);
  }
  if (keyed) {
    st.import_keys = from.page_keys;
    take_import_ends(st, from, out);
  }
  imports_.push_back({rid, label, std::move(fresh), true});
  return out;
}

result<void> kv_pool::finish_import(const request_id& rid) {
  bool any = false;
  for (auto it = imports_.begin(); it != imports_.end();) {
    if (it->rid != rid) {
      ++it;
      continue;
    }
    if (stream_state* st = find_stream(rid, it->label)) {
      st->importing = false;
      st->adopted.clear();
      ++st->generation;
      index_pages(rid, it->label, *st);  // as the commit that computed them would
      if (index_)
        index_import(*st);
    }
    it = imports_.erase(it);
    any = true;
  }
  if (!any) {
    return make_error(errc::not_found,
                      fmt::format("kv pool '{}' has no import of request {} to finish", key_, rid));
  }
  return {};
}

result<void> kv_pool::abort_import(const request_id& rid) {
  std::vector<alloc_record> mine;
  for (auto it = imports_.begin(); it != imports_.end();) {
    if (it->rid == rid) {
      mine.push_back(std::move(*it));
      it = imports_.erase(it);
    } else {
      ++it;
    }
  }
  if (mine.empty()) {
    return make_error(errc::not_found,
                      fmt::format("kv pool '{}' has no import of request {} to abort", key_, rid));
  }
  // Leave each stream holding exactly its fresh pages, then let the admit
  // unwind hand those back and delete the stream, newest import first (its
  // end copies before its pages), so the free queue reads as before.
  for (auto rec = mine.rbegin(); rec != mine.rend(); ++rec) {
    stream_state* st = find_stream(rid, rec->label);
    if (st == nullptr)
      continue;
    drop_import_ends(*st, /*exact=*/true);
    for (const page_id p : st->adopted)
      arena_.release(p);
    std::erase_if(st->pages, [&](page_id p) {
      return std::find(st->adopted.begin(), st->adopted.end(), p) != st->adopted.end();
    });
    st->adopted.clear();
    st->importing = false;
    st->stored_len = 0;
    st->chain.reset();
    std::vector<alloc_record> one{std::move(*rec)};
    undo(one);
  }
  return {};
}

bool kv_pool::importing(const request_id& rid) const {
  return std::any_of(imports_.begin(), imports_.end(),
                     [&](const alloc_record& r) { return r.rid == rid; });
}

std::vector<std::string> kv_pool::labels(const request_id& rid) const {
  std::vector<std::string> out;
  if (const auto it = requests_.find(rid); it != requests_.end()) {
    for (const auto& [label, st] : it->second->streams)
      out.push_back(label);
  }
  return out;
}

result<void> kv_pool::check_transfers() const {
  std::size_t importing_streams = 0;
  for (const auto& [rid, req] : requests_) {
    for (const auto& [label, st] : req->streams) {
      if (st.importing)
        ++importing_streams;
      const auto held = exports_.find(rid);
      if (st.exported && (held == exports_.end() || !held->second.contains(label))) {
        return make_error(errc::out_of_range,
                          fmt::format("{}/{} is marked exported but holds no export", rid, label));
      }
    }
  }
  for (const auto& rec : imports_) {
    const stream_state* st = find_stream(rec.rid, rec.label);
    if (st == nullptr || !st->importing) {
      return make_error(
          errc::out_of_range,
          fmt::format("an import of {}/{} has no importing stream", rec.rid, rec.label));
    }
  }
  if (importing_streams != imports_.size()) {
    return make_error(errc::out_of_range, fmt::format("{} importing streams but {} import records",
                                                      importing_streams, imports_.size()));
  }
  return {};
}

}  // namespace mstar::resources
