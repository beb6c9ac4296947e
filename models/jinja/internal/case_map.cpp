// Python's simple case mappings for the scripts chat text most often uses:
// ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (plus ß -> SS and
// İ -> i̇, Python's two full mappings there). Greek's final sigma is not
// applied (σ everywhere).
#include "models/jinja/internal/text.hpp"

namespace mstar::models::jinja::internal {
namespace {

// Latin Extended-A pairs its letters upper/lower as even/odd, except
// U+0139..U+0148 and U+0179..U+017E, which pair odd/even.
bool latin_a_upper(char32_t cp) {
  const bool odd_first = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
  return odd_first ? (cp % 2 == 1) : (cp % 2 == 0);
}

bool latin_a_paired(char32_t cp) {
  return cp >= 0x100 && cp <= 0x17E && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149 &&
         cp != 0x178;
}

char32_t upper_of(char32_t cp) {
  if (cp < 0x80)
    return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)
    return cp - 32;
  if (cp == 0xFF)
    return 0x178;
  if (cp == 0xB5)
    return 0x39C;
  if (cp == 0x131)
    return 'I';
  if (cp == 0x17F)
    return 'S';
  if (latin_a_paired(cp))
    return latin_a_upper(cp) ? cp : cp - 1;
  if ((cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) || (cp >= 0x430 && cp <= 0x44F))
    return cp - 32;
  if (cp == 0x3C2)
    return 0x3A3;
  if (cp == 0x3AC)
    return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF)
    return cp - 37;
  if (cp == 0x3CC)
    return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE)
    return cp - 63;
  if (cp >= 0x450 && cp <= 0x45F)
    return cp - 80;
  return cp;
}

char32_t lower_of(char32_t cp) {
  if (cp < 0x80)
    return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)
    return cp + 32;
  if (cp == 0x178)
    return 0xFF;
  if (latin_a_paired(cp))
    return latin_a_upper(cp) ? cp + 1 : cp;
  if ((cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) || (cp >= 0x410 && cp <= 0x42F))
    return cp + 32;
  if (cp == 0x386)
    return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A)
    return cp + 37;
  if (cp == 0x38C)
    return 0x3CC;
  if (cp == 0x38E || cp == 0x38F)
    return cp + 63;
  if (cp >= 0x400 && cp <= 0x40F)
    return cp + 80;
  return cp;
}

void append_upper(std::string& out, char32_t cp) {
  if (cp == 0xDF)
    out += "SS";
  else
    append_utf8(out, upper_of(cp));
}

void append_lower(std::string& out, char32_t cp) {
  if (cp == 0x130)
    out += "i\xCC\x87";  // i + combining dot above
  else
    append_utf8(out, lower_of(cp));
}

void append_title(std::string& out, char32_t cp) {
  if (cp == 0xDF)
    out += "Ss";
  else
    append_utf8(out, upper_of(cp));
}

}  // namespace

bool is_cased(char32_t cp) {
  return upper_of(cp) != cp || lower_of(cp) != cp || cp == 0xDF || cp == 0x138 || cp == 0x149 ||
         cp == 0x130;
}

bool is_word(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  if (is_space(cp))
    return false;
  if (cp >= 0xA0 && cp <= 0xBF)  // Latin-1 punctuation and symbols, save ª ² ³ µ ¹ º ¼-¾
    return cp == 0xAA || cp == 0xB2 || cp == 0xB3 || cp == 0xB5 || cp == 0xB9 || cp == 0xBA ||
           (cp >= 0xBC && cp <= 0xBE);
  if (cp == 0xD7 || cp == 0xF7)
    return false;
  return !((cp >= 0x2000 && cp <= 0x2BFF) || (cp >= 0x3000 && cp <= 0x303F) ||
           (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF0F) ||
           (cp >= 0x1F000 && cp <= 0x1FAFF));
}

std::string upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : decode(text))
    append_upper(out, cp);
  return out;
}

std::string lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : decode(text))
    append_lower(out, cp);
  return out;
}

std::string capitalize(std::string_view text) {
  std::string out;
  bool first = true;
  for (char32_t cp : decode(text)) {
    if (first)
      append_title(out, cp);
    else
      append_lower(out, cp);
    first = false;
  }
  return out;
}

std::string title(std::string_view text) {
  std::string out;
  bool previous_cased = false;
  for (char32_t cp : decode(text)) {
    if (previous_cased)
      append_lower(out, cp);
    else
      append_title(out, cp);
    previous_cased = is_cased(cp);
  }
  return out;
}

}  // namespace mstar::models::jinja::internal
