#pragma once

// A chat message's `content` as the chat template sees it: OpenAI's text
// and image_url parts checked, each image's data URL turned into its bytes
// (decoding them as images waits for admission: `read_images`). Errors are
// 400s naming the part.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/image_input.hpp"
#include "serve/api_error.hpp"
#include "serve/openai_request.hpp"

namespace mstar::serve::internal {

/// Images one request may carry.
inline constexpr std::size_t max_images = 64;

/// A list `content` of message `param` ("messages[2]"): text parts only
/// become their texts joined by newlines (what text-only templates expect);
/// with image_url parts (data URLs only) it stays a list of {"type": "text",
/// "text"} and {"type": "image"} parts and each image part's bytes are
/// appended to `images` (`support` null: the model takes none, a 400).
[[nodiscard]] api_result<nlohmann::ordered_json> read_content_parts(
    const nlohmann::ordered_json& content, const std::string& param, const image_support* support,
    std::vector<image_part>& images);

/// The image of one kept part, decoded by `support`; a 400 naming the part
/// when the bytes are no image it takes.
[[nodiscard]] api_result<models::image_input> read_image(const image_part& part,
                                                         const image_support& support);

}  // namespace mstar::serve::internal
