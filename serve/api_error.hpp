#pragma once

// An error as an OpenAI-compatible server answers it: an HTTP status and the
// body `{"error": {"message", "type", "param", "code"}}` that the official
// clients turn into their exception types (400 BadRequestError, 401
// AuthenticationError, 404 NotFoundError, 413, 429 RateLimitError, 5xx
// InternalServerError).

#include <string>
#include <utility>
#include <variant>

namespace mstar::serve {

struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  ///< the offending field ("" when none)
  std::string code;   ///< a machine-readable reason ("" when none)
};

/// 400 about field `param`.
[[nodiscard]] inline api_error bad_request(std::string message, std::string param = {},
                                           std::string code = {}) {
  return {400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

/// A value or the error to answer with.
template <class T>
class [[nodiscard]] api_result {
 public:
  api_result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT
  api_result(api_error e) : state_(std::in_place_index<1>, std::move(e)) {}  // NOLINT
  [[nodiscard]] bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& operator*() { return std::get<0>(state_); }
  const T& operator*() const { return std::get<0>(state_); }
  T* operator->() { return &std::get<0>(state_); }
  const T* operator->() const { return &std::get<0>(state_); }
  [[nodiscard]] const api_error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, api_error> state_;
};

/// The JSON body of `e` (compact, one line).
[[nodiscard]] std::string error_body(const api_error& e);

}  // namespace mstar::serve
