#include "resources/kv/generation.hpp"

#include <fmt/format.h>

namespace mstar::resources {

std::uint64_t item_slots_on_page(std::span<const page_item> items) {
  std::uint64_t slots = 0;
  for (const auto& item : items) {
    // A well-formed item never has offset > length; count such a one as 0
    // so the room check below refuses it rather than wrapping around.
    if (item.offset <= item.length)
      slots += item.length - item.offset;
  }
  return slots;
}

result<page_chain> start_page_chain(const prompt_keys& prompt, std::int64_t page_size,
                                    byte_view root) {
  if (page_size < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("page_size must be >= 1, got {}", page_size));
  }
  const auto ps = static_cast<std::uint64_t>(page_size);
  const std::uint64_t whole = prompt.total_slots / ps;
  const std::uint64_t partial_slots = prompt.total_slots % ps;
  const std::uint64_t expected_keys = whole + (partial_slots != 0 ? 1 : 0);
  if (prompt.keys.size() != expected_keys && prompt.keys.size() != whole) {
    return make_error(
        errc::invalid_argument,
        fmt::format("{} slots at page_size {} make {} whole pages{}, but {} keys "
                    "were given",
                    prompt.total_slots, page_size, whole,
                    partial_slots != 0 ? " and a partial one" : "", prompt.keys.size()));
  }
  page_chain c;
  c.keys = prompt.keys;
  c.root.assign(root.begin(), root.end());
  c.keyed_pages = static_cast<std::int64_t>(whole);
  if (partial_slots == 0) {
    if (!prompt.tail.empty()) {
      return make_error(errc::invalid_argument,
                        fmt::format("the prompt ends on a page boundary but has a tail of {} ids",
                                    prompt.tail.size()));
    }
    return c;
  }
  c.unkeyed = prompt.tail;
  if (const auto it = prompt.items.find(whole); it != prompt.items.end())
    c.unkeyed_items = it->second;
  const std::uint64_t used = c.unkeyed.size() + item_slots_on_page(c.unkeyed_items);
  if (used != partial_slots) {
    return make_error(errc::invalid_argument,
                      fmt::format("the partial page holds {} slots, but its {} tail ids and its "
                                  "items take {}",
                                  partial_slots, c.unkeyed.size(), used));
  }
  return c;
}

result<std::int64_t> extend_page_chain(page_chain& c, std::span<const token_id> ids,
                                       std::int64_t page_size) {
  if (page_size < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("page_size must be >= 1, got {}", page_size));
  }
  const auto ps = static_cast<std::uint64_t>(page_size);
  const std::uint64_t taken = item_slots_on_page(c.unkeyed_items);
  if (taken >= ps) {
    return make_error(errc::invalid_argument,
                      fmt::format("the page being filled has {} item slots of {}: no room for "
                                  "generated ids",
                                  taken, ps));
  }
  c.unkeyed.insert(c.unkeyed.end(), ids.begin(), ids.end());
  auto room = static_cast<std::size_t>(ps - taken);
  std::int64_t added = 0;
  while (c.unkeyed.size() >= room) {
    const byte_view prev = c.keyed_pages == 0
                               ? byte_view{c.root}
                               : byte_view{c.keys[static_cast<std::size_t>(c.keyed_pages - 1)]};
    auto key = page_key(prev, std::span{c.unkeyed}.first(room), c.unkeyed_items);
    if (!key)
      return key.error().with_context(fmt::format("generated page {}", c.keyed_pages));
    const auto at = static_cast<std::size_t>(c.keyed_pages);
    if (at < c.keys.size()) {
      c.keys[at] = *key;  // the prompt's partial-page key is superseded
    } else {
      c.keys.push_back(*key);
    }
    ++c.keyed_pages;
    ++added;
    c.unkeyed.erase(c.unkeyed.begin(), c.unkeyed.begin() + static_cast<long>(room));
    c.unkeyed_items.clear();
    room = static_cast<std::size_t>(ps);
  }
  return added;
}

}  // namespace mstar::resources
