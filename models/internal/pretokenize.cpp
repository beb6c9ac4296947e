#include "models/internal/pretokenize.hpp"

#include <algorithm>

namespace mstar::models::internal {
namespace {

struct range {
  char32_t first;
  char32_t last;
};

// Sorted, non-overlapping; see classify() for what they approximate.
constexpr range letters[] = {
    {0xAA, 0xAA},     {0xB5, 0xB5},     {0xBA, 0xBA},     {0xC0, 0xD6},     {0xD8, 0xF6},
    {0xF8, 0x2FF},    {0x370, 0x374},   {0x376, 0x37D},   {0x37F, 0x37F},   {0x386, 0x386},
    {0x388, 0x3FF},   {0x400, 0x481},   {0x48A, 0x52F},   {0x531, 0x556},   {0x560, 0x588},
    {0x5D0, 0x5EA},   {0x620, 0x64A},   {0x671, 0x6D3},   {0x904, 0x939},   {0x958, 0x961},
    {0xE01, 0xE30},   {0x10A0, 0x10FF}, {0x1100, 0x11FF}, {0x1E00, 0x1FBC}, {0x3041, 0x3096},
    {0x309D, 0x309F}, {0x30A1, 0x30FA}, {0x30FC, 0x30FF}, {0x3400, 0x4DBF}, {0x4E00, 0x9FFF},
    {0xAC00, 0xD7A3}, {0xF900, 0xFAFF}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x20000, 0x2FFFF},
};
constexpr range numbers[] = {
    {0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},     {0x660, 0x669},   {0x6F0, 0x6F9},
    {0x966, 0x96F},   {0xE50, 0xE59},   {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089},
    {0x2150, 0x2189}, {0x2460, 0x249B}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0xFF10, 0xFF19},
};
constexpr range spaces[] = {
    {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};

template <std::size_t N>
bool in(const range (&table)[N], char32_t c) {
  const auto it = std::upper_bound(std::begin(table), std::end(table), c,
                                   [](char32_t value, const range& r) { return value < r.first; });
  return it != std::begin(table) && c <= std::prev(it)->last;
}

constexpr std::string_view contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};

char_class class_at(std::string_view text, std::size_t at) {
  return classify(decode_utf8(text, at).code_point);
}

// End of the run of `kind` code points starting at `at`.
std::size_t run_end(std::string_view text, std::size_t at, char_class kind) {
  while (at < text.size() && class_at(text, at) == kind)
    at += decode_utf8(text, at).length;
  return at;
}

// Length of the piece starting at `at` (text[at] is not whitespace, or is a
// space prefixing a non-whitespace code point).
std::size_t word_piece(std::string_view text, std::size_t at) {
  for (const std::string_view c : contractions) {
    if (text.substr(at).starts_with(c))
      return c.size();
  }
  const std::size_t body = text[at] == ' ' ? at + 1 : at;
  return run_end(text, body, class_at(text, body)) - at;
}

// Length of the piece starting at whitespace `at`: `\s+(?!\S)` then `\s+`.
std::size_t space_piece(std::string_view text, std::size_t at) {
  const std::size_t end = run_end(text, at, char_class::space);
  if (end == text.size())
    return end - at;
  std::size_t last = at;  // start of the run's last code point
  for (std::size_t i = at; i < end; i += decode_utf8(text, i).length)
    last = i;
  if (last > at)
    return last - at;  // leave the last one for what follows
  return end - at;     // a single whitespace before a word stands alone
}

}  // namespace

char_class classify(char32_t c) noexcept {
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return char_class::letter;
    if (c >= '0' && c <= '9')
      return char_class::number;
    if (c == ' ' || (c >= '\t' && c <= '\r'))
      return char_class::space;
    return char_class::other;
  }
  if (in(spaces, c))
    return char_class::space;
  if (in(numbers, c))
    return char_class::number;
  if (in(letters, c))
    return char_class::letter;
  return char_class::other;
}

decoded decode_utf8(std::string_view text, std::size_t at) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80)
    return {lead, 1};
  std::size_t length = 0;
  char32_t value = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    value = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    value = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    value = lead & 0x07;
  } else {
    return {0xFFFD, 1};
  }
  if (at + length > text.size())
    return {0xFFFD, 1};
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80)
      return {0xFFFD, 1};
    value = (value << 6) | (byte(at + i) & 0x3F);
  }
  return {value, length};
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

std::vector<std::string_view> split_gpt2(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const bool space = class_at(text, at) == char_class::space;
    const bool prefixed_word =
        text[at] == ' ' && at + 1 < text.size() && class_at(text, at + 1) != char_class::space;
    const std::size_t length =
        space && !prefixed_word ? space_piece(text, at) : word_piece(text, at);
    out.push_back(text.substr(at, length));
    at += length;
  }
  return out;
}

const std::array<char32_t, 256>& byte_to_code_point() noexcept {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      const bool prints = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = prints ? b : next++;
    }
    return t;
  }();
  return table;
}

std::optional<std::uint8_t> code_point_to_byte(char32_t c) noexcept {
  if (c < 0x100) {
    const bool prints = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
    if (prints)
      return static_cast<std::uint8_t>(c);
    return std::nullopt;
  }
  const auto& table = byte_to_code_point();
  for (unsigned b = 0; b < 256; ++b) {
    if (table[b] == c)
      return static_cast<std::uint8_t>(b);
  }
  return std::nullopt;
}

}  // namespace mstar::models::internal
