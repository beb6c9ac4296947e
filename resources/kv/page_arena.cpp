#include "resources/kv/page_arena.hpp"

#include <algorithm>
#include <cassert>
#include <fmt/format.h>

namespace mstar::resources {

page_arena::page_arena(std::int32_t num_pages)
    : num_pages_(std::max<std::int32_t>(num_pages, 2)),
      owners_(static_cast<std::size_t>(num_pages_), 0),
      sealed_(static_cast<std::size_t>(num_pages_), 0),
      ring_(static_cast<std::size_t>(num_pages_), 0) {
  assert(num_pages >= 2);
  owners_[sink_page] = 1;
  for (page_id page = 1; page < num_pages_; ++page)
    push_back(page);
}

result<page_arena> page_arena::make(std::int32_t num_pages) {
  if (num_pages < 2) {
    return make_error(
        errc::invalid_argument,
        fmt::format("num_pages must be >= 2 (the sink and one more), got {}", num_pages));
  }
  return page_arena{num_pages};
}

bool page_arena::try_allocate(std::int32_t n, std::vector<page_id>& out) {
  assert(n >= 0);
  if (n < 0 || n > free_count_)
    return false;
  out.reserve(out.size() + static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    const page_id page = ring_[static_cast<std::size_t>(head_)];
    head_ = head_ + 1 == num_pages_ ? 0 : head_ + 1;
    --free_count_;
    owners_[static_cast<std::size_t>(page)] = 1;
    out.push_back(page);
  }
  return true;
}

void page_arena::unallocate(std::span<const page_id> pages) {
  // Validate first so a bad page leaves everything as it was. Marking each
  // checked page with -1 catches a page listed twice without allocating.
  std::size_t checked = 0;
  for (; checked < pages.size(); ++checked) {
    const page_id page = pages[checked];
    if (!is_owned_request_page(page) || owners_[static_cast<std::size_t>(page)] != 1)
      break;
    owners_[static_cast<std::size_t>(page)] = -1;
  }
  if (checked != pages.size()) {
    assert(false && "unallocate: page is free, shared, the sink, repeated or out of range");
    for (std::size_t i = 0; i < checked; ++i)
      owners_[static_cast<std::size_t>(pages[i])] = 1;
    return;
  }
  // Back to the front in reverse, so the queue reads as before the allocation.
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    owners_[static_cast<std::size_t>(*it)] = 0;
    sealed_[static_cast<std::size_t>(*it)] = 0;
    push_front(*it);
  }
}

void page_arena::retain(page_id page) {
  const bool ok = is_owned_request_page(page);
  assert(ok && "retain: page is free, the sink or out of range");
  if (!ok)
    return;
  ++owners_[static_cast<std::size_t>(page)];
  ++owner_changes_;
}

void page_arena::release(page_id page) {
  const bool ok = is_owned_request_page(page);
  assert(ok && "release: page is free, the sink or out of range");
  if (!ok)
    return;
  ++owner_changes_;
  if (--owners_[static_cast<std::size_t>(page)] > 0)
    return;
  sealed_[static_cast<std::size_t>(page)] = 0;
  push_back(page);
}

void page_arena::seal(page_id page) {
  const bool ok = is_owned_request_page(page);
  assert(ok && "seal: page is free, the sink or out of range");
  if (ok)
    sealed_[static_cast<std::size_t>(page)] = 1;
}

std::vector<page_id> page_arena::free_list() const {
  std::vector<page_id> out;
  out.reserve(static_cast<std::size_t>(free_count_));
  for (std::int32_t i = 0; i < free_count_; ++i) {
    out.push_back(ring_[static_cast<std::size_t>((head_ + i) % num_pages_)]);
  }
  return out;
}

result<void> page_arena::check_invariants() const {
  std::vector<std::uint8_t> queued(static_cast<std::size_t>(num_pages_), 0);
  for (const page_id page : free_list()) {
    if (!in_range(page))
      return make_error(errc::out_of_range, fmt::format("free page {}", page));
    auto& seen = queued[static_cast<std::size_t>(page)];
    if (seen != 0)
      return make_error(errc::invalid_argument, fmt::format("page {} queued twice", page));
    seen = 1;
    if (owners_[static_cast<std::size_t>(page)] != 0 || sealed_[static_cast<std::size_t>(page)]) {
      return make_error(errc::invalid_argument,
                        fmt::format("free page {} has owners or a seal", page));
    }
  }
  if (queued[sink_page] != 0 || owners_[sink_page] != 1 || sealed_[sink_page] != 0) {
    return make_error(errc::invalid_argument, "the sink page is free, shared or sealed");
  }
  std::int32_t owned = 0;
  for (page_id page = 0; page < num_pages_; ++page) {
    const auto i = static_cast<std::size_t>(page);
    if (queued[i] != 0)
      continue;
    ++owned;
    if (owners_[i] < 1) {
      return make_error(
          errc::invalid_argument,
          fmt::format("page {} is neither free nor owned ({} owners)", page, owners_[i]));
    }
    if (owners_[i] > 1 && sealed_[i] == 0) {
      return make_error(errc::invalid_argument,
                        fmt::format("page {} has {} owners but is not sealed", page, owners_[i]));
    }
  }
  if (owned + free_count_ != num_pages_) {
    return make_error(errc::invalid_argument, fmt::format("{} owned + {} free != {} pages", owned,
                                                          free_count_, num_pages_));
  }
  return {};
}

bool page_arena::is_owned_request_page(page_id page) const noexcept {
  return in_range(page) && page != sink_page && owners_[static_cast<std::size_t>(page)] > 0;
}

void page_arena::push_front(page_id page) noexcept {
  head_ = head_ == 0 ? num_pages_ - 1 : head_ - 1;
  ring_[static_cast<std::size_t>(head_)] = page;
  ++free_count_;
}

void page_arena::push_back(page_id page) noexcept {
  ring_[static_cast<std::size_t>((head_ + free_count_) % num_pages_)] = page;
  ++free_count_;
}

}  // namespace mstar::resources
