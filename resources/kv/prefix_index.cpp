#include "resources/kv/prefix_index.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <string>

namespace mstar::resources {
namespace {

constexpr page_id no_parent = -1;

[[nodiscard]] std::size_t at(page_id page) noexcept {
  return static_cast<std::size_t>(page);
}

[[nodiscard]] error broken(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

}  // namespace

std::size_t digest256_hash::operator()(const digest256& key) const noexcept {
  std::uint64_t word = 0;
  std::memcpy(&word, key.data(), sizeof word);
  return static_cast<std::size_t>(word);
}

prefix_index::prefix_index(page_arena& arena)
    : arena_(arena),
      nodes_(static_cast<std::size_t>(arena.num_pages())),
      keys_(static_cast<std::size_t>(arena.num_pages())) {
  map_.reserve(nodes_.size());
  heap_.reserve(nodes_.size());
  passed_over_.reserve(nodes_.size());
}

prefix_index::~prefix_index() {
  clear();
}

std::vector<page_id> prefix_index::lookup(std::span<const digest256> keys) {
  std::vector<page_id> pages;
  collect(keys, pages);
  if (pages.empty())
    return pages;
  ++clock_;
  for (const page_id page : pages)
    nodes_[at(page)].stamp = clock_;
  return pages;
}

std::vector<page_id> prefix_index::peek(std::span<const digest256> keys) const {
  std::vector<page_id> pages;
  collect(keys, pages);
  return pages;
}

std::optional<page_id> prefix_index::page_for(const digest256& key) const {
  const auto it = map_.find(key);
  if (it == map_.end())
    return std::nullopt;
  return it->second;
}

bool prefix_index::insert(const digest256& key, page_id page, std::optional<page_id> parent) {
  if (!valid_page(page) || arena_.owners(page) < 1 || nodes_[at(page)].indexed)
    return false;
  if (parent && (!valid_page(*parent) || !nodes_[at(*parent)].indexed))
    return false;
  if (!map_.try_emplace(key, page).second)
    return false;
  arena_.seal(page);
  arena_.retain(page);
  node& entry = nodes_[at(page)];
  entry = node{++clock_, parent.value_or(no_parent), 0, true, false};
  keys_[at(page)] = key;
  if (parent)
    ++nodes_[at(*parent)].children;
  push_candidate(page);
  ++version_;
  return true;
}

std::int32_t prefix_index::evict(std::int32_t n) {
  std::int32_t freed = 0;
  passed_over_.clear();
  while (freed < n && !heap_.empty()) {
    const auto [stamp, page] = pop_candidate();
    const node& entry = nodes_[at(page)];
    // Stale entries: a page that gained children is queued again when its
    // last child goes; a re-stamped leaf goes back under its new stamp.
    if (!entry.indexed || entry.children > 0)
      continue;
    if (stamp != entry.stamp) {
      push_candidate(page);
    } else if (arena_.owners(page) > 1) {
      passed_over_.push_back(page);
    } else if (remove_leaf(page)) {
      ++freed;
    }
  }
  for (const page_id page : passed_over_)
    push_candidate(page);
  passed_over_.clear();
  return freed;
}

bool prefix_index::indexes(page_id page) const noexcept {
  return page >= 0 && at(page) < nodes_.size() && nodes_[at(page)].indexed;
}

std::optional<digest256> prefix_index::key_of(page_id page) const {
  if (!indexes(page))
    return std::nullopt;
  return keys_[at(page)];
}

std::int32_t prefix_index::evictable() const {
  if (cache_owner_changes_ == arena_.owner_changes() && cache_version_ == version_) {
    return evictable_cache_;
  }
  // A page someone else holds pins itself and every ancestor: a parent can
  // only go after all its children. Owner counts are scanned first since
  // shared pages are few and the counts are dense.
  pinned_.assign(nodes_.size(), 0);
  std::int32_t pinned = 0;
  for (page_id page = 1; page < arena_.num_pages(); ++page) {
    if (arena_.owners(page) <= 1 || !nodes_[at(page)].indexed)
      continue;
    for (page_id p = page; p != no_parent && pinned_[at(p)] == 0; p = nodes_[at(p)].parent) {
      pinned_[at(p)] = 1;
      ++pinned;
    }
  }
  const std::int32_t count = size() - pinned;
  evictable_cache_ = count;
  cache_owner_changes_ = arena_.owner_changes();
  cache_version_ = version_;
  return count;
}

void prefix_index::clear() {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].indexed)
      arena_.release(static_cast<page_id>(i));
    nodes_[i] = node{};
  }
  map_.clear();
  heap_.clear();
  ++version_;
}

result<void> prefix_index::check_invariants() const {
  if (nodes_.size() != at(arena_.num_pages()))
    return broken("index and arena disagree on pages");
  std::vector<std::int32_t> children(nodes_.size(), 0);
  std::size_t indexed = 0;
  std::size_t queued = 0;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const node& entry = nodes_[i];
    const auto page = static_cast<page_id>(i);
    queued += entry.queued ? 1 : 0;
    if (!entry.indexed) {
      if (entry.children != 0 || entry.queued) {
        return broken(fmt::format("unindexed page {} has children or is a candidate", page));
      }
      continue;
    }
    ++indexed;
    if (!valid_page(page) || !arena_.sealed(page) || arena_.owners(page) < 1) {
      return broken(fmt::format("indexed page {} is the sink, unsealed or unowned", page));
    }
    const auto it = map_.find(keys_[i]);
    if (it == map_.end() || it->second != page) {
      return broken(fmt::format("page {}'s key does not map back to it", page));
    }
    if (entry.parent != no_parent) {
      if (!indexes(entry.parent)) {
        return broken(fmt::format("page {}'s parent {} is not indexed", page, entry.parent));
      }
      ++children[at(entry.parent)];
    }
    if (entry.children == 0 && !entry.queued) {
      return broken(fmt::format("leaf page {} is not an eviction candidate", page));
    }
  }
  if (indexed != map_.size()) {
    return broken(fmt::format("{} keys but {} indexed pages", map_.size(), indexed));
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (children[i] != nodes_[i].children) {
      return broken(fmt::format("page {} counts {} children, {} name it as parent", i,
                                nodes_[i].children, children[i]));
    }
  }
  std::vector<std::uint8_t> seen(nodes_.size(), 0);
  for (const auto& [stamp, page] : heap_) {
    if (!indexes(page) || !nodes_[at(page)].queued || seen[at(page)] != 0) {
      return broken(fmt::format("candidate page {} is unindexed, unqueued or repeated", page));
    }
    seen[at(page)] = 1;
  }
  if (heap_.size() != queued || !std::is_heap(heap_.begin(), heap_.end(), std::greater<>{})) {
    return broken("candidate heap is out of order or misses a queued page");
  }
  return {};
}

bool prefix_index::valid_page(page_id page) const noexcept {
  return page > sink_page && at(page) < nodes_.size();
}

void prefix_index::collect(std::span<const digest256> keys, std::vector<page_id>& out) const {
  out.reserve(std::min(keys.size(), map_.size()));
  for (const digest256& key : keys) {
    const auto it = map_.find(key);
    if (it == map_.end())
      return;
    out.push_back(it->second);
  }
}

void prefix_index::push_candidate(page_id page) {
  node& entry = nodes_[at(page)];
  if (entry.queued)
    return;
  entry.queued = true;
  heap_.emplace_back(entry.stamp, page);
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
}

prefix_index::candidate prefix_index::pop_candidate() {
  std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
  const candidate top = heap_.back();
  heap_.pop_back();
  nodes_[at(top.second)].queued = false;
  ++examined_;
  return top;
}

bool prefix_index::remove_leaf(page_id page) {
  node& entry = nodes_[at(page)];
  const page_id parent = entry.parent;
  map_.erase(keys_[at(page)]);
  entry = node{};
  ++version_;
  const bool frees = arena_.owners(page) == 1;
  arena_.release(page);
  if (parent != no_parent && --nodes_[at(parent)].children == 0)
    push_candidate(parent);
  return frees;
}

}  // namespace mstar::resources
