#include "models/internal/added_tokens.hpp"

#include <algorithm>

#include "models/internal/pretokenize.hpp"
#include "models/internal/regex.hpp"

namespace mstar::models::internal {
namespace {

// Start of the code point that ends at `end` (a valid one), or nullopt.
std::optional<std::size_t> previous_code_point(std::string_view text, std::size_t end) {
  for (std::size_t length = 1; length <= 4 && length <= end; ++length) {
    const std::size_t at = end - length;
    if ((static_cast<unsigned char>(text[at]) & 0xC0) == 0x80)
      continue;  // a continuation byte: look further back
    if (is_valid_utf8_at(text, at) && decode_utf8(text, at).length == length)
      return at;
    return std::nullopt;
  }
  return std::nullopt;
}

bool word_before(std::string_view text, std::size_t at) {
  const auto start = previous_code_point(text, at);
  return start && is_unicode_word(decode_utf8(text, *start).code_point);
}

bool word_after(std::string_view text, std::size_t at) {
  return at < text.size() && is_valid_utf8_at(text, at) &&
         is_unicode_word(decode_utf8(text, at).code_point);
}

// Where the white space that ends at `at` begins.
std::size_t space_start_before(std::string_view text, std::size_t at) {
  while (at > 0) {
    const auto start = previous_code_point(text, at);
    if (!start || !is_unicode_space(decode_utf8(text, *start).code_point))
      break;
    at = *start;
  }
  return at;
}

// Where the white space that starts at `at` ends.
std::size_t space_end_after(std::string_view text, std::size_t at) {
  while (at < text.size() && is_valid_utf8_at(text, at)) {
    const decoded d = decode_utf8(text, at);
    if (!is_unicode_space(d.code_point))
      break;
    at += d.length;
  }
  return at;
}

}  // namespace

added_matcher::added_matcher(std::vector<added_token_rule> tokens) {
  std::erase_if(tokens, [](const added_token_rule& t) { return t.content.empty(); });
  std::stable_sort(tokens.begin(), tokens.end(), [](const auto& a, const auto& b) {
    return a.content.size() > b.content.size();
  });
  tokens_ = std::move(tokens);
  for (const auto& token : tokens_)
    first_bytes_[static_cast<unsigned char>(token.content[0])] = true;
}

std::optional<added_matcher::found> added_matcher::find(std::string_view text,
                                                        std::size_t from) const {
  for (std::size_t at = from; at < text.size(); ++at) {
    if (!first_bytes_[static_cast<unsigned char>(text[at])])
      continue;
    for (const auto& token : tokens_) {
      if (text.substr(at).starts_with(token.content))
        return found{at, &token};
    }
  }
  return std::nullopt;
}

std::vector<added_split> added_matcher::split(std::string_view text) const {
  std::vector<added_split> out;
  std::size_t done = 0;  // end of what `out` covers
  std::size_t from = 0;  // where the next search starts: the end of the last match
  while (const auto match = find(text, from)) {
    std::size_t begin = match->begin;
    std::size_t end = begin + match->token->content.size();
    from = end;
    if (end <= done)
      continue;  // inside white space an earlier match took
    if (match->token->single_word && (word_before(text, begin) || word_after(text, end)))
      continue;
    if (match->token->lstrip)
      begin = space_start_before(text, begin);
    if (match->token->rstrip)
      end = space_end_after(text, end);
    begin = std::max(begin, done);
    if (begin > done)
      out.push_back({text.substr(done, begin - done), std::nullopt});
    out.push_back({text.substr(begin, end - begin), match->token->id});
    done = end;
  }
  if (done < text.size())
    out.push_back({text.substr(done), std::nullopt});
  return out;
}

}  // namespace mstar::models::internal
