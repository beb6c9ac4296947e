#include "models/vision/image_decode.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <fmt/format.h>

#include "models/vision/internal/decoders.hpp"

namespace mstar::models::vision {
namespace {

bool starts_with(std::span<const std::byte> bytes, std::size_t offset, std::string_view magic) {
  return bytes.size() >= offset + magic.size() &&
         std::memcmp(bytes.data() + offset, magic.data(), magic.size()) == 0;
}

// Formats people send that this decoder does not read, named in the refusal.
std::string_view other_format(std::span<const std::byte> bytes) {
  if (starts_with(bytes, 0, "GIF87a") || starts_with(bytes, 0, "GIF89a"))
    return "GIF";
  if (starts_with(bytes, 0, "RIFF") && starts_with(bytes, 8, "WEBP"))
    return "WebP";
  if (starts_with(bytes, 0, "BM"))
    return "BMP";
  if (starts_with(bytes, 0, std::string_view{"II*\0", 4}) ||
      starts_with(bytes, 0, std::string_view{"MM\0*", 4})) {
    return "TIFF";
  }
  if (starts_with(bytes, 4, "ftyp"))
    return "HEIF/AVIF";
  return {};
}

std::string first_bytes(std::span<const std::byte> bytes) {
  std::string out;
  const std::size_t n = std::min<std::size_t>(bytes.size(), 8);
  for (std::size_t i = 0; i < n; ++i)
    out += fmt::format("{}{:02x}", i == 0 ? "" : " ", static_cast<unsigned>(bytes[i]));
  return out;
}

}  // namespace

std::string_view to_string(image_format format) noexcept {
  switch (format) {
    case image_format::png:
      return "png";
    case image_format::jpeg:
      return "jpeg";
  }
  return "?";
}

std::optional<image_format> detect_image_format(std::span<const std::byte> bytes) noexcept {
  if (starts_with(bytes, 0, "\x89PNG\r\n\x1a\n"))
    return image_format::png;
  if (starts_with(bytes, 0, "\xff\xd8\xff"))
    return image_format::jpeg;
  return std::nullopt;
}

result<rgb_image> decode_image(std::span<const std::byte> bytes, const decode_options& options) {
  if (options.max_pixels <= 0) {
    return make_error(
        errc::invalid_argument,
        fmt::format("image: max_pixels must be positive, got {}", options.max_pixels));
  }
  if (bytes.empty())
    return make_error(errc::invalid_argument, "image: no data (0 bytes)");
  const auto format = detect_image_format(bytes);
  if (!format) {
    const std::string_view other = other_format(bytes);
    if (!other.empty()) {
      return make_error(errc::unsupported,
                        fmt::format("image: {} is not supported (only PNG and JPEG)", other));
    }
    return make_error(errc::unsupported,
                      fmt::format("image: unknown format (the {} bytes start {}): only PNG and "
                                  "JPEG are supported",
                                  bytes.size(), first_bytes(bytes)));
  }
  switch (*format) {
    case image_format::png:
      return internal::decode_png(bytes, options);
    case image_format::jpeg:
      return internal::decode_jpeg(bytes, options);
  }
  return make_error(errc::internal, "image: unhandled format");
}

}  // namespace mstar::models::vision
