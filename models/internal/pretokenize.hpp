#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mstar::models::internal {

/// What the GPT-2 pre-tokenizer regex asks of a code point.
enum class char_class : std::uint8_t { letter, number, space, other };

/// The class of `code_point`: exact for ASCII, a table of the common scripts'
/// ranges above it (letters of Latin, Greek, Cyrillic, Armenian, Hebrew,
/// Arabic, Indic, Thai, Georgian, Hangul, kana and CJK; decimal digits and
/// number forms; Unicode White_Space). Anything else, combining marks and emoji
/// included, is `other`, which is where the approximation can differ from the
/// regex's \p{L} / \p{N}.
[[nodiscard]] char_class classify(char32_t code_point) noexcept;

/// The code point starting at `text[at]` and its length in bytes; an invalid
/// or truncated sequence reads as one byte with code point 0xFFFD.
struct decoded {
  char32_t code_point;
  std::size_t length;
};
[[nodiscard]] decoded decode_utf8(std::string_view text, std::size_t at) noexcept;

/// Appends the UTF-8 encoding of `code_point` to `out`.
void append_utf8(std::string& out, char32_t code_point);

/// Splits `text` as the GPT-2 pattern
/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
/// does, with `classify` standing in for the Unicode classes. The pieces are
/// views into `text` and concatenate back to it.
[[nodiscard]] std::vector<std::string_view> split_gpt2(std::string_view text);

/// GPT-2's reversible byte -> printable code point table: bytes that print
/// as themselves ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) keep their value; the
/// rest take 0x100, 0x101, ... in byte order.
[[nodiscard]] const std::array<char32_t, 256>& byte_to_code_point() noexcept;

/// The byte a code point of that table stands for, or nullopt.
[[nodiscard]] std::optional<std::uint8_t> code_point_to_byte(char32_t code_point) noexcept;

}  // namespace mstar::models::internal
