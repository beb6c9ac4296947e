#pragma once

// Strict readers for the JSON arguments mstar-tool takes: every failure names
// the field and says what was expected, and nothing is coerced or truncated.

#include <cstdint>
#include <initializer_list>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "resources/kv/keys.hpp"
#include "resources/kv/layout.hpp"

namespace mstar::tool {

using json = nlohmann::json;

/// The longest JSON line `keys` and `sim` read; a longer one is answered with
/// an error and skipped.
inline constexpr std::size_t max_line_bytes = std::size_t{16} << 20;

/// The most pages one `keys` line may lay out (each costs about 1 KB of
/// keys, items and output): a 4 M-token prompt at page size 16.
inline constexpr std::uint64_t max_pages_per_line = std::uint64_t{1} << 18;

/// One line of `in` without its newline, at most max_line_bytes long; a
/// longer line is read to its end but not kept, and `too_long` is set.
/// False at the end of the input.
[[nodiscard]] bool read_line(std::istream& in, std::string& line, bool& too_long);

/// A JSON Lines request: one JSON value within core's depth limit, a key
/// twice in one object refused ("the line has the key "fn" twice...").
[[nodiscard]] result<json> parse_line(std::string_view text);

/// The error for a line longer than max_line_bytes.
[[nodiscard]] error line_too_long();

/// Fails when `obj` is not an object or has a field outside `allowed`.
[[nodiscard]] result<void> check_fields(const json& obj, std::string_view what,
                                        std::initializer_list<std::string_view> allowed);

/// The member `name` of `obj`, or an error naming the missing field.
[[nodiscard]] result<const json*> field(const json& obj, std::string_view name);

/// The member `name` of `obj`, which must be an array.
[[nodiscard]] result<const json*> array_field(const json& obj, std::string_view name);

/// The hex bytes of member `name`, or no bytes when `obj` lacks it.
[[nodiscard]] result<std::vector<std::uint8_t>> optional_bytes(const json& obj,
                                                               std::string_view name);

/// An integer in [lo, hi]; floats, strings and booleans are errors.
[[nodiscard]] result<std::int64_t> to_int(const json& v, std::string_view what, std::int64_t lo,
                                          std::int64_t hi);

/// Bytes from a lowercase (or uppercase) hex string.
[[nodiscard]] result<std::vector<std::uint8_t>> to_bytes(const json& v, std::string_view what);

/// Token ids: a JSON array of integers in [0, 2^32).
[[nodiscard]] result<std::vector<resources::token_id>> to_tokens(const json& v,
                                                                 std::string_view what);

/// One `{"start","offset","length","digest"}` item and its JSON form.
[[nodiscard]] result<resources::page_item> to_item(const json& v, std::string_view what);
[[nodiscard]] json item_json(const resources::page_item& item);

/// An array of items.
[[nodiscard]] result<std::vector<resources::page_item>> to_items(const json& v,
                                                                 std::string_view what);

/// `{"<page>":[items]}` with decimal page indices, and its JSON form.
[[nodiscard]] result<resources::items_by_page> to_items_by_page(const json& v,
                                                                std::string_view what);
[[nodiscard]] json items_by_page_json(const resources::items_by_page& items);

/// Hex strings for a list of keys.
[[nodiscard]] json keys_json(std::span<const resources::digest256> keys);

}  // namespace mstar::tool
