#include "serve/internal/chat_content.hpp"

#include <fmt/format.h>

#include "serve/internal/data_url.hpp"

namespace mstar::serve::internal {

using json = nlohmann::ordered_json;

namespace {

// The bytes of one image_url part's data URL.
api_result<image_part> image_bytes(const json& part, const std::string& at) {
  const auto iu = part.find("image_url");
  const json* url = nullptr;
  if (iu != part.end() && iu->is_object() && iu->contains("url"))
    url = &(*iu)["url"];
  else if (iu != part.end() && iu->is_string())
    url = &*iu;  // a bare string, as some clients send it
  if (url == nullptr || !url->is_string()) {
    return bad_request(at + ".image_url must be an object with a string 'url'", at + ".image_url");
  }
  auto bytes = image_data_url(url->get_ref<const std::string&>());
  if (!bytes) {
    return bad_request(fmt::format("{}.image_url.url: {}", at, bytes.error().message()),
                       at + ".image_url.url", "invalid_image_url");
  }
  return image_part{at, std::move(*bytes)};
}

}  // namespace

api_result<models::image_input> read_image(const image_part& part, const image_support& support) {
  auto im = support.read(part.bytes);
  if (!im) {
    return bad_request(
        fmt::format("{}: the image cannot be read: {}", part.param, im.error().message()),
        part.param, "invalid_image");
  }
  return std::move(*im);
}

api_result<json> read_content_parts(const json& content, const std::string& param,
                                    const image_support* support, std::vector<image_part>& images) {
  json parts = json::array();
  std::string text;
  bool any_image = false;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const auto& part = content[j];
    const auto at = fmt::format("{}.content[{}]", param, j);
    const auto type = part.is_object() ? part.value("type", json{}) : json{};
    if (type == "text") {
      const auto t = part.find("text");
      if (t == part.end() || !t->is_string())
        return bad_request(at + ".text must be a string", at + ".text");
      if (!text.empty())
        text += "\n";
      text += t->get<std::string>();
      parts.push_back({{"type", "text"}, {"text", *t}});
    } else if (type == "image_url") {
      if (support == nullptr) {
        return bad_request(at + ": this server takes no images for this model (it has no vision "
                                "tower, or no image processor config)",
                           at, "unsupported_content");
      }
      if (images.size() == max_images) {
        return bad_request(fmt::format("{}: more than {} images in one request", at, max_images),
                           at);
      }
      auto im = image_bytes(part, at);
      if (!im)
        return im.error();
      images.push_back(std::move(*im));
      parts.push_back({{"type", "image"}});
      any_image = true;
    } else {
      return bad_request(at + ": a content part is an object whose 'type' is 'text' or "
                              "'image_url'",
                         at + ".type");
    }
  }
  if (any_image)
    return parts;
  return json(text);
}

}  // namespace mstar::serve::internal
