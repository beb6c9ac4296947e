#include "core/untrusted_json.hpp"

#include <fmt/format.h>
#include <optional>
#include <vector>

namespace mstar {
namespace {

// How many bytes of the parser's own reason a message keeps (its "last read"
// part can quote a whole unterminated string).
constexpr std::size_t reason_chars = 160;

// The length of the longest prefix of `text` of at most `n` bytes that does
// not end inside a UTF-8 sequence.
std::size_t utf8_cut(std::string_view text, std::size_t n) {
  if (n >= text.size())
    return text.size();
  std::size_t cut = n;
  // Back off continuation bytes (10xxxxxx) so the cut lands on a lead byte.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80 && n - cut < 4)
    --cut;
  return cut;
}

// Appends the JSON string of at most the first `limit - out.size()` bytes of
// `s`, without its closing quote when `s` was cut.
template <class Json>
void append_string_excerpt(std::string_view s, std::string& out, std::size_t limit) {
  const std::size_t room = out.size() < limit ? limit - out.size() : 0;
  const std::string head{s.substr(0, utf8_cut(s, room))};
  out += Json(head).dump(-1, ' ', false, Json::error_handler_t::replace);
  if (head.size() < s.size())
    out.pop_back();
}

// Appends `value`'s compact JSON to `out` until `out` reaches `limit` bytes.
// Each level adds at least one byte, so the recursion is no deeper than `limit`.
template <class Json>
void append_excerpt(const Json& value, std::string& out, std::size_t limit) {
  if (out.size() >= limit)
    return;
  if (value.is_string()) {
    append_string_excerpt<Json>(value.template get_ref<const typename Json::string_t&>(), out,
                                limit);
    return;
  }
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = value.begin(); it != value.end() && out.size() < limit; ++it) {
      if (!first)
        out += ',';
      first = false;
      append_string_excerpt<Json>(it.key(), out, limit);
      out += ':';
      append_excerpt(it.value(), out, limit);
    }
    out += '}';
    return;
  }
  if (value.is_array()) {
    out += '[';
    bool first = true;
    for (auto it = value.begin(); it != value.end() && out.size() < limit; ++it) {
      if (!first)
        out += ',';
      first = false;
      append_excerpt(*it, out, limit);
    }
    out += ']';
    return;
  }
  out += value.dump();  // a number, a boolean or null: a few bytes
}

// Builds the value from SAX events, as nlohmann's own DOM parser does, but
// stops at the first container past the depth limit or, when asked, the
// first repeated key. Pointers on the stack stay valid: a container is only
// appended to while it is the innermost open one.
template <class Json>
class bounded_builder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  bounded_builder(Json& root, const json_limits& limits) : root_(root), limits_(limits) {}

  bool null() { return put(Json(nullptr)) != nullptr; }
  bool boolean(bool v) { return put(Json(v)) != nullptr; }
  bool number_integer(number_integer_t v) { return put(Json(v)) != nullptr; }
  bool number_unsigned(number_unsigned_t v) { return put(Json(v)) != nullptr; }
  bool number_float(number_float_t v, const string_t& /*text*/) { return put(Json(v)) != nullptr; }
  bool string(string_t& v) { return put(Json(std::move(v))) != nullptr; }
  bool binary(binary_t& v) { return put(Json::binary(std::move(v))) != nullptr; }

  bool start_object(std::size_t /*size*/) { return open(Json::object()); }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*size*/) { return open(Json::array()); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Json& object = *stack_.back();
    if (!limits_.allow_duplicate_keys && object.contains(k)) {
      std::string shown;
      append_string_excerpt<Json>(k, shown, default_excerpt_chars);
      failure_ = fmt::format("has the key {} twice in one object", shown);
      return false;
    }
    slot_ = &object[k];
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const std::exception& ex) {
    std::string_view reason = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    if (const auto bracket = reason.find("] ");
        reason.starts_with("[json.") && bracket != reason.npos)
      reason.remove_prefix(bracket + 2);
    failure_ = "is not valid JSON: " + text_excerpt(reason, reason_chars);
    return false;
  }

  [[nodiscard]] const std::optional<std::string>& failure() const noexcept { return failure_; }

 private:
  bool open(Json&& container) {
    if (stack_.size() >= limits_.max_depth) {
      failure_ = fmt::format("nests deeper than {} levels", limits_.max_depth);
      return false;
    }
    Json* placed = put(std::move(container));
    stack_.push_back(placed);
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  // Places a finished value where the grammar says it goes; returns it.
  Json* put(Json&& value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    *slot_ = std::move(value);
    return slot_;
  }

  Json& root_;
  const json_limits& limits_;
  std::vector<Json*> stack_;
  Json* slot_ = nullptr;
  std::optional<std::string> failure_;
};

}  // namespace

std::string text_excerpt(std::string_view text, std::size_t max_chars) {
  if (text.size() <= max_chars)
    return std::string{text};
  const std::size_t keep = max_chars > 3 ? max_chars - 3 : 0;
  std::string out{text.substr(0, utf8_cut(text, keep))};
  out += "...";
  return out;
}

template <class Json>
std::string json_excerpt(const Json& value, std::size_t max_chars) {
  std::string out;
  // One byte past the limit tells a value that fits from one that was cut.
  append_excerpt(value, out, max_chars + 1);
  return text_excerpt(out, max_chars);
}

template <class Json>
result<Json> parse_untrusted_json(std::string_view text, std::string_view subject,
                                  const json_limits& limits) {
  Json root;
  bounded_builder<Json> builder{root, limits};
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder);
  if (!ok || builder.failure()) {
    const std::string why = builder.failure().value_or("is not valid JSON");
    return make_error(errc::parse_error, fmt::format("{} {}", subject, why));
  }
  return root;
}

template result<nlohmann::json> parse_untrusted_json<nlohmann::json>(std::string_view,
                                                                     std::string_view,
                                                                     const json_limits&);
template result<nlohmann::ordered_json> parse_untrusted_json<nlohmann::ordered_json>(
    std::string_view, std::string_view, const json_limits&);
template std::string json_excerpt<nlohmann::json>(const nlohmann::json&, std::size_t);
template std::string json_excerpt<nlohmann::ordered_json>(const nlohmann::ordered_json&,
                                                          std::size_t);

}  // namespace mstar
