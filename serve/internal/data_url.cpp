#include "serve/internal/data_url.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <fmt/format.h>
#include <string>

namespace mstar::serve::internal {
namespace {

// Each character's 6-bit value, or -1.
constexpr std::array<std::int8_t, 256> base64_values = [] {
  std::array<std::int8_t, 256> v{};
  v.fill(-1);
  constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (std::size_t i = 0; i < alphabet.size(); ++i)
    v[static_cast<unsigned char>(alphabet[i])] = static_cast<std::int8_t>(i);
  return v;
}();

std::string lower(std::string_view s) {
  std::string out{s};
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

result<std::vector<std::byte>> decode_base64(std::string_view text) {
  if (text.size() % 4 != 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("base64 of {} characters, not a multiple of 4", text.size()));
  }
  std::vector<std::byte> out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t at = 0; at < text.size(); at += 4) {
    const bool last = at + 4 == text.size();
    std::uint32_t group = 0;
    int pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const auto c = static_cast<unsigned char>(text[at + k]);
      const auto v = base64_values[c];
      // '=' only at the end: the last one or two characters.
      if (c == '=' && last && k >= 2 && (k == 3 || text[at + 3] == '=')) {
        ++pad;
        group <<= 6;
        continue;
      }
      if (v < 0 || pad > 0) {
        return make_error(
            errc::invalid_argument,
            fmt::format("not base64: character {} at offset {}",
                        c >= 0x20 && c < 0x7f ? fmt::format("'{}'", static_cast<char>(c))
                                              : fmt::format("0x{:02x}", c),
                        at + k));
      }
      group = (group << 6) | static_cast<std::uint32_t>(v);
    }
    out.push_back(static_cast<std::byte>(group >> 16));
    if (pad < 2)
      out.push_back(static_cast<std::byte>((group >> 8) & 0xFF));
    if (pad < 1)
      out.push_back(static_cast<std::byte>(group & 0xFF));
  }
  return out;
}

result<std::vector<std::byte>> image_data_url(std::string_view url) {
  constexpr std::string_view data = "data:";
  if (url.size() < data.size() || lower(url.substr(0, data.size())) != data) {
    const auto colon = url.find(':');
    const auto scheme = colon == std::string_view::npos || colon > 16
                            ? std::string{"no scheme"}
                            : fmt::format("a {} URL", lower(url.substr(0, colon)));
    return make_error(
        errc::unsupported,
        fmt::format("{}: this server fetches nothing; send the image inline as a "
                    "data URL (data:image/png;base64,... or data:image/jpeg;base64,...)",
                    scheme));
  }
  const auto comma = url.find(',');
  if (comma == std::string_view::npos)
    return make_error(errc::invalid_argument, "a data URL without ',' before its data");
  const auto header = lower(url.substr(data.size(), comma - data.size()));
  constexpr std::string_view b64 = ";base64";
  if (!header.ends_with(b64)) {
    return make_error(errc::invalid_argument,
                      "the data URL is not base64 (data:image/png;base64,...)");
  }
  const auto media = std::string_view{header}.substr(0, header.size() - b64.size());
  if (media != "image/png" && media != "image/jpeg" && media != "image/jpg") {
    return make_error(errc::unsupported,
                      fmt::format("media type '{}' is not supported (image/png, image/jpeg)",
                                  media.substr(0, 64)));
  }
  return decode_base64(url.substr(comma + 1));
}

}  // namespace mstar::serve::internal
