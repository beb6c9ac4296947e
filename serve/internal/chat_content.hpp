#pragma once

// A chat message's `content` as the chat template sees it: OpenAI's text
// and image_url parts checked, images decoded through the model's image
// reader. Errors are 400s naming the part.

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
/// "text"} and {"type": "image"} parts and each image, read by `support`
/// (null: the model takes none), is appended to `images`.
[[nodiscard]] api_result<nlohmann::ordered_json> read_content_parts(
    const nlohmann::ordered_json& content, const std::string& param, const image_support* support,
    std::vector<models::image_input>& images);

}  // namespace mstar::serve::internal
