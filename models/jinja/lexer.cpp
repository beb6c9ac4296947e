#include "models/jinja/lexer.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>

#include "models/jinja/internal/literals.hpp"
#include "models/jinja/internal/text.hpp"

namespace mstar::models::jinja {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Newlines as "\n", one trailing newline dropped (Jinja's keep_trailing_newline=False).
std::string normalise(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n')
        ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n')
    out.pop_back();
  return out;
}

int count_newlines(std::string_view text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Python's str.rstrip() (Unicode whitespace).
std::string rstrip(std::string_view text) {
  return internal::strip(text, internal::strip_side::right);
}

// Whether text is non-empty and all whitespace (Python's \s+ fullmatch).
bool all_space(std::string_view text) {
  if (text.empty())
    return false;
  const std::u32string cps = internal::decode(text);
  return std::all_of(cps.begin(), cps.end(), [](char32_t cp) { return internal::is_space(cp); });
}

class lexer {
 public:
  explicit lexer(std::string source) : src_(std::move(source)) {}

  result<std::vector<token>> run() {
    while (pos_ < src_.size()) {
      const std::size_t at = next_tag(pos_);
      if (at == std::string::npos) {
        emit_data(src_.substr(pos_), line_);
        break;
      }
      if (auto ok = tag(at); !ok)
        return ok.error();
    }
    out_.push_back(token{token_kind::eof, {}, 0, 0.0, line_});
    return std::move(out_);
  }

 private:
  [[nodiscard]] std::size_t next_tag(std::size_t from) const {
    std::size_t at = from;
    while ((at = src_.find('{', at)) != std::string::npos && at + 1 < src_.size()) {
      const char c = src_[at + 1];
      if (c == '{' || c == '%' || c == '#')
        return at;
      ++at;
    }
    return std::string::npos;
  }

  [[nodiscard]] char sign_at(std::size_t i) const {
    return i < src_.size() && (src_[i] == '-' || src_[i] == '+') ? src_[i] : '\0';
  }

  // Applies whitespace control to the text before a tag and emits it.
  void text_before(std::string_view text, char sign, bool is_variable) {
    const int line = line_;
    line_ += count_newlines(text);
    if (sign == '-') {
      emit_data(rstrip(text), line);
      return;
    }
    if (sign != '+' && !is_variable) {
      const std::size_t nl = text.rfind('\n');
      const std::size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_space(text.substr(l_pos)))
        text = text.substr(0, l_pos);
    }
    emit_data(text, line);
  }

  void emit_data(std::string_view text, int line) {
    if (!text.empty())
      out_.push_back(token{token_kind::data, std::string{text}, 0, 0.0, line});
  }

  [[nodiscard]] error fail(int line, std::string_view what) const {
    return make_error(errc::parse_error, fmt::format("line {}: {}", line, what));
  }

  // Skips Python-\s whitespace from `i`, returning the new position.
  [[nodiscard]] std::size_t skip_space(std::size_t i) const {
    while (i < src_.size()) {
      const auto c = static_cast<unsigned char>(src_[i]);
      if (c < 0x80) {
        if (!internal::is_space(c))
          break;
        ++i;
        continue;
      }
      const std::size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      const std::u32string cp = internal::decode(std::string_view{src_}.substr(i, n));
      if (cp.empty() || !internal::is_space(cp[0]))
        break;
      i += n;
    }
    return i;
  }

  // Matches `{%[-+]?\s*<word>\s*` then `-%}\s*`, `+%}` (only when allowed) or
  // `%}` (with an optional trimmed newline when `trim`); returns the end or npos.
  [[nodiscard]] std::size_t match_tag_word(std::size_t at, std::string_view word, bool allow_plus,
                                           bool trim) const {
    if (src_.compare(at, 2, "{%") != 0)
      return std::string::npos;
    std::size_t i = at + 2;
    if (sign_at(i) != '\0')
      ++i;
    i = skip_space(i);
    if (src_.compare(i, word.size(), word) != 0)
      return std::string::npos;
    i += word.size();
    if (i < src_.size() && is_name_char(src_[i]))
      return std::string::npos;
    i = skip_space(i);
    if (src_.compare(i, 3, "-%}") == 0)
      return skip_space(i + 3);
    if (allow_plus && src_.compare(i, 3, "+%}") == 0)
      return i + 3;
    if (src_.compare(i, 2, "%}") == 0)
      return i + 2 + (trim && i + 2 < src_.size() && src_[i + 2] == '\n' ? 1 : 0);
    return std::string::npos;
  }

  result<void> tag(std::size_t at) {
    const char kind = src_[at + 1];
    const char sign = sign_at(at + 2);
    if (kind == '%') {
      if (const std::size_t end = match_tag_word(at, "raw", false, false);
          end != std::string::npos) {
        return raw(at, end, sign);
      }
    }
    text_before(std::string_view{src_}.substr(pos_, at - pos_), sign, kind == '{');
    pos_ = at + 2 + (sign != '\0' ? 1 : 0);
    if (kind == '#')
      return comment();
    return inside_tag(kind == '{');
  }

  result<void> raw(std::size_t at, std::size_t begin_end, char sign) {
    text_before(std::string_view{src_}.substr(pos_, at - pos_), sign, false);
    const int raw_line = line_;
    line_ += count_newlines(std::string_view{src_}.substr(at, begin_end - at));
    line_starting_ = src_[begin_end - 1] == '\n';
    for (std::size_t i = begin_end; (i = src_.find("{%", i)) != std::string::npos; ++i) {
      const std::size_t end = match_tag_word(i, "endraw", true, true);
      if (end == std::string::npos)
        continue;
      pos_ = begin_end;
      text_before(std::string_view{src_}.substr(begin_end, i - begin_end), sign_at(i + 2), false);
      line_ += count_newlines(std::string_view{src_}.substr(i, end - i));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return {};
    }
    return fail(raw_line, "missing end of raw directive ({% endraw %})");
  }

  result<void> comment() {
    const std::size_t close = src_.find("#}", pos_);
    if (close == std::string::npos)
      return fail(line_, "missing end of comment tag ('#}')");
    std::size_t end = close + 2;
    const char before = close > pos_ ? src_[close - 1] : '\0';
    if (before == '-')
      end = skip_space(end);
    else if (before != '+' && end < src_.size() && src_[end] == '\n')
      ++end;
    line_ += count_newlines(std::string_view{src_}.substr(pos_, end - pos_));
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
    return {};
  }

  // The end of the tag at pos_, or npos.
  [[nodiscard]] std::size_t tag_end(bool variable) const {
    const std::string_view rest = std::string_view{src_}.substr(pos_);
    const char close = variable ? '}' : '%';
    const std::array<char, 2> closing{close, '}'};
    const std::string_view closer{closing.data(), 2};
    if (rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == closer)
      return skip_space(pos_ + 3);
    if (!variable && rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == closer)
      return pos_ + 3;
    if (rest.substr(0, 2) == closer) {
      const bool trim = !variable && rest.size() > 2 && rest[2] == '\n';
      return pos_ + 2 + (trim ? 1 : 0);
    }
    return std::string::npos;
  }

  result<void> inside_tag(bool variable) {
    const int begin_line = line_;
    out_.push_back(
        token{variable ? token_kind::variable_begin : token_kind::block_begin, {}, 0, 0.0, line_});
    std::vector<char> brackets;
    while (true) {
      const std::size_t after_space = skip_space(pos_);
      line_ += count_newlines(std::string_view{src_}.substr(pos_, after_space - pos_));
      pos_ = after_space;
      if (pos_ >= src_.size())
        return fail(begin_line, variable ? "missing end of expression ('}}')"
                                         : "missing end of "
                                           "tag ('%}')");
      if (brackets.empty()) {
        if (const std::size_t end = tag_end(variable); end != std::string::npos) {
          out_.push_back(token{
              variable ? token_kind::variable_end : token_kind::block_end, {}, 0, 0.0, line_});
          line_ += count_newlines(std::string_view{src_}.substr(pos_, end - pos_));
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return {};
        }
      }
      if (auto ok = one_token(brackets); !ok)
        return ok;
    }
  }

  result<void> one_token(std::vector<char>& brackets);
  result<void> number_token();
  result<void> string_token();
  result<void> operator_token(std::vector<char>& brackets);

  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<token> out_;
};

result<void> lexer::one_token(std::vector<char>& brackets) {
  const char c = src_[pos_];
  if (is_digit(c))
    return number_token();
  if (is_name_start(c)) {
    std::size_t end = pos_;
    while (end < src_.size() && is_name_char(src_[end]))
      ++end;
    out_.push_back(token{token_kind::name, src_.substr(pos_, end - pos_), 0, 0.0, line_});
    pos_ = end;
    return {};
  }
  if (c == '\'' || c == '"')
    return string_token();
  return operator_token(brackets);
}

result<void> lexer::operator_token(std::vector<char>& brackets) {
  static constexpr std::array<std::string_view, 6> two{"//", "**", "==", "!=", ">=", "<="};
  static constexpr std::string_view one = "+-/*%~[](){}><=.:|,;";
  const std::string_view rest = std::string_view{src_}.substr(pos_);
  std::string_view op;
  for (std::string_view candidate : two) {
    if (rest.substr(0, 2) == candidate)
      op = candidate;
  }
  if (op.empty() && one.find(rest[0]) != std::string_view::npos)
    op = rest.substr(0, 1);
  if (op.empty())
    return fail(line_, fmt::format("unexpected character '{}'", rest.substr(0, 1)));
  if (op == "(" || op == "[" || op == "{") {
    brackets.push_back(op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}');
  } else if (op == ")" || op == "]" || op == "}") {
    if (brackets.empty() || brackets.back() != op[0])
      return fail(line_, fmt::format("unexpected '{}'", op));
    brackets.pop_back();
  }
  out_.push_back(token{token_kind::op, std::string{op}, 0, 0.0, line_});
  pos_ += op.size();
  return {};
}

result<void> lexer::number_token() {
  const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
  auto number = internal::read_number(std::string_view{src_}.substr(pos_), after_dot);
  if (!number)
    return fail(line_, number.error().message());
  token t{number->is_float ? token_kind::floating : token_kind::integer, {}, 0, 0.0, line_};
  t.integer = number->integer;
  t.number = number->number;
  t.text = src_.substr(pos_, number->length);
  out_.push_back(std::move(t));
  pos_ += number->length;
  return {};
}

result<void> lexer::string_token() {
  auto literal = internal::read_string(std::string_view{src_}.substr(pos_));
  if (!literal)
    return fail(line_, literal.error().message());
  out_.push_back(token{token_kind::string, std::move(literal->decoded), 0, 0.0, line_});
  line_ += count_newlines(std::string_view{src_}.substr(pos_, literal->length));
  pos_ += literal->length;
  return {};
}

}  // namespace

result<std::vector<token>> tokenize(std::string_view source) {
  if (!internal::valid_utf8(source))
    return make_error(errc::parse_error, "template is not valid UTF-8");
  return lexer{normalise(source)}.run();
}

std::string describe(const token& t) {
  switch (t.kind) {
    case token_kind::eof:
      return "end of template";
    case token_kind::data:
      return "template text";
    case token_kind::variable_begin:
      return "'{{'";
    case token_kind::variable_end:
      return "'}}'";
    case token_kind::block_begin:
      return "'{%'";
    case token_kind::block_end:
      return "'%}'";
    case token_kind::string:
      return "a string";
    case token_kind::integer:
    case token_kind::floating:
      return "a number";
    case token_kind::name:
    case token_kind::op:
      return "'" + t.text + "'";
  }
  return "a token";
}

}  // namespace mstar::models::jinja
