#include "models/jinja/internal/text.hpp"

#include <algorithm>

namespace mstar::models::jinja::internal {
namespace {

// The length of the sequence starting with `lead`, 0 for a bad lead byte.
int sequence_length(unsigned char lead) {
  if (lead < 0x80)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    return 2;
  if (lead >= 0xE0 && lead <= 0xEF)
    return 3;
  if (lead >= 0xF0 && lead <= 0xF4)
    return 4;
  return 0;
}

bool is_line_break(char32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
         cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

bool all_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const int n = sequence_length(lead);
    if (n == 0 || i + static_cast<std::size_t>(n) > text.size())
      return false;
    for (int k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80)
        return false;
    }
    const auto second = static_cast<unsigned char>(n > 1 ? text[i + 1] : 0);
    if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) ||
        (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F)) {
      return false;  // overlong, surrogate or past U+10FFFF
    }
    i += static_cast<std::size_t>(n);
  }
  return true;
}

std::u32string decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const int n = std::max(1, sequence_length(lead));
    char32_t cp = n == 1 ? lead : lead & (0x7F >> n);
    for (int k = 1; k < n && i + k < text.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out.push_back(cp);
    i += static_cast<std::size_t>(n);
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps)
    append_utf8(out, cp);
  return out;
}

std::size_t length(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

bool is_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string strip(std::string_view text, strip_side side, const std::optional<std::string>& chars) {
  const std::u32string cps = decode(text);
  const std::u32string set = chars ? decode(*chars) : std::u32string{};
  auto strippable = [&](char32_t cp) {
    return chars ? set.find(cp) != std::u32string::npos : is_space(cp);
  };
  std::size_t begin = 0;
  std::size_t end = cps.size();
  if (side != strip_side::right) {
    while (begin < end && strippable(cps[begin]))
      ++begin;
  }
  if (side != strip_side::left) {
    while (end > begin && strippable(cps[end - 1]))
      --end;
  }
  return encode(std::u32string_view{cps}.substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep,
                               std::int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
      const std::size_t at = text.find(*sep, start);
      if (at == std::string_view::npos)
        break;
      parts.emplace_back(text.substr(start, at - start));
      start = at + sep->size();
    }
    parts.emplace_back(text.substr(start));
    return parts;
  }
  const std::u32string cps = decode(text);
  std::size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_space(cps[i]))
      ++i;
    if (i == cps.size())
      break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit) {
      std::size_t end = cps.size();
      while (end > i && is_space(cps[end - 1]))
        --end;
      parts.push_back(encode(std::u32string_view{cps}.substr(i, end - i)));
      break;
    }
    std::size_t j = i;
    while (j < cps.size() && !is_space(cps[j]))
      ++j;
    parts.push_back(encode(std::u32string_view{cps}.substr(i, j - i)));
    i = j;
  }
  return parts;
}

std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep,
                                std::int64_t maxsplit) {
  if (maxsplit < 0 || !sep)
    return split(text, sep, maxsplit);  // whitespace rsplit with a bound is rare: same as split
  std::vector<std::string> parts;
  std::size_t end = text.size();
  while (static_cast<std::int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size())
      break;
    const std::size_t at = text.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos)
      break;
    parts.emplace_back(text.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  parts.emplace_back(text.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(std::string_view text) {
  const std::u32string cps = decode(text);
  std::vector<std::string> lines;
  std::size_t start = 0;
  std::size_t i = 0;
  while (i < cps.size()) {
    if (!is_line_break(cps[i])) {
      ++i;
      continue;
    }
    lines.push_back(encode(std::u32string_view{cps}.substr(start, i - start)));
    i += (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1;
    start = i;
  }
  if (start < cps.size())
    lines.push_back(encode(std::u32string_view{cps}.substr(start)));
  return lines;
}

std::string replace(std::string_view text, std::string_view from, std::string_view to,
                    std::int64_t count) {
  std::string out;
  std::int64_t done = 0;
  if (from.empty()) {
    const std::u32string cps = decode(text);
    for (char32_t cp : cps) {
      if (count < 0 || done < count) {
        out.append(to);
        ++done;
      }
      append_utf8(out, cp);
    }
    if (count < 0 || done < count)
      out.append(to);
    return out;
  }
  std::size_t start = 0;
  while (count < 0 || done < count) {
    const std::size_t at = text.find(from, start);
    if (at == std::string_view::npos)
      break;
    out.append(text.substr(start, at - start)).append(to);
    start = at + from.size();
    ++done;
  }
  out.append(text.substr(start));
  return out;
}

std::int64_t find(std::string_view text, std::string_view sub, bool reverse) {
  const std::size_t at = reverse ? text.rfind(sub) : text.find(sub);
  if (at == std::string_view::npos)
    return -1;
  const std::string_view before = text.substr(0, at);
  return static_cast<std::int64_t>(all_ascii(before) ? at : length(before));
}

std::int64_t count(std::string_view text, std::string_view sub) {
  if (sub.empty())
    return static_cast<std::int64_t>(length(text)) + 1;
  std::int64_t n = 0;
  std::size_t start = 0;
  while ((start = text.find(sub, start)) != std::string_view::npos) {
    ++n;
    start += sub.size();
  }
  return n;
}

}  // namespace mstar::models::jinja::internal
