#include "models/internal/pretokenize.hpp"

#include <algorithm>

namespace mstar::models::internal {
namespace {

constexpr decoded not_utf8{0xFFFD, 1};

// A stretch of text: a match of the pattern or what lies between two.
struct marked {
  std::size_t begin;
  std::size_t end;
  bool flag;  // a match (find_matches); to be dropped (after the behaviour)
};

// `text` cut into matches and the stretches between them, covering it in
// order (`tokenizers`' Pattern::find_matches), flags flipped when inverted.
std::vector<marked> find_matches(const split_rule& rule, std::string_view text) {
  std::vector<marked> out;
  std::size_t previous = 0;
  for (const byte_span match : rule.pattern.find_all(text)) {
    if (previous != match.begin)
      out.push_back({previous, match.begin, rule.invert});
    out.push_back({match.begin, match.end, !rule.invert});
    previous = match.end;
  }
  if (previous != text.size())
    out.push_back({previous, text.size(), rule.invert});
  return out;
}

// Glues stretches as `behavior` says; the flag of the result is "drop it".
std::vector<marked> apply_behavior(std::vector<marked> matches, split_behavior behavior) {
  std::vector<marked> out;
  bool previous_match = false;
  const auto glue = [&](const marked& m, bool joins) {
    if (joins && !out.empty()) {
      out.back().end = m.end;
    } else {
      out.push_back({m.begin, m.end, false});
    }
    previous_match = m.flag;
  };
  switch (behavior) {
    case split_behavior::removed:
      return matches;
    case split_behavior::isolated:
      for (auto& m : matches)
        m.flag = false;
      return matches;
    case split_behavior::contiguous:
      for (const auto& m : matches)
        glue(m, m.flag == previous_match);
      return out;
    case split_behavior::merged_with_previous:
      for (const auto& m : matches)
        glue(m, m.flag && !previous_match);
      return out;
    case split_behavior::merged_with_next:
      // Right to left, gluing each match to the stretch after it.
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->flag && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back({it->begin, it->end, false});
        }
        previous_match = it->flag;
      }
      std::reverse(out.begin(), out.end());
      return out;
  }
  return out;
}

void split_utf8(const split_rule& rule, std::string_view text, std::vector<std::string_view>& out) {
  for (const marked& piece : apply_behavior(find_matches(rule, text), rule.behavior)) {
    if (!piece.flag && piece.end > piece.begin)
      out.push_back(text.substr(piece.begin, piece.end - piece.begin));
  }
}

// Bytes 0x100 + n stand for, in byte order, the bytes that do not print.
const std::array<std::uint8_t, 68>& high_code_point_bytes() noexcept {
  static const std::array<std::uint8_t, 68> table = [] {
    std::array<std::uint8_t, 68> t{};
    const auto& forward = byte_to_code_point();
    for (unsigned b = 0; b < 256; ++b) {
      if (forward[b] >= 0x100)
        t[forward[b] - 0x100] = static_cast<std::uint8_t>(b);
    }
    return t;
  }();
  return table;
}

bool prints_as_itself(char32_t c) noexcept {
  return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
}

}  // namespace

decoded decode_utf8(std::string_view text, std::size_t at) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80)
    return {lead, 1};
  std::size_t length = 0;
  char32_t value = 0;
  char32_t smallest = 0;  // below it the form is overlong
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    value = lead & 0x1F;
    smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    value = lead & 0x0F;
    smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    value = lead & 0x07;
    smallest = 0x10000;
  } else {
    return not_utf8;
  }
  if (at + length > text.size())
    return not_utf8;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80)
      return not_utf8;
    value = (value << 6) | (byte(at + i) & 0x3F);
  }
  if (value < smallest || (value >= 0xD800 && value <= 0xDFFF) || value > 0x10FFFF)
    return not_utf8;
  return {value, length};
}

bool is_valid_utf8_at(std::string_view text, std::size_t at) noexcept {
  const decoded d = decode_utf8(text, at);
  return d.length > 1 || d.code_point < 0x80;
}

bool is_valid_utf8(std::string_view text) noexcept {
  for (std::size_t at = 0; at < text.size(); at += decode_utf8(text, at).length) {
    if (!is_valid_utf8_at(text, at))
      return false;
  }
  return true;
}

void append_utf8(std::string& out, char32_t c) {
  const auto put = [&](unsigned v) { out.push_back(static_cast<char>(v)); };
  if (c < 0x80) {
    put(c);
  } else if (c < 0x800) {
    put(0xC0 | (c >> 6));
    put(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    put(0xE0 | (c >> 12));
    put(0x80 | ((c >> 6) & 0x3F));
    put(0x80 | (c & 0x3F));
  } else {
    put(0xF0 | (c >> 18));
    put(0x80 | ((c >> 12) & 0x3F));
    put(0x80 | ((c >> 6) & 0x3F));
    put(0x80 | (c & 0x3F));
  }
}

std::vector<utf8_run> utf8_runs(std::string_view text) {
  std::vector<utf8_run> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const bool valid = is_valid_utf8_at(text, at);
    std::size_t end = at;
    while (end < text.size() && is_valid_utf8_at(text, end) == valid)
      end += valid ? decode_utf8(text, end).length : 1;
    out.push_back({text.substr(at, end - at), valid});
    at = end;
  }
  return out;
}

std::vector<std::string_view> split(const split_rule& rule, std::string_view text) {
  std::vector<std::string_view> out;
  for (const utf8_run& run : utf8_runs(text)) {
    if (run.valid) {
      split_utf8(rule, run.text, out);
    } else {
      out.push_back(run.text);
    }
  }
  return out;
}

const std::array<char32_t, 256>& byte_to_code_point() noexcept {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b)
      t[b] = prints_as_itself(b) ? b : next++;
    return t;
  }();
  return table;
}

std::optional<std::uint8_t> code_point_to_byte(char32_t c) noexcept {
  if (c < 0x100) {
    if (prints_as_itself(c))
      return static_cast<std::uint8_t>(c);
    return std::nullopt;
  }
  const auto& high = high_code_point_bytes();
  if (c - 0x100 < high.size())
    return high[c - 0x100];
  return std::nullopt;
}

std::string byte_level_decode(std::string_view token) {
  std::string bytes;
  for (std::size_t at = 0; at < token.size();) {
    const decoded d = decode_utf8(token, at);
    const auto byte = is_valid_utf8_at(token, at) ? code_point_to_byte(d.code_point) : std::nullopt;
    if (!byte)
      return std::string{token};
    bytes.push_back(static_cast<char>(*byte));
    at += d.length;
  }
  return bytes;
}

}  // namespace mstar::models::internal
