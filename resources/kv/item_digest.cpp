#include "resources/kv/item_digest.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

namespace mstar::resources {
namespace {

// Python's quoting: single quotes unless the text holds a single quote and
// no double quote.
char quote_for(std::span<const std::uint8_t> text) {
  bool single = false;
  bool dbl = false;
  for (const auto c : text) {
    single = single || c == '\'';
    dbl = dbl || c == '"';
  }
  return single && !dbl ? '"' : '\'';
}

// Escapes as Python's repr does for ASCII; `strict` refuses what a str
// repr would keep or escape differently (non-ASCII, other controls).
result<std::string> quoted(std::span<const std::uint8_t> text, bool strict) {
  const char quote = quote_for(text);
  std::string out(1, quote);
  for (const auto c : text) {
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else if (strict) {
      return make_error(errc::invalid_argument,
                        fmt::format("text with byte 0x{:02x}: only printable ASCII, tab, "
                                    "newline and carriage return have a known repr",
                                    c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out.push_back(quote);
  return out;
}

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

result<std::string> python_repr(const preprocess_param& value) {
  if (std::holds_alternative<std::nullptr_t>(value))
    return std::string{"None"};
  if (const auto* b = std::get_if<bool>(&value))
    return std::string{*b ? "True" : "False"};
  if (const auto* i = std::get_if<std::int64_t>(&value))
    return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value))
    return python_float_text(*d);
  if (const auto* s = std::get_if<std::string>(&value))
    return quoted(bytes_of(*s), true);
  auto q = quoted(std::get<std::vector<std::uint8_t>>(value), false);
  if (!q)
    return q.error();
  return "b" + *q;
}

digest256 sha256_of(byte_view bytes) {
  digest256 out{};
  unsigned int size = 0;
  // One-shot EVP digest: cannot fail for SHA-256 on in-memory bytes.
  EVP_Digest(bytes.data(), bytes.size(), out.data(), &size, EVP_sha256(), nullptr);
  return out;
}

result<digest256> item_digest(const digest256& file_sha256, std::string_view modality,
                              std::string_view preprocess_fingerprint, std::uint64_t advance,
                              std::span<const preprocess_param> params) {
  std::vector<std::string> texts;
  texts.reserve(params.size() + 1);
  texts.push_back(std::to_string(advance));
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto r = python_repr(params[i]);
    if (!r)
      return r.error().with_context(fmt::format("params[{}]", i));
    texts.push_back(std::move(*r));
  }
  std::vector<byte_view> fields = {file_sha256, bytes_of(modality),
                                   bytes_of(preprocess_fingerprint)};
  for (const auto& t : texts)
    fields.push_back(bytes_of(t));
  return fingerprint(std::span<const byte_view>{fields});
}

}  // namespace mstar::resources
