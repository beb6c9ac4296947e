#include "resources/kv/keys.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>

#include "resources/kv/internal/sha256_context.hpp"

namespace mstar::resources {
namespace {

constexpr std::uint64_t max_field_bytes = std::numeric_limits<std::uint32_t>::max();

std::size_t item_bytes(const page_item& item) noexcept {
  return 16 + item.digest.size();
}

result<void> check_field(std::string_view what, std::uint64_t bytes) {
  if (bytes > max_field_bytes) {
    return make_error(
        errc::out_of_range,
        fmt::format("{} is {} bytes, more than a u32 length prefix can encode", what, bytes));
  }
  return {};
}

// The page-key preimage, written into the thread's reusable buffer.
result<void> encode_page(internal::preimage_writer& w, byte_view prev,
                         std::span<const token_id> tokens, std::span<const page_item> items) {
  std::uint64_t items_size = 0;
  for (const auto& item : items) {
    if (auto ok = check_field("an item digest", item.digest.size()); !ok)
      return ok.error();
    items_size += item_bytes(item);
  }
  if (auto ok = check_field("the parent key", prev.size()); !ok)
    return ok.error();
  if (auto ok = check_field("the page's token ids", tokens.size() * 4ull); !ok)
    return ok.error();
  if (auto ok = check_field("the page's items", items_size); !ok)
    return ok.error();

  w.reserve(12 + prev.size() + tokens.size() * 4 + items_size);
  w.field(prev);
  w.u32(static_cast<std::uint32_t>(tokens.size() * 4));
  w.u32_array(tokens);
  w.u32(static_cast<std::uint32_t>(items_size));
  for (const auto& item : items) {
    w.u32(item.start);
    w.u32(item.offset);
    w.u32(item.length);
    w.field(item.digest);
  }
  return {};
}

}  // namespace

std::string python_float_text(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form: "d[.ddd]e<sign><exp>".
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string_view sci{buf, static_cast<std::size_t>(end - buf)};
  std::string out;
  if (sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const auto e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.')
      digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(),
                  exponent);
  const int decpt = exponent + 1;  // value = 0.<digits> * 10^decpt
  const int ndigits = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {  // Python's repr switches to exponent form here
    out.push_back(digits[0]);
    if (ndigits > 1)
      out.append(".").append(digits, 1);
    out.append(fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent)));
  } else if (decpt <= 0) {
    out.append("0.").append(static_cast<std::size_t>(-decpt), '0').append(digits);
  } else if (decpt < ndigits) {
    out.append(digits, 0, static_cast<std::size_t>(decpt))
        .append(".")
        .append(digits, static_cast<std::size_t>(decpt));
  } else {
    out.append(digits).append(static_cast<std::size_t>(decpt - ndigits), '0').append(".0");
  }
  return out;
}

fingerprint_field::fingerprint_field(double value) : owned_(python_float_text(value)) {
  view_ = as_bytes(owned_);
}

digest256 fingerprint(std::span<const byte_view> fields) {
  auto& w = internal::thread_preimage();
  std::size_t total = 0;
  for (const auto& f : fields)
    total += 4 + f.size();
  w.reserve(total);
  for (const auto& f : fields)
    w.field(f);
  return w.digest();
}

result<digest256> page_key(byte_view prev, std::span<const token_id> tokens,
                           std::span<const page_item> items) {
  auto& w = internal::thread_preimage();
  if (auto ok = encode_page(w, prev, tokens, items); !ok)
    return ok.error();
  return w.digest();
}

result<digest256> end_key(byte_view prev, std::span<const token_id> tokens,
                          std::span<const page_item> items, std::uint64_t end) {
  std::vector<page_item> before;
  std::int64_t item_slots = 0;
  for (const auto& item : items) {
    if (item.start >= end)
      continue;
    if (item.offset > item.length) {
      return make_error(errc::invalid_argument,
                        fmt::format("item at start {} has offset {} beyond its length {}",
                                    item.start, item.offset, item.length));
    }
    item_slots += std::int64_t{item.length} - item.offset;
    before.push_back(item);
  }
  const std::int64_t cut = static_cast<std::int64_t>(end) - item_slots;
  if (cut < 0 || cut > static_cast<std::int64_t>(tokens.size())) {
    return make_error(
        errc::invalid_argument,
        fmt::format("end {} leaves {} id slots after {} item slots, but the page has {} ids "
                    "(end must be where an item on this page ends)",
                    end, cut, item_slots, tokens.size()));
  }
  return page_key(prev, tokens.first(static_cast<std::size_t>(cut)), before);
}

result<items_by_page> page_items(std::span<const layout_span> spans, std::int64_t page_size) {
  if (page_size < 1) {
    return make_error(errc::invalid_argument,
                      fmt::format("page_size must be >= 1, got {}", page_size));
  }
  const auto ps = static_cast<std::uint64_t>(page_size);
  items_by_page out;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const auto& span = spans[i];
    if (span.length > max_field_bytes || at + span.length > max_field_bytes) {
      return make_error(errc::out_of_range,
                        fmt::format("spans[{}]: a layout longer than 2^32-1 slots cannot be keyed "
                                    "(span of {} slots starting at slot {})",
                                    i, span.length, at));
    }
    if (span.digest) {
      const std::uint64_t stop = at + span.length;
      for (std::uint64_t p = at / ps; p < (stop + ps - 1) / ps; ++p) {
        const std::uint64_t first = std::max(at, p * ps);
        out[p].push_back(page_item{static_cast<std::uint32_t>(first - p * ps),
                                   static_cast<std::uint32_t>(first - at),
                                   static_cast<std::uint32_t>(span.length), *span.digest});
      }
    }
    at += span.length;
  }
  return out;
}

result<std::vector<digest256>> chain(std::span<const std::vector<token_id>> pages,
                                     const items_by_page& items, byte_view root) {
  if (!items.empty() && items.rbegin()->first >= pages.size()) {
    return make_error(errc::invalid_argument,
                      fmt::format("items_by_page names page {} but only {} pages were given "
                                  "(a page holding only items needs an empty id list)",
                                  items.rbegin()->first, pages.size()));
  }
  std::vector<digest256> keys;
  keys.reserve(pages.size());
  auto next_items = items.begin();
  auto& w = internal::thread_preimage();
  for (std::size_t i = 0; i < pages.size(); ++i) {
    std::span<const page_item> page_items_here;
    if (next_items != items.end() && next_items->first == i) {
      page_items_here = next_items->second;
      ++next_items;
    }
    const byte_view prev = i == 0 ? root : byte_view{keys.back()};
    if (auto ok = encode_page(w, prev, pages[i], page_items_here); !ok) {
      return ok.error().with_context(fmt::format("page {}", i));
    }
    keys.push_back(w.digest());
  }
  return keys;
}

result<std::vector<token_id>> to_token_ids(std::span<const std::int64_t> ids) {
  std::vector<token_id> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] > std::int64_t{std::numeric_limits<token_id>::max()}) {
      return make_error(errc::out_of_range,
                        fmt::format("token id {} at index {} is outside [0, 2^32)", ids[i], i));
    }
    out.push_back(static_cast<token_id>(ids[i]));
  }
  return out;
}

}  // namespace mstar::resources
