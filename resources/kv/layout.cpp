#include "resources/kv/layout.hpp"

#include <fmt/format.h>

namespace mstar::resources {
namespace {

std::uint64_t span_length(const prompt_span& span) {
  const auto* ids = std::get_if<id_span>(&span);
  return ids != nullptr ? ids->ids.size() : std::get<item_span>(span).length;
}

// Each page's ids; item slots hold none.
std::vector<std::vector<token_id>> ids_by_page(std::span<const prompt_span> spans, std::uint64_t ps,
                                               std::uint64_t total) {
  std::vector<std::vector<token_id>> pages((total + ps - 1) / ps);
  std::uint64_t at = 0;
  for (const auto& span : spans) {
    if (const auto* ids = std::get_if<id_span>(&span)) {
      for (const token_id id : ids->ids)
        pages[at++ / ps].push_back(id);
    } else {
      at += std::get<item_span>(span).length;
    }
  }
  return pages;
}

// The end key of the item ending at slot `at` (strictly inside its page):
// the page's ids and items before `at`, folded from the previous page's key
// (`root` on the first page).
result<digest256> item_end_key(const std::vector<std::vector<token_id>>& pages,
                               const prompt_keys& keyed, std::uint64_t at, std::uint64_t ps,
                               byte_view root) {
  const std::uint64_t page = at / ps;
  if (page >= pages.size() || page >= keyed.keys.size()) {
    return make_error(errc::invalid_argument,
                      fmt::format("an item ends on page {}, which the keys do not reach", page));
  }
  const auto items = keyed.items.find(page);
  const byte_view prev = page == 0 ? root : byte_view{keyed.keys[page - 1]};
  return end_key(
      prev, pages[page],
      items == keyed.items.end() ? std::span<const page_item>{} : std::span{items->second},
      at % ps);
}

}  // namespace

result<prompt_keys> key_prompt(std::span<const prompt_span> spans, std::int64_t page_size,
                               byte_view root) {
  std::vector<layout_span> layout;
  layout.reserve(spans.size());
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (const auto* ids = std::get_if<id_span>(&spans[i])) {
      layout.push_back(layout_span{ids->ids.size(), std::nullopt});
    } else {
      const auto& item = std::get<item_span>(spans[i]);
      if (item.length == 0) {
        return make_error(errc::invalid_argument,
                          fmt::format("spans[{}]: an item span must cover at least one slot", i));
      }
      layout.push_back(layout_span{item.length, item.digest});
    }
    total += layout.back().length;
  }
  auto items = page_items(layout, page_size);
  if (!items)
    return items.error();

  const auto ps = static_cast<std::uint64_t>(page_size);
  auto pages = ids_by_page(spans, ps, total);
  auto keys = chain(pages, *items, root);
  if (!keys)
    return keys.error();

  prompt_keys out;
  out.keys = std::move(*keys);
  out.items = std::move(*items);
  out.total_slots = total;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    at += layout[i].length;
    if (!layout[i].digest || at % ps == 0)
      continue;
    auto key = item_end_key(pages, out, at, ps, root);
    if (!key)
      return key.error().with_context(fmt::format("spans[{}]", i));
    out.ends.push_back({at, *key});
  }
  if (total % ps != 0)
    out.tail = std::move(pages.back());
  return out;
}

result<std::vector<prefix_span>> prefix_layout_rows(std::span<const prompt_span> spans,
                                                    std::span<const std::uint64_t> advances,
                                                    const prompt_keys& keyed,
                                                    std::int64_t page_size, std::string_view walk,
                                                    byte_view root) {
  if (page_size < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("page_size must be >= 1, got {}", page_size));
  }
  if (!advances.empty() && advances.size() != spans.size()) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} advances for {} spans", advances.size(), spans.size()));
  }
  const auto ps = static_cast<std::uint64_t>(page_size);
  const auto pages = ids_by_page(spans, ps, keyed.total_slots);
  std::vector<prefix_span> rows;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    prefix_span row;
    row.length = span_length(spans[i]);
    row.advance = advances.empty() ? row.length : advances[i];
    row.walk = walk;
    at += row.length;
    if (const auto* item = std::get_if<item_span>(&spans[i])) {
      row.digest = item->digest;
      if (at % ps != 0) {
        auto key = item_end_key(pages, keyed, at, ps, root);
        if (!key)
          return key.error().with_context(fmt::format("spans[{}]", i));
        row.end_key = *key;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<item_end> item_ends_of_rows(std::span<const prefix_span> rows, std::int64_t page_size) {
  std::vector<item_end> out;
  if (page_size < 1)
    return out;
  const auto ps = static_cast<std::uint64_t>(page_size);
  std::uint64_t at = 0;
  for (const auto& row : rows) {
    at += row.length;
    if (row.digest && row.end_key && at % ps != 0)
      out.push_back({at, *row.end_key});
  }
  return out;
}

result<std::vector<layout_span>> layout_of_rows(std::span<const prefix_span> rows) {
  std::vector<layout_span> out;
  out.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    if (row.digest && row.length == 0) {
      return make_error(
          errc::invalid_argument,
          fmt::format("prefix_layout[{}]: an item row must cover at least one slot", i));
    }
    if (!row.digest && row.advance != row.length) {
      return make_error(errc::invalid_argument,
                        fmt::format("prefix_layout[{}]: an ids row must advance by its length {}, "
                                    "not {}",
                                    i, row.length, row.advance));
    }
    out.push_back(layout_span{row.length, row.digest});
  }
  return out;
}

}  // namespace mstar::resources
