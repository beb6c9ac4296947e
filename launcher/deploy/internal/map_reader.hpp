#pragma once

// Typed reads from one YAML map, each checked and named by its key path.

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <yaml-cpp/yaml.h>

#include "core/result.hpp"

namespace mstar::deploy::internal {

/// "nodes[1]" + "port" -> "nodes[1].port"; at the top level just "port".
[[nodiscard]] std::string join_path(std::string_view parent, std::string_view key);

/// Reads the keys of one YAML map into fields. The first failure sticks: later
/// reads do nothing and failure() returns it, so a section reads top to bottom
/// and checks once at the end. Reads of absent keys leave the field as it was
/// (its default). Never throws.
class map_reader {
 public:
  /// `path` is the map's own key path: "" for the document, "nodes[1]".
  map_reader(YAML::Node node, std::string path);

  /// Fails unless the node is a map with scalar keys, each given once, each
  /// one of `allowed` (the message lists them).
  void expect_keys(std::initializer_list<std::string_view> allowed);

  /// Fails when `key` is absent; `hint` ends the message.
  void require(std::string_view key, std::string_view hint = {});

  void string(std::string_view key, std::string& out);
  void path(std::string_view key, std::filesystem::path& out, const std::filesystem::path& base);
  /// A finite number of seconds greater than 0.
  void seconds(std::string_view key, double& out);
  /// A number in (0, 1].
  void fraction(std::string_view key, std::optional<double>& out);

  template <class Int>
  void integer(std::string_view key, Int& out, std::int64_t lo, std::int64_t hi) {
    if (const auto v = read_integer(key, lo, hi))
      out = static_cast<Int>(*v);
  }
  template <class Int>
  void integer(std::string_view key, std::optional<Int>& out, std::int64_t lo, std::int64_t hi) {
    if (const auto v = read_integer(key, lo, hi))
      out = static_cast<Int>(*v);
  }

  /// Runs `read` on a reader over the map at `key`, when present.
  template <class Fn>
  void section(std::string_view key, std::initializer_list<std::string_view> allowed, Fn&& read) {
    if (failed() || !has(key))
      return;
    map_reader child{at(key), key_path(key)};
    child.expect_keys(allowed);
    if (!child.failed())
      read(child);
    if (child.failed())
      fail(*child.failure_);
  }

  [[nodiscard]] bool has(std::string_view key) const;
  /// The value at `key` (check has() first).
  [[nodiscard]] YAML::Node at(std::string_view key) const { return node_[std::string{key}]; }
  [[nodiscard]] std::string key_path(std::string_view key) const { return join_path(path_, key); }

  /// Records `e` unless an earlier failure is already recorded.
  void fail(error e);
  /// Records "<key path>: <message>" with `code`.
  void fail(errc code, std::string_view key, std::string_view message);
  [[nodiscard]] bool failed() const noexcept { return failure_.has_value(); }
  [[nodiscard]] const std::optional<error>& failure() const noexcept { return failure_; }

 private:
  /// The scalar text at `key`, or nothing (absent, failed, or not a scalar:
  /// then `what` names the expected kind in the message).
  [[nodiscard]] std::optional<std::string> scalar(std::string_view key, std::string_view what);
  [[nodiscard]] std::optional<std::int64_t> read_integer(std::string_view key, std::int64_t lo,
                                                         std::int64_t hi);

  YAML::Node node_;
  std::string path_;
  std::optional<error> failure_;
};

}  // namespace mstar::deploy::internal
