#pragma once

#include <cassert>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/error.hpp"

namespace mstar {

/// A value or the error that prevented it: what fallible functions below the
/// actor layer return (C++20 has no std::expected). Access to the wrong
/// alternative is a programming error and asserts.
template <class T>
class [[nodiscard]] result {
  static_assert(!std::is_same_v<T, mstar::error>, "result<error> is ambiguous");

 public:
  result(T value) : state_(std::in_place_index<0>, std::move(value)) {}         // NOLINT
  result(mstar::error err) : state_(std::in_place_index<1>, std::move(err)) {}  // NOLINT

  [[nodiscard]] bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  [[nodiscard]] T& value() & { return checked_value(); }
  [[nodiscard]] const T& value() const& {
    assert(has_value());
    return *std::get_if<0>(&state_);
  }
  /// By value, so `for (auto& x : make().value())` cannot dangle.
  [[nodiscard]] T value() && { return std::move(checked_value()); }

  [[nodiscard]] const mstar::error& error() const& {
    assert(!has_value());
    return *std::get_if<1>(&state_);
  }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  T& checked_value() {
    assert(has_value());
    return *std::get_if<0>(&state_);
  }

  std::variant<T, mstar::error> state_;
};

/// Success or an error, for operations with nothing to return.
template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(mstar::error err) : error_(std::move(err)), failed_(true) {}  // NOLINT

  [[nodiscard]] bool has_value() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return has_value(); }

  [[nodiscard]] const mstar::error& error() const& {
    assert(failed_);
    return error_;
  }

 private:
  mstar::error error_{errc::invalid_argument, {}};
  bool failed_ = false;
};

/// Shorthand for building an error value in a return statement.
[[nodiscard]] inline error make_error(errc code, std::string message) {
  return error{code, std::move(message)};
}

}  // namespace mstar
