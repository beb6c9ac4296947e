#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mstar {

/// The project's one error-code enum. Library layers below the actors return
/// these inside `mstar::error`; transport and actors convert them to
/// `caf::error` with the same codes.
enum class errc : std::uint8_t {
  invalid_argument = 1,  ///< an argument or input field is malformed or out of its domain
  out_of_range,          ///< an index or value does not fit where it must go
  parse_error,           ///< text (JSON, YAML, hex) could not be parsed
  not_found,             ///< a named thing (file, block, label) does not exist
  io_error,              ///< reading or writing outside the process failed
  unsupported,           ///< valid input this build or family cannot handle
  internal,              ///< a broken invariant or a failed component (a bug, or a lost peer)
  cancelled,             ///< the work was cancelled or its owner stopped
};

/// The stable lowercase name of `code`, as it appears in logs and JSON.
[[nodiscard]] std::string_view to_string(errc code) noexcept;

/// A failure with its code and a message naming what was wrong and why.
/// Messages are written for the person who supplied the input: they name the
/// field or argument, the value seen and the rule it broke.
class error {
 public:
  error(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  [[nodiscard]] errc code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

  /// Prefixes the message with `context` ("spans[2]: " style), for callers
  /// that know where in a larger input the failing part sat.
  [[nodiscard]] error with_context(std::string_view context) const;

  /// "<code>: <message>", for logs and CLI output.
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const error&, const error&) = default;

 private:
  errc code_;
  std::string message_;
};

}  // namespace mstar
