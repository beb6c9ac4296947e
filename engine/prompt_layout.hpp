#pragma once

// A prompt's layout as page keys see it (reference kv-keys-windowing §1.8):
// runs of token ids, and one item per image naming the image by its digest,
// so a page key covers the image on every page it touches. The same image in
// the same place keys the same pages; a different image keys different pages
// from the first page it touches on; the text before an image keys the pages
// wholly before it as a text-only prompt does.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "engine/request.hpp"
#include "models/causal_lm.hpp"
#include "resources/kv/layout.hpp"

namespace mstar::engine {

/// A prompt's spans in slot order and how far each moves the position
/// counter (ids: their count; an image: the model's `image_span::advance`).
struct prompt_layout {
  std::vector<resources::prompt_span> spans;
  std::vector<std::uint64_t> advances;
};

/// What names an image's content here: the engine receives the image
/// processor's output, not the file, so the content is its grid and patches,
/// `fingerprint("mstar-image-patches/1", t, h, w, pixel_values as float32
/// little-endian bytes)` (the reference hashes the file's bytes instead).
[[nodiscard]] resources::digest256 image_content_digest(const models::image_input& image);

/// The digest of an image occupying `span` in a prompt of a model whose
/// `preprocess_fingerprint` is `preprocess`: `item_digest(content, "image",
/// preprocess, span.advance)` (reference §1.8, no processor parameters: the
/// grid is in the content).
[[nodiscard]] result<resources::digest256> image_digest(const models::image_input& image,
                                                        const models::image_span& span,
                                                        std::string_view preprocess);

/// The layout of `tokens` (a prompt, possibly followed by generated ids)
/// whose images sit at `spans` (the model's `image_spans`, in order, one per
/// image): ids between and after the images, one item per image.
/// invalid_argument when the spans and images disagree in number, or a span
/// is empty, overlaps the previous one or runs past `tokens`.
[[nodiscard]] result<prompt_layout> layout_prompt(std::span<const token_id> tokens,
                                                  std::span<const models::image_span> spans,
                                                  std::span<const models::image_input> images,
                                                  std::string_view preprocess);

/// Where the items of `spans` end strictly inside a page of `page_size`
/// slots (none when `page_size` < 1): the slots an end key names
/// (reference §1.7), where a prefill chunk ends so a hybrid model's state
/// there is checkpointed.
[[nodiscard]] std::vector<std::int64_t> item_ends(std::span<const resources::prompt_span> spans,
                                                  std::int64_t page_size);

/// The layout a model gives `tokens` whose prompt is `prompt` with `images`
/// (`place_images` fitted them): one ids span without images.
[[nodiscard]] result<prompt_layout> layout_prompt(const models::causal_lm& model,
                                                  std::span<const token_id> tokens,
                                                  std::span<const token_id> prompt,
                                                  std::span<const models::image_input> images);

}  // namespace mstar::engine
