#include "launcher/tool/prefix_rows.hpp"

#include <fmt/format.h>
#include <limits>

#include "core/hex.hpp"

namespace mstar::tool {
namespace {

result<resources::digest256> to_key(const json& v, const std::string& what) {
  auto b = to_bytes(v, what);
  if (!b)
    return b.error();
  if (b->size() != 32) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} has {} bytes, a page key has 32", what, b->size()));
  }
  resources::digest256 d{};
  std::copy(b->begin(), b->end(), d.begin());
  return d;
}

result<resources::prefix_span> to_row(const json& r, const std::string& what) {
  if (!r.is_array() || r.size() != 5) {
    return make_error(errc::invalid_argument,
                      what + " must be [length, advance, walk, digest|null, end_key|null]");
  }
  constexpr auto max = std::int64_t{std::numeric_limits<std::uint32_t>::max()};
  auto length = to_int(r[0], what + "[0] (length)", 0, max);
  if (!length)
    return length.error();
  auto advance = to_int(r[1], what + "[1] (advance)", 0, max);
  if (!advance)
    return advance.error();
  if (!r[2].is_string())
    return make_error(errc::invalid_argument, what + "[2] (walk) must be a string");
  resources::prefix_span row;
  row.length = static_cast<std::uint64_t>(*length);
  row.advance = static_cast<std::uint64_t>(*advance);
  row.walk = r[2].get<std::string>();
  if (!r[3].is_null()) {
    auto d = to_bytes(r[3], what + "[3] (digest)");
    if (!d)
      return d.error();
    row.digest = std::move(*d);
  }
  if (!r[4].is_null()) {
    auto k = to_key(r[4], what + "[4] (end_key)");
    if (!k)
      return k.error();
    row.end_key = *k;
  }
  return row;
}

}  // namespace

json prefix_rows_json(std::span<const resources::prefix_span> rows) {
  json out = json::array();
  for (const auto& row : rows) {
    out.push_back(json::array({row.length, row.advance, row.walk,
                               row.digest ? json(to_hex(*row.digest)) : json(nullptr),
                               row.end_key ? json(to_hex(*row.end_key)) : json(nullptr)}));
  }
  return out;
}

result<std::vector<resources::prefix_span>> to_prefix_rows(const json& v, std::string_view what) {
  if (!v.is_array())
    return make_error(errc::invalid_argument, fmt::format("{} must be an array of rows", what));
  std::vector<resources::prefix_span> rows;
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto row = to_row(v[i], fmt::format("{}[{}]", what, i));
    if (!row)
      return row.error();
    rows.push_back(std::move(*row));
  }
  return rows;
}

result<python_stream> to_python_stream(const json& req, std::int64_t page_size) {
  auto keys_json = array_field(req, "prefix_keys");
  if (!keys_json)
    return keys_json.error();
  std::vector<resources::digest256> keys;
  for (std::size_t i = 0; i < (*keys_json)->size(); ++i) {
    auto k = to_key((**keys_json)[i], fmt::format("prefix_keys[{}]", i));
    if (!k)
      return k.error();
    keys.push_back(*k);
  }
  std::vector<resources::token_id> tail;
  if (req.contains("prefix_tail")) {
    auto t = to_tokens(req.at("prefix_tail"), "prefix_tail");
    if (!t)
      return t.error();
    tail = std::move(*t);
  }
  python_stream out;
  if (req.contains("prefix_layout")) {
    auto rows = to_prefix_rows(req.at("prefix_layout"), "prefix_layout");
    if (!rows)
      return rows.error();
    auto seed =
        resources::prefix_seed_from_rows(std::move(keys), std::move(tail), *rows, page_size);
    if (!seed)
      return seed.error();
    out.seed = std::move(*seed);
  } else {
    // Without a layout the Python stage keyed one ids span (§1.8).
    out.seed.keys = std::move(keys);
    out.seed.tail = std::move(tail);
  }
  if (req.contains("prefix_decode") && !req.at("prefix_decode").is_null()) {
    if (!req.at("prefix_decode").is_string())
      return make_error(errc::invalid_argument, "prefix_decode must be a string or null");
    out.decode = req.at("prefix_decode").get<std::string>();
  }
  return out;
}

}  // namespace mstar::tool
