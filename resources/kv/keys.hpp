#pragma once

// Page keys for prefix reuse across requests (reference kv-keys-windowing §1).
//
// A page key is SHA-256 over (parent key, the page's token ids, the page's
// non-token items), so one matching key proves the whole prefix below it.
// The byte encoding is canonical and identical to the Python engine's: a
// Python preprocess stage and this engine compute the same keys.
//
// Hashing reuses one OpenSSL digest context and one preimage buffer per
// thread, so keying a page allocates nothing once the buffer has grown.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/result.hpp"

namespace mstar::resources {

/// A token id as keys encode it: u32, little-endian.
using token_id = std::uint32_t;

/// A SHA-256 digest: page keys, roots, fingerprints.
using digest256 = std::array<std::uint8_t, 32>;

/// Borrowed bytes (a parent key, a root, an item digest).
using byte_view = std::span<const std::uint8_t>;

/// An input that is not a token (an image, audio clip...) as it sits on one
/// page. `start` is its first slot on this page, `offset` counts its slots on
/// earlier pages, `length` counts all its slots; `digest` names its content.
struct page_item {
  std::uint32_t start = 0;
  std::uint32_t offset = 0;
  std::uint32_t length = 0;
  std::vector<std::uint8_t> digest;

  friend bool operator==(const page_item&, const page_item&) = default;
};

/// Items per page index; pages without items are absent.
using items_by_page = std::map<std::size_t, std::vector<page_item>>;

/// One span of a layout as `page_items` reads it: `length` slots of token
/// ids (no digest) or of one item (with its digest).
struct layout_span {
  std::uint64_t length = 0;
  std::optional<std::vector<std::uint8_t>> digest;
};

/// One argument of `fingerprint`. Byte strings hash as themselves; text as
/// its UTF-8 bytes; numbers, booleans and null as the text Python's `str()`
/// gives them ("128", "-5", "True", "500000.0", "None"), which keeps roots
/// byte-compatible with the Python engine.
class fingerprint_field {
 public:
  fingerprint_field(byte_view bytes) : view_(bytes) {}  // NOLINT: implicit by design
  fingerprint_field(const std::vector<std::uint8_t>& bytes) : view_(bytes) {}  // NOLINT
  fingerprint_field(const digest256& bytes) : view_(bytes) {}                  // NOLINT
  fingerprint_field(std::string_view text) : view_(as_bytes(text)) {}          // NOLINT
  fingerprint_field(const std::string& text) : view_(as_bytes(text)) {}        // NOLINT
  fingerprint_field(const char* text) : view_(as_bytes(text)) {}               // NOLINT
  fingerprint_field(bool value) : owned_(value ? "True" : "False") { view_ = as_bytes(owned_); }
  fingerprint_field(std::nullptr_t) : owned_("None") { view_ = as_bytes(owned_); }  // NOLINT
  fingerprint_field(double value);                                                  // NOLINT
  template <class Int>
  requires(std::is_integral_v<Int> && !std::is_same_v<Int, bool> && !std::is_same_v<Int, char>)
      fingerprint_field(Int value)
      : owned_(std::to_string(value)) {  // NOLINT
    view_ = as_bytes(owned_);
  }

  fingerprint_field(const fingerprint_field&) = delete;
  fingerprint_field& operator=(const fingerprint_field&) = delete;

  /// The bytes this field contributes (before its length prefix).
  [[nodiscard]] byte_view bytes() const noexcept { return view_; }

 private:
  static byte_view as_bytes(std::string_view s) noexcept {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
  }

  std::string owned_;
  byte_view view_;
};

/// Python's `repr(float)`: shortest round-trip digits, exponent form below
/// 1e-4 and from 1e16 up ("1e-05", "1e+16"), "nan", "inf", "-0.0".
[[nodiscard]] std::string python_float_text(double value);

/// SHA-256 over `u32le(len(f)) || f` for every field in order. Zero fields
/// give SHA-256 of the empty string; field boundaries matter.
[[nodiscard]] digest256 fingerprint(std::span<const byte_view> fields);

/// Variadic form over anything a `fingerprint_field` accepts:
/// `fingerprint("model", page_size, salt_bytes)`.
template <class... Fields>
requires(std::is_constructible_v<fingerprint_field, const Fields&>&&...) [[nodiscard]] digest256
    fingerprint(const Fields&... fields) {
  if constexpr (sizeof...(Fields) == 0) {
    return fingerprint(std::span<const byte_view>{});
  } else {
    const fingerprint_field wrapped[] = {fingerprint_field{fields}...};
    std::array<byte_view, sizeof...(Fields)> views{};
    for (std::size_t i = 0; i < views.size(); ++i)
      views[i] = wrapped[i].bytes();
    return fingerprint(std::span<const byte_view>{views});
  }
}

/// Key of one page: SHA-256 of `field(prev) || field(tokens as u32le) ||
/// field(items)`, each item encoded `u32le(start, offset, length) ||
/// field(digest)`. Fails only when a field is too long for its u32 length.
[[nodiscard]] result<digest256> page_key(byte_view prev, std::span<const token_id> tokens,
                                         std::span<const page_item> items = {});

/// Key of the first `end` slots of a page, where an item ends inside it: the
/// items starting before `end` and the ids that fill the slots they leave.
/// Fails when `end` does not leave a whole number of this page's ids.
[[nodiscard]] result<digest256> end_key(byte_view prev, std::span<const token_id> tokens,
                                        std::span<const page_item> items, std::uint64_t end);

/// Each page's items for a layout of spans, paging with `page_size` slots.
/// Fails on a page size below 1 or a span too long to encode.
[[nodiscard]] result<items_by_page> page_items(std::span<const layout_span> spans,
                                               std::int64_t page_size);

/// Keys of consecutive pages, each folded into the next, starting from
/// `root` (empty for the unrooted keys a preprocess stage sends). Fails when
/// `items` names a page that `pages` does not have.
[[nodiscard]] result<std::vector<digest256>> chain(std::span<const std::vector<token_id>> pages,
                                                   const items_by_page& items = {},
                                                   byte_view root = {});

/// Checked conversion of wider integers (JSON, Python, tokenizer output) to
/// token ids: an id outside [0, 2^32) is an error naming its index and value,
/// never truncated.
[[nodiscard]] result<std::vector<token_id>> to_token_ids(std::span<const std::int64_t> ids);

}  // namespace mstar::resources
