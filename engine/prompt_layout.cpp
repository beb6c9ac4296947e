#include "engine/prompt_layout.hpp"

#include <bit>
#include <fmt/format.h>

#include "resources/kv/item_digest.hpp"

namespace mstar::engine {

static_assert(std::endian::native == std::endian::little,
              "image digests hash float32 patches as little-endian bytes");

resources::digest256 image_content_digest(const models::image_input& image) {
  const resources::byte_view pixels{
      reinterpret_cast<const std::uint8_t*>(image.pixel_values.data()),
      image.pixel_values.size() * sizeof(float)};
  return resources::fingerprint(std::string_view{"mstar-image-patches/1"}, image.t, image.h,
                                image.w, pixels);
}

result<resources::digest256> image_digest(const models::image_input& image,
                                          const models::image_span& span,
                                          std::string_view preprocess) {
  return resources::item_digest(image_content_digest(image), "image", preprocess,
                                static_cast<std::uint64_t>(span.advance), {});
}

namespace {

void add_ids(prompt_layout& out, std::span<const token_id> ids) {
  if (ids.empty())
    return;
  out.spans.emplace_back(resources::id_span{{ids.begin(), ids.end()}});
  out.advances.push_back(ids.size());
}

}  // namespace

result<prompt_layout> layout_prompt(std::span<const token_id> tokens,
                                    std::span<const models::image_span> spans,
                                    std::span<const models::image_input> images,
                                    std::string_view preprocess) {
  if (spans.size() != images.size()) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} image span(s) for {} image(s)", spans.size(), images.size()));
  }
  prompt_layout out;
  const auto n = static_cast<std::int64_t>(tokens.size());
  std::int64_t at = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const auto& s = spans[i];
    if (s.length <= 0 || s.start < at || s.start + s.length > n) {
      return make_error(errc::invalid_argument,
                        fmt::format("image {}: span [{}, {}) is empty, overlaps the one before or "
                                    "runs past the {} tokens",
                                    i, s.start, s.start + s.length, n));
    }
    add_ids(out,
            tokens.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(s.start - at)));
    auto digest = image_digest(images[i], s, preprocess);
    if (!digest)
      return digest.error().with_context(fmt::format("image {}", i));
    out.spans.emplace_back(resources::item_span{static_cast<std::uint64_t>(s.length),
                                                {digest->begin(), digest->end()}});
    out.advances.push_back(static_cast<std::uint64_t>(s.advance));
    at = s.start + s.length;
  }
  add_ids(out, tokens.subspan(static_cast<std::size_t>(at)));
  return out;
}

std::vector<std::int64_t> item_ends(std::span<const resources::prompt_span> spans,
                                    std::int64_t page_size) {
  std::vector<std::int64_t> out;
  if (page_size < 1)
    return out;
  std::int64_t at = 0;
  for (const auto& span : spans) {
    const auto* item = std::get_if<resources::item_span>(&span);
    at += item != nullptr
              ? static_cast<std::int64_t>(item->length)
              : static_cast<std::int64_t>(std::get<resources::id_span>(span).ids.size());
    if (item != nullptr && at % page_size != 0)
      out.push_back(at);
  }
  return out;
}

result<prompt_layout> layout_prompt(const models::causal_lm& model,
                                    std::span<const token_id> tokens,
                                    std::span<const token_id> prompt,
                                    std::span<const models::image_input> images) {
  if (images.empty())
    return layout_prompt(tokens, {}, {}, {});
  const auto spans = model.image_spans(prompt, images);
  return layout_prompt(tokens, spans, images, model.preprocess_fingerprint());
}

}  // namespace mstar::engine
