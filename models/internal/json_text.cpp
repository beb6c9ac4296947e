#include "models/internal/json_text.hpp"

#include <array>

#include "core/input_file.hpp"
#include "core/untrusted_json.hpp"

namespace mstar::models::internal {

result<std::string> read_text_file(const std::filesystem::path& path) {
  return read_input_file(path);
}

std::string quote_non_finite_tokens(std::string_view text) {
  static constexpr std::array<std::string_view, 3> tokens{"-Infinity", "Infinity", "NaN"};
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"')
      in_string = true;
    bool replaced = false;
    for (const std::string_view token : tokens) {
      if (text.substr(i).starts_with(token)) {
        out.append("\"").append(token).append("\"");
        i += token.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced)
      out.push_back(c);
  }
  return out;
}

result<nlohmann::json> parse_json(std::string_view text, std::string_view label) {
  return parse_untrusted_json<nlohmann::json>(quote_non_finite_tokens(text), label);
}

result<nlohmann::json> load_json_file(const std::filesystem::path& path) {
  auto text = read_text_file(path);
  if (!text)
    return text.error();
  return parse_json(*text, path.string());
}

}  // namespace mstar::models::internal
