#include "resources/kv/layout.hpp"

#include <fmt/format.h>

namespace mstar::resources {

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

  // Distribute ids over pages; item slots hold no ids.
  const auto ps = static_cast<std::uint64_t>(page_size);
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
  auto keys = chain(pages, *items, root);
  if (!keys)
    return keys.error();

  prompt_keys out;
  out.keys = std::move(*keys);
  out.items = std::move(*items);
  out.total_slots = total;
  if (total % ps != 0)
    out.tail = std::move(pages.back());
  return out;
}

}  // namespace mstar::resources
