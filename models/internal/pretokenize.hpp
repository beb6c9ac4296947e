#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/internal/regex.hpp"

namespace mstar::models::internal {

/// The code point starting at `text[at]` and its length in bytes; a sequence
/// that is not UTF-8 (truncated, a stray continuation byte, an overlong form,
/// a surrogate, past U+10FFFF) reads as one byte with code point 0xFFFD.
struct decoded {
  char32_t code_point;
  std::size_t length;
};
[[nodiscard]] decoded decode_utf8(std::string_view text, std::size_t at) noexcept;

/// Whether the code point at `text[at]` is UTF-8 (decode_utf8 did not fall back).
[[nodiscard]] bool is_valid_utf8_at(std::string_view text, std::size_t at) noexcept;

/// Whether all of `text` is UTF-8.
[[nodiscard]] bool is_valid_utf8(std::string_view text) noexcept;

/// A stretch of text that is all UTF-8 (`valid`) or all bytes that are not.
struct utf8_run {
  std::string_view text;
  bool valid;
};

/// `text` as alternating non-empty runs of UTF-8 and of bytes that are not.
[[nodiscard]] std::vector<utf8_run> utf8_runs(std::string_view text);

/// Appends the UTF-8 encoding of `code_point` to `out`.
void append_utf8(std::string& out, char32_t code_point);

/// What a Split pre-tokenizer does with its matches (`tokenizers`'
/// SplitDelimiterBehavior): drop them, keep each as a piece, glue each to the
/// piece before or after it, or glue runs of adjacent matches (and of
/// adjacent non-matches) into one piece.
enum class split_behavior : std::uint8_t {
  removed,
  isolated,
  merged_with_previous,
  merged_with_next,
  contiguous,
};

/// A Split pre-tokenizer: its compiled pattern, what it does with matches and
/// whether the pattern marks what lies between the delimiters (`invert`).
struct split_rule {
  regex pattern;
  split_behavior behavior = split_behavior::isolated;
  bool invert = false;
};

/// The pattern ByteLevel splits with when `use_regex` is set (GPT-2's).
inline constexpr std::string_view gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// The non-empty pieces `rule` cuts `text` into, as `tokenizers` cuts them;
/// views into `text`, in order. Bytes that are not UTF-8 (which `tokenizers`
/// never receives: Python strings are Unicode) are left out of the search:
/// each run of them is a piece of its own, and the pattern runs on the UTF-8
/// text between them.
[[nodiscard]] std::vector<std::string_view> split(const split_rule& rule, std::string_view text);

/// GPT-2's reversible byte -> printable code point table: bytes that print
/// as themselves ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) keep their value; the
/// rest take 0x100, 0x101, ... in byte order.
[[nodiscard]] const std::array<char32_t, 256>& byte_to_code_point() noexcept;

/// The byte a code point of that table stands for, or nullopt.
[[nodiscard]] std::optional<std::uint8_t> code_point_to_byte(char32_t code_point) noexcept;

/// What the ByteLevel decoder makes of a token's text: the bytes its code
/// points stand for when every one is in the table, else the text unchanged.
[[nodiscard]] std::string byte_level_decode(std::string_view token);

}  // namespace mstar::models::internal
