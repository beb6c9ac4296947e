#include "launcher/deploy/internal/map_reader.hpp"

#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <set>
#include <utility>

namespace mstar::deploy::internal {
namespace {

std::string_view kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "nothing";
}

template <class Number>
std::optional<Number> parse_number(std::string_view text) {
  Number value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end)
    return std::nullopt;
  return value;
}

}  // namespace

std::string join_path(std::string_view parent, std::string_view key) {
  if (parent.empty())
    return std::string{key};
  return fmt::format("{}.{}", parent, key);
}

map_reader::map_reader(YAML::Node node, std::string path)
    : node_(std::move(node)), path_(std::move(path)) {}

void map_reader::expect_keys(std::initializer_list<std::string_view> allowed) {
  if (failed())
    return;
  const std::string where = path_.empty() ? "the document" : path_;
  if (!node_.IsMap()) {
    fail(make_error(errc::invalid_argument,
                    fmt::format("{}: expected a map, got {}", where, kind_of(node_))));
    return;
  }
  std::set<std::string, std::less<>> seen;
  for (const auto& entry : node_) {
    if (!entry.first.IsScalar()) {
      fail(make_error(errc::invalid_argument, fmt::format("{}: a key is {}, expected a name", where,
                                                          kind_of(entry.first))));
      return;
    }
    const std::string& key = entry.first.Scalar();
    bool known = false;
    for (const auto a : allowed)
      known = known || a == key;
    if (!known) {
      fail(errc::invalid_argument, key,
           fmt::format("unknown key; allowed here: {}", fmt::join(allowed, ", ")));
      return;
    }
    if (!seen.insert(key).second) {
      fail(errc::invalid_argument, key, "given twice");
      return;
    }
  }
}

void map_reader::require(std::string_view key, std::string_view hint) {
  if (failed() || has(key))
    return;
  fail(errc::invalid_argument, key,
       hint.empty() ? std::string{"missing (required)"}
                    : fmt::format("missing (required: {})", hint));
}

bool map_reader::has(std::string_view key) const {
  return node_.IsMap() && at(key).IsDefined();
}

std::optional<std::string> map_reader::scalar(std::string_view key, std::string_view what) {
  if (failed() || !has(key))
    return std::nullopt;
  const YAML::Node value = at(key);
  if (!value.IsScalar()) {
    fail(errc::invalid_argument, key, fmt::format("expected {}, got {}", what, kind_of(value)));
    return std::nullopt;
  }
  return value.Scalar();
}

void map_reader::string(std::string_view key, std::string& out) {
  if (auto text = scalar(key, "a string")) {
    if (text->empty())
      fail(errc::invalid_argument, key, "must not be empty");
    else
      out = std::move(*text);
  }
}

void map_reader::path(std::string_view key, std::filesystem::path& out,
                      const std::filesystem::path& base) {
  std::string text;
  string(key, text);
  if (!text.empty())
    out = (base / text).lexically_normal();  // an absolute `text` replaces `base`
}

void map_reader::seconds(std::string_view key, double& out) {
  const auto text = scalar(key, "a number of seconds");
  if (!text)
    return;
  const auto value = parse_number<double>(*text);
  if (!value) {
    fail(errc::invalid_argument, key, fmt::format("expected a number of seconds, got '{}'", *text));
  } else if (!std::isfinite(*value)) {
    fail(errc::out_of_range, key, fmt::format("{} must be a finite number", *text));
  } else if (*value <= 0) {
    fail(errc::out_of_range, key, fmt::format("{} must be greater than 0", *text));
  } else {
    out = *value;
  }
}

void map_reader::fraction(std::string_view key, std::optional<double>& out) {
  const auto text = scalar(key, "a number in (0, 1]");
  if (!text)
    return;
  const auto value = parse_number<double>(*text);
  if (!value) {
    fail(errc::invalid_argument, key, fmt::format("expected a number in (0, 1], got '{}'", *text));
  } else if (!(*value > 0.0 && *value <= 1.0)) {
    fail(errc::out_of_range, key, fmt::format("{} must be in (0, 1]", *text));
  } else {
    out = *value;
  }
}

std::optional<std::int64_t> map_reader::read_integer(std::string_view key, std::int64_t lo,
                                                     std::int64_t hi) {
  const auto text = scalar(key, "an integer");
  if (!text)
    return std::nullopt;
  const auto value = parse_number<std::int64_t>(*text);
  if (!value) {
    fail(errc::invalid_argument, key, fmt::format("expected an integer, got '{}'", *text));
    return std::nullopt;
  }
  if (*value < lo || *value > hi) {
    fail(errc::out_of_range, key, fmt::format("{} is outside {}..{}", *value, lo, hi));
    return std::nullopt;
  }
  return value;
}

void map_reader::fail(error e) {
  if (!failure_)
    failure_ = std::move(e);
}

void map_reader::fail(errc code, std::string_view key, std::string_view message) {
  fail(make_error(code, fmt::format("{}: {}", key_path(key), message)));
}

}  // namespace mstar::deploy::internal
