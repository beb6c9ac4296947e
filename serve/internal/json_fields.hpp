#pragma once

// Typed reads of optional fields of a JSON request body: each read checks
// the type and the range, treats null as absent, and keeps the first error
// (naming the field) for the caller to answer with.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.hpp"
#include "serve/api_error.hpp"

namespace mstar::serve::internal {

class fields {
 public:
  explicit fields(const nlohmann::ordered_json& body) : body_(body) {}

  void string(const char* name, std::optional<std::string>& out);
  void integer(const char* name, std::optional<std::int64_t>& out, std::int64_t lo,
               std::int64_t hi);
  void number(const char* name, std::optional<double>& out, double lo, double hi);
  void boolean(const char* name, bool& out);
  void boolean(const char* name, std::optional<bool>& out);
  /// A string or a list of at most `max` strings.
  void strings_or_string(const char* name, std::vector<std::string>& out, std::size_t max);
  /// A list of ids below `vocab`.
  void token_ids(const char* name, std::vector<engine::token_id>& out, std::int64_t vocab);
  /// `stream_options`: an object whose `include_usage` is a boolean.
  void stream_options(bool& include_usage);
  void object(const char* name, nlohmann::ordered_json& out);
  void array(const char* name, nlohmann::ordered_json& out);

  /// The first error, if any read failed.
  [[nodiscard]] const std::optional<api_error>& failed() const noexcept { return error_; }

 private:
  // The field's value, or null when absent, null or after an earlier error.
  [[nodiscard]] const nlohmann::ordered_json* find(const char* name) const;
  void fail(const char* name, std::string_view what);

  const nlohmann::ordered_json& body_;
  std::optional<api_error> error_;
};

}  // namespace mstar::serve::internal
