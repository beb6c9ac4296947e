#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mstar::models::jinja::internal {

// Python's str operations over UTF-8. Every string a template sees is valid
// UTF-8 (JSON input is validated by its parser, template source by the lexer),
// so these work on code points, as Python does, and never produce invalid
// sequences. Case mapping (case_map.cpp) covers ASCII, Latin-1, Latin
// Extended-A, Greek and Cyrillic; other scripts keep their letters as they are.

/// Whether `text` is valid UTF-8.
[[nodiscard]] bool valid_utf8(std::string_view text);

/// The code points of `text`.
[[nodiscard]] std::u32string decode(std::string_view text);

/// Appends the UTF-8 form of `cp`.
void append_utf8(std::string& out, char32_t cp);

/// The UTF-8 form of `cps`.
[[nodiscard]] std::string encode(std::u32string_view cps);

/// The number of code points (Python's len()).
[[nodiscard]] std::size_t length(std::string_view text);

/// Python's str.isspace() for one code point (also what `\s` matches).
[[nodiscard]] bool is_space(char32_t cp);

enum class strip_side : std::uint8_t { both, left, right };

/// str.strip / lstrip / rstrip: whitespace when `chars` is empty, else any of
/// the code points of `*chars`.
[[nodiscard]] std::string strip(std::string_view text, strip_side side,
                                const std::optional<std::string>& chars = std::nullopt);

/// str.split(sep, maxsplit): on runs of whitespace (dropping empty parts) when
/// `sep` is empty, else on every `*sep` (which must not be empty).
[[nodiscard]] std::vector<std::string> split(std::string_view text,
                                             const std::optional<std::string>& sep,
                                             std::int64_t maxsplit = -1);

/// str.rsplit(sep, maxsplit).
[[nodiscard]] std::vector<std::string> rsplit(std::string_view text,
                                              const std::optional<std::string>& sep,
                                              std::int64_t maxsplit = -1);

/// str.splitlines() (without keepends).
[[nodiscard]] std::vector<std::string> splitlines(std::string_view text);

/// str.replace(old, new, count); an empty `from` inserts between code points.
[[nodiscard]] std::string replace(std::string_view text, std::string_view from, std::string_view to,
                                  std::int64_t count = -1);

[[nodiscard]] std::string upper(std::string_view text);
[[nodiscard]] std::string lower(std::string_view text);
/// str.capitalize(): first code point title case, the rest lower.
[[nodiscard]] std::string capitalize(std::string_view text);
/// str.title(): a cased letter after an uncased character goes to title
/// case, other cased letters lower.
[[nodiscard]] std::string title(std::string_view text);

/// Whether a code point has case (str.islower / isupper / title care).
[[nodiscard]] bool is_cased(char32_t cp);

/// Whether a code point is a regex `\w` character (letters, digits, `_`):
/// ASCII exactly, other code points unless they are whitespace or common
/// punctuation and symbols.
[[nodiscard]] bool is_word(char32_t cp);

/// str.find(sub) in code points, -1 when absent; `reverse` for rfind.
[[nodiscard]] std::int64_t find(std::string_view text, std::string_view sub, bool reverse = false);

/// str.count(sub) (non-overlapping).
[[nodiscard]] std::int64_t count(std::string_view text, std::string_view sub);

}  // namespace mstar::models::jinja::internal
