#pragma once

// An image sent inline as a data URL (`data:image/png;base64,...`), the one
// way the chat endpoint takes images: the server fetches nothing.

#include <cstddef>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace mstar::serve::internal {

/// The bytes of a base64 data URL of a PNG or JPEG (`image/png`,
/// `image/jpeg`, `image/jpg`). Errors say what is wrong: another scheme
/// (http, https, file: nothing is fetched), another media type, no
/// `;base64`, or base64 that does not decode (with the offset of the first
/// bad character). The bytes are not checked to be an image here.
[[nodiscard]] result<std::vector<std::byte>> image_data_url(std::string_view url);

/// Standard base64 (RFC 4648, `+/`, padded to a multiple of 4); errors name
/// the offset of the first character that does not fit.
[[nodiscard]] result<std::vector<std::byte>> decode_base64(std::string_view text);

}  // namespace mstar::serve::internal
