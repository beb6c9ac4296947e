#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/result.hpp"

struct re_pattern_buffer;  // Oniguruma's compiled pattern (oniguruma.h stays in the .cpp)

namespace mstar::models::internal {

/// A byte range [begin, end) of a text.
struct byte_span {
  std::size_t begin = 0;
  std::size_t end = 0;
};

/// A pattern compiled once with Oniguruma as `tokenizers` compiles the
/// patterns of its Split and ByteLevel pre-tokenizers: UTF-8, Oniguruma's
/// default syntax (\p{L}, \p{N}, lookahead, `(?i:...)`), no options. Immutable
/// after compile, so one instance may search from several threads.
class regex {
 public:
  /// How `compile` reads its pattern.
  enum class syntax : std::uint8_t {
    pattern,  ///< a regular expression
    literal,  ///< the text itself (a Split `{"String": ...}` pattern)
  };

  /// Compiles `pattern`; a parse_error whose message is Oniguruma's when it
  /// does not compile (or says it is not UTF-8).
  [[nodiscard]] static result<regex> compile(std::string_view pattern,
                                             syntax kind = syntax::pattern);

  regex(regex&& other) noexcept;
  regex& operator=(regex&& other) noexcept;
  regex(const regex&) = delete;
  regex& operator=(const regex&) = delete;
  ~regex();

  /// The successive non-overlapping matches in `text`, which must be valid
  /// UTF-8, found as the `onig` crate's `find_iter` finds them: each search
  /// starts where the last match ended, and an empty match at the end of the
  /// previous match is skipped by stepping one code point. A search that hits
  /// Oniguruma's backtracking limits (a pattern exponential on this text)
  /// ends the list there.
  [[nodiscard]] std::vector<byte_span> find_all(std::string_view text) const;

 private:
  explicit regex(re_pattern_buffer* compiled) noexcept : compiled_(compiled) {}

  re_pattern_buffer* compiled_ = nullptr;
};

/// Whether `code_point` is Unicode white space, as `\s` (Oniguruma's Unicode tables).
[[nodiscard]] bool is_unicode_space(char32_t code_point) noexcept;

/// Whether `code_point` is a word character, as `\w` (letters, marks, decimal
/// digits, connector punctuation).
[[nodiscard]] bool is_unicode_word(char32_t code_point) noexcept;

}  // namespace mstar::models::internal
