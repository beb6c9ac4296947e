#include "launcher/tool/json_args.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <limits>

#include "core/hex.hpp"
#include "core/untrusted_json.hpp"

namespace mstar::tool {

bool read_line(std::istream& in, std::string& line, bool& too_long) {
  line.clear();
  too_long = false;
  std::streambuf* buffer = in.rdbuf();
  bool any = false;
  for (int c = buffer->sbumpc(); c != std::char_traits<char>::eof(); c = buffer->sbumpc()) {
    any = true;
    if (c == '\n')
      return true;
    if (line.size() < max_line_bytes) {
      line.push_back(static_cast<char>(c));
    } else {
      too_long = true;
    }
  }
  return any;
}

result<json> parse_line(std::string_view text) {
  return parse_untrusted_json<json>(text, "the line", {.allow_duplicate_keys = false});
}

error line_too_long() {
  return make_error(
      errc::out_of_range,
      fmt::format("the line is longer than the {} bytes (16 MiB) a line may have", max_line_bytes));
}

result<void> check_fields(const json& obj, std::string_view what,
                          std::initializer_list<std::string_view> allowed) {
  if (!obj.is_object()) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} must be a JSON object, got {}", what, obj.type_name()));
  }
  for (const auto& [key, value] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return make_error(errc::invalid_argument,
                        fmt::format("{} has unknown field '{}' (allowed: {})", what,
                                    text_excerpt(key), fmt::join(allowed, ", ")));
    }
  }
  return {};
}

result<const json*> field(const json& obj, std::string_view name) {
  const auto it = obj.find(name);
  if (it == obj.end()) {
    return make_error(errc::invalid_argument, fmt::format("missing field '{}'", name));
  }
  return &*it;
}

result<const json*> array_field(const json& obj, std::string_view name) {
  auto f = field(obj, name);
  if (!f)
    return f.error();
  if (!(*f)->is_array()) {
    return make_error(errc::invalid_argument, fmt::format("{} must be an array", name));
  }
  return f;
}

result<std::vector<std::uint8_t>> optional_bytes(const json& obj, std::string_view name) {
  if (!obj.contains(name))
    return std::vector<std::uint8_t>{};
  return to_bytes(obj.at(name), name);
}

result<std::int64_t> to_int(const json& v, std::string_view what, std::int64_t lo,
                            std::int64_t hi) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || (lo > 0 && u < static_cast<std::uint64_t>(lo))) {
      return make_error(errc::out_of_range,
                        fmt::format("{} is {}, outside [{}, {}]", what, u, lo, hi));
    }
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i < lo || i > hi) {
      return make_error(errc::out_of_range,
                        fmt::format("{} is {}, outside [{}, {}]", what, i, lo, hi));
    }
    return i;
  }
  return make_error(errc::invalid_argument, fmt::format("{} must be an integer, got {} {}", what,
                                                        v.type_name(), json_excerpt(v)));
}

result<std::vector<std::uint8_t>> to_bytes(const json& v, std::string_view what) {
  if (!v.is_string()) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} must be a hex string, got {}", what, v.type_name()));
  }
  auto bytes = from_hex(v.get_ref<const std::string&>());
  if (!bytes)
    return bytes.error().with_context(what);
  return bytes;
}

result<std::vector<resources::token_id>> to_tokens(const json& v, std::string_view what) {
  if (!v.is_array()) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} must be an array of token ids, got {}", what, v.type_name()));
  }
  std::vector<resources::token_id> out;
  out.reserve(v.size());
  constexpr std::int64_t max_id = std::numeric_limits<resources::token_id>::max();
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto id = to_int(v[i], fmt::format("{}[{}]", what, i), 0, max_id);
    if (!id) {
      return make_error(id.error().code(),
                        id.error().message() + " (token ids must be in [0, 2^32))");
    }
    out.push_back(static_cast<resources::token_id>(*id));
  }
  return out;
}

result<resources::page_item> to_item(const json& v, std::string_view what) {
  if (auto ok = check_fields(v, what, {"start", "offset", "length", "digest"}); !ok) {
    return ok.error();
  }
  constexpr std::int64_t u32_max = std::numeric_limits<std::uint32_t>::max();
  resources::page_item item;
  std::uint32_t* ints[] = {&item.start, &item.offset, &item.length};
  const char* names[] = {"start", "offset", "length"};
  for (int k = 0; k < 3; ++k) {
    auto f = field(v, names[k]);
    if (!f)
      return f.error().with_context(what);
    auto n = to_int(**f, fmt::format("{}.{}", what, names[k]), 0, u32_max);
    if (!n)
      return n.error();
    *ints[k] = static_cast<std::uint32_t>(*n);
  }
  auto d = field(v, "digest");
  if (!d)
    return d.error().with_context(what);
  auto bytes = to_bytes(**d, fmt::format("{}.digest", what));
  if (!bytes)
    return bytes.error();
  item.digest = std::move(*bytes);
  return item;
}

json item_json(const resources::page_item& item) {
  return json{{"start", item.start},
              {"offset", item.offset},
              {"length", item.length},
              {"digest", to_hex(item.digest)}};
}

result<std::vector<resources::page_item>> to_items(const json& v, std::string_view what) {
  if (!v.is_array()) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} must be an array of items, got {}", what, v.type_name()));
  }
  std::vector<resources::page_item> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto item = to_item(v[i], fmt::format("{}[{}]", what, i));
    if (!item)
      return item.error();
    out.push_back(std::move(*item));
  }
  return out;
}

result<resources::items_by_page> to_items_by_page(const json& v, std::string_view what) {
  if (!v.is_object()) {
    return make_error(
        errc::invalid_argument,
        fmt::format("{} must be an object of page index -> items, got {}", what, v.type_name()));
  }
  resources::items_by_page out;
  for (const auto& [key, items] : v.items()) {
    std::size_t page = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), page);
    if (key.empty() || ec != std::errc{} || end != key.data() + key.size() ||
        (key.size() > 1 && key[0] == '0')) {
      return make_error(errc::invalid_argument,
                        fmt::format("{}: key '{}' is not a page index (a decimal integer)", what,
                                    text_excerpt(key)));
    }
    auto parsed = to_items(items, fmt::format("{}[\"{}\"]", what, key));
    if (!parsed)
      return parsed.error();
    out[page] = std::move(*parsed);
  }
  return out;
}

json items_by_page_json(const resources::items_by_page& items) {
  json out = json::object();
  for (const auto& [page, list] : items) {
    json arr = json::array();
    for (const auto& item : list)
      arr.push_back(item_json(item));
    out[std::to_string(page)] = std::move(arr);
  }
  return out;
}

json keys_json(std::span<const resources::digest256> keys) {
  json out = json::array();
  for (const auto& key : keys)
    out.push_back(to_hex(key));
  return out;
}

}  // namespace mstar::tool
