#pragma once

// A typed, strided, non-owning view: how kernel params structs borrow memory.
// Shapes and strides count elements, not bytes; a stride of 0 broadcasts.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/result.hpp"

#if defined(__CUDACC__)
#define MSTAR_HOST_DEVICE __host__ __device__
#else
#define MSTAR_HOST_DEVICE
#endif

namespace mstar::kernels {

/// A rank-`Rank` view of elements of type `T` at `data`, element
/// `(i0, i1, ...)` at `data[i0 * strides[0] + i1 * strides[1] + ...]`. It
/// borrows: whoever builds one keeps the memory alive while it is used. A view
/// with a null `data` is "absent" (optional operands such as a bias).
template <class T, std::size_t Rank>
struct view {
  static_assert(Rank >= 1, "a view has at least one dimension");

  T* data = nullptr;                         ///< element (0, ..., 0); null when absent
  std::array<std::int64_t, Rank> shape{};    ///< extent of each dimension
  std::array<std::int64_t, Rank> strides{};  ///< element step of each dimension

  /// The element at the given indices; unchecked (the caller validated the
  /// shape once, the inner loops index freely).
  template <class... Index>
  requires(sizeof...(Index) == Rank && (std::is_integral_v<Index> && ...)) MSTAR_HOST_DEVICE T&
  operator()(Index... index) const noexcept {
    const std::array<std::int64_t, Rank> at{static_cast<std::int64_t>(index)...};
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < Rank; ++d)
      offset += at[d] * strides[d];
    return data[offset];
  }

  /// Number of elements (the product of the shape).
  [[nodiscard]] MSTAR_HOST_DEVICE std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (const auto extent : shape)
      n *= extent;
    return n;
  }

  /// Whether the elements are packed row-major with no gaps or broadcasts.
  [[nodiscard]] bool is_contiguous() const noexcept {
    std::int64_t expected = 1;
    for (std::size_t d = Rank; d-- > 0;) {
      if (shape[d] != 1 && strides[d] != expected)
        return false;
      expected *= shape[d];
    }
    return true;
  }

  /// True when the view is present (non-null data).
  explicit operator bool() const noexcept { return data != nullptr; }

  /// A read-only view of the same elements, so a mutable buffer can be passed
  /// where a params struct borrows `const` input.
  operator view<const T, Rank>() const noexcept  // NOLINT(google-explicit-constructor)
      requires(!std::is_const_v<T>) {
    return view<const T, Rank>{data, shape, strides};
  }
};

/// A row-major contiguous view of `shape` over `data`.
template <class T, std::size_t Rank>
[[nodiscard]] view<T, Rank> contiguous(T* data, const std::array<std::int64_t, Rank>& shape) {
  view<T, Rank> v{data, shape, {}};
  std::int64_t stride = 1;
  for (std::size_t d = Rank; d-- > 0;) {
    v.strides[d] = stride;
    stride *= shape[d];
  }
  return v;
}

/// A row-major [rows, cols] view over `data`.
template <class T>
[[nodiscard]] view<T, 2> matrix(T* data, std::int64_t rows, std::int64_t cols) {
  return contiguous<T, 2>(data, {rows, cols});
}

/// A [n] view over `data`.
template <class T>
[[nodiscard]] view<T, 1> vector(T* data, std::int64_t n) {
  return contiguous<T, 1>(data, {n});
}

/// Wildcard extent for `check_view`: any size is accepted in that dimension.
inline constexpr std::int64_t any_extent = -1;

namespace detail {
template <std::size_t Rank>
std::string format_shape(const std::array<std::int64_t, Rank>& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < Rank; ++d) {
    if (d != 0)
      text += ", ";
    text += shape[d] == any_extent ? std::string{"*"} : std::to_string(shape[d]);
  }
  return text + "]";
}
}  // namespace detail

/// Checks that `v` has shape `expected` (`any_extent` matches any size),
/// non-negative strides, and data whenever it holds elements. The error names
/// the operand (`name`), the shape seen and the shape wanted.
template <class T, std::size_t Rank>
[[nodiscard]] result<void> check_view(const view<T, Rank>& v, std::string_view name,
                                      const std::array<std::int64_t, Rank>& expected) {
  bool match = true;
  for (std::size_t d = 0; d < Rank; ++d) {
    match = match && v.shape[d] >= 0 && (expected[d] == any_extent || expected[d] == v.shape[d]);
  }
  if (!match) {
    return make_error(errc::invalid_argument, std::string{name} + ": shape " +
                                                  detail::format_shape(v.shape) + ", expected " +
                                                  detail::format_shape(expected));
  }
  for (const auto stride : v.strides) {
    if (stride < 0) {
      return make_error(errc::invalid_argument,
                        std::string{name} + ": negative strides are not supported");
    }
  }
  if (v.data == nullptr && v.numel() > 0) {
    return make_error(errc::invalid_argument, std::string{name} + ": null data for " +
                                                  detail::format_shape(v.shape) + " elements");
  }
  return {};
}

}  // namespace mstar::kernels
