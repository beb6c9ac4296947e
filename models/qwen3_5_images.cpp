// qwen3_5_model's images: checking placeholder runs against grids, the
// prompt's M-RoPE positions (Qwen2-VL's get_rope_index as transformers 5.24's
// Qwen3.5 computes it), and the vision tower's embeddings in place of the
// placeholder tokens.
#include <algorithm>
#include <fmt/format.h>

#include "models/qwen3_5.hpp"

namespace mstar::models {
namespace {

// Runs of image placeholder tokens in `prompt`: [start, end) each.
std::vector<std::pair<std::int64_t, std::int64_t>> image_runs(
    std::span<const resources::token_id> prompt, std::int64_t image_token) {
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;
  const auto n = static_cast<std::int64_t>(prompt.size());
  for (std::int64_t i = 0; i < n;) {
    if (static_cast<std::int64_t>(prompt[static_cast<std::size_t>(i)]) != image_token) {
      ++i;
      continue;
    }
    std::int64_t j = i;
    while (j < n && static_cast<std::int64_t>(prompt[static_cast<std::size_t>(j)]) == image_token)
      ++j;
    runs.emplace_back(i, j);
    i = j;
  }
  return runs;
}

// How far an image moves the position counter: its tokens take (start +
// frame, start + row, start + column) and the next token start + max(rows,
// columns) of the merged grid.
std::int64_t image_advance(const image_input& im, std::int64_t merge) {
  return std::max(im.h / merge, im.w / merge);
}

}  // namespace

std::vector<image_span> qwen3_5_model::image_spans(std::span<const resources::token_id> prompt,
                                                   std::span<const image_input> images) const {
  std::vector<image_span> out;
  if (!vision_ || images.empty())
    return out;
  const auto runs = image_runs(prompt, config_.image_token_id);
  const auto merge = vision_->config().spatial_merge_size;
  for (std::size_t i = 0; i < runs.size() && i < images.size(); ++i) {
    out.push_back({runs[i].first, runs[i].second - runs[i].first, image_advance(images[i], merge)});
  }
  return out;
}

std::string qwen3_5_model::preprocess_fingerprint() const {
  if (!vision_)
    return {};
  // What maps patches to placeholder slots and positions; the weights are in
  // the pools' root already.
  const auto& vc = vision_->config();
  return fmt::format("qwen3_5-vision/1 patch {} temporal {} merge {} channels {}", vc.patch_size,
                     vc.temporal_patch_size, vc.spatial_merge_size, vc.in_channels);
}

std::optional<vision_facts> qwen3_5_model::vision() const noexcept {
  if (!vision_)
    return std::nullopt;
  const auto& vc = vision_->config();
  return vision_facts{static_cast<resources::token_id>(config_.image_token_id),
                      static_cast<resources::token_id>(config_.vision_start_token_id),
                      static_cast<resources::token_id>(config_.vision_end_token_id),
                      vc.patch_size,
                      vc.temporal_patch_size,
                      vc.spatial_merge_size};
}

result<void> qwen3_5_model::place_images(std::vector<resources::token_id>& prompt,
                                         std::span<const image_input> images) const {
  if (!vision_ && images.empty())
    return {};  // a text-only checkpoint: the placeholder id is a token like any other
  if (!vision_) {
    return make_error(errc::unsupported,
                      "this Qwen3.5 checkpoint has no vision tower (text only); it takes no "
                      "images");
  }
  const auto runs = image_runs(prompt, config_.image_token_id);
  if (images.empty() && runs.empty())
    return {};
  if (runs.size() != images.size()) {
    return make_error(errc::invalid_argument,
                      fmt::format("the prompt has {} image placeholder run(s) (token {}), the "
                                  "request {} image(s)",
                                  runs.size(), config_.image_token_id, images.size()));
  }
  const auto& vc = vision_->config();
  const auto merge = vc.spatial_merge_size;
  std::vector<std::int64_t> need(images.size());
  for (std::size_t i = 0; i < images.size(); ++i) {
    const auto& im = images[i];
    if (im.t <= 0 || im.h <= 0 || im.w <= 0 || im.h % merge != 0 || im.w % merge != 0 ||
        im.h > 4096 || im.w > 4096 || im.t > 64) {
      return make_error(errc::invalid_argument,
                        fmt::format("image {}: grid ({}, {}, {}) is not a positive grid whose rows "
                                    "and columns are multiples of the merge size {}",
                                    i, im.t, im.h, im.w, merge));
    }
    const auto patches = im.t * im.h * im.w;
    if (static_cast<std::int64_t>(im.pixel_values.size()) != patches * vc.patch_dim()) {
      return make_error(errc::invalid_argument,
                        fmt::format("image {}: {} pixel values, its grid needs {} patches of {}", i,
                                    im.pixel_values.size(), patches, vc.patch_dim()));
    }
    need[i] = patches / (merge * merge);
    const auto got = runs[i].second - runs[i].first;
    if (got != need[i] && got != 1) {
      return make_error(errc::invalid_argument,
                        fmt::format("image {}: {} placeholder tokens in the prompt, its grid "
                                    "({}, {}, {}) makes {} (give one placeholder or all {})",
                                    i, got, im.t, im.h, im.w, need[i], need[i]));
    }
  }
  // Expand single placeholders from the back, so earlier runs keep their place.
  for (std::size_t i = images.size(); i-- > 0;) {
    const auto got = runs[i].second - runs[i].first;
    if (got == 1 && need[i] > 1) {
      prompt.insert(prompt.begin() + runs[i].first, static_cast<std::size_t>(need[i] - 1),
                    static_cast<resources::token_id>(config_.image_token_id));
    }
  }
  return {};
}

void qwen3_5_model::begin_sequence(const resources::request_id& rid,
                                   std::span<const resources::token_id> prompt,
                                   std::span<const image_input> images) {
  if (images.empty())
    return;
  const auto runs = image_runs(prompt, config_.image_token_id);
  const auto n = static_cast<std::int64_t>(prompt.size());
  const auto merge = vision_->config().spatial_merge_size;
  image_sequence seq;
  seq.prompt_length = n;
  seq.positions.assign(static_cast<std::size_t>(3 * n), 0);
  seq.image_row.assign(static_cast<std::size_t>(n), -1);
  auto put = [&](std::int64_t slot, std::int64_t t, std::int64_t h, std::int64_t w) {
    seq.positions[static_cast<std::size_t>(slot)] = static_cast<std::int32_t>(t);
    seq.positions[static_cast<std::size_t>(n + slot)] = static_cast<std::int32_t>(h);
    seq.positions[static_cast<std::size_t>(2 * n + slot)] = static_cast<std::int32_t>(w);
  };
  // Text runs count on from the current position; an image's tokens take
  // (start + frame, start + row, start + column) over its merged grid, and the
  // position after it is start + max(rows, columns).
  std::int64_t pos = 0, slot = 0, row = 0, top = -1;
  for (std::size_t i = 0; i <= runs.size(); ++i) {
    const std::int64_t text_end = i < runs.size() ? runs[i].first : n;
    for (; slot < text_end; ++slot, ++pos)
      put(slot, pos, pos, pos);
    top = std::max(top, pos - 1);
    if (i == runs.size())
      break;
    const auto& im = images[i];
    const std::int64_t gh = im.h / merge, gw = im.w / merge;
    for (std::int64_t t = 0; t < im.t; ++t) {
      for (std::int64_t r = 0; r < gh; ++r) {
        for (std::int64_t c = 0; c < gw; ++c, ++slot) {
          put(slot, pos + t, pos + r, pos + c);
          seq.image_row[static_cast<std::size_t>(slot)] = static_cast<std::int32_t>(row++);
          top = std::max({top, pos + t, pos + r, pos + c});
        }
      }
    }
    pos += image_advance(im, merge);
  }
  seq.delta = top + 1 - n;
  seq.images.assign(images.begin(), images.end());
  std::int64_t first = 0;
  for (const auto& im : images) {
    seq.first_row.push_back(first);
    first += im.t * (im.h / merge) * (im.w / merge);
  }
  seq.first_row.push_back(first);
  seq.encoded.assign(images.size(), false);
  seq.embeds.assign(static_cast<std::size_t>(first * config_.hidden_size), 0.0F);
  image_sequences_[rid] = std::move(seq);
}

void qwen3_5_model::end_sequence(const resources::request_id& rid) {
  image_sequences_.erase(rid);
}

result<const float*> qwen3_5_model::embeds_of(image_sequence& seq, std::int64_t row) {
  // The image holding `row`: each is encoded alone the first time a step
  // feeds one of its tokens, so an image served wholly from cached pages is
  // never encoded, and one cut by the cache is encoded whole for its rows.
  const auto next = std::upper_bound(seq.first_row.begin(), seq.first_row.end(), row);
  const auto i = static_cast<std::size_t>(next - seq.first_row.begin() - 1);
  const std::int64_t hidden = config_.hidden_size;
  if (!seq.encoded[i]) {
    auto& im = seq.images[i];
    const vision_grid grid[] = {{im.t, im.h, im.w}};
    std::vector<float> out;
    const auto ok = vision_cuda_ ? vision_cuda_->encode(im.pixel_values, grid, out)
                                 : vision_->encode(im.pixel_values, grid, out);
    if (!ok)
      return ok.error();
    std::copy(out.begin(), out.end(), seq.embeds.begin() + seq.first_row[i] * hidden);
    ++images_encoded_;
    seq.encoded[i] = true;
    im.pixel_values.clear();
    im.pixel_values.shrink_to_fit();
  }
  return seq.embeds.data() + row * hidden;
}

result<void> qwen3_5_model::fill_positions(std::span<const step_row> rows,
                                           const resources::kv_label_plan& plan) {
  const auto T = static_cast<std::int64_t>(ids_.size());
  positions_.assign(static_cast<std::size_t>(3 * T), 0);
  embed_rows_.assign(static_cast<std::size_t>(T), nullptr);
  if (plan.qo_indptr.size() != rows.size() + 1 || plan.qo_indptr.back() != T) {
    return make_error(errc::invalid_argument,
                      fmt::format("qwen3_5: the KV plan addresses {} tokens, the step feeds {}",
                                  plan.qo_indptr.empty() ? 0 : plan.qo_indptr.back(), T));
  }
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::int64_t pages = plan.kv_indptr[r + 1] - plan.kv_indptr[r];
    const std::int64_t length = pages == 0 ? 0 : (pages - 1) * page_size_ + plan.last_page_len[r];
    const std::int64_t fresh = plan.qo_indptr[r + 1] - plan.qo_indptr[r];
    const auto it = image_sequences_.find(rows[r].rid);
    image_sequence* seq = it == image_sequences_.end() ? nullptr : &it->second;
    for (std::int64_t j = 0; j < fresh; ++j) {
      const std::int64_t slot = length - fresh + j;
      const auto at = static_cast<std::size_t>(plan.qo_indptr[r] + j);
      std::int64_t p[3] = {slot, slot, slot};
      if (seq != nullptr && slot < seq->prompt_length) {
        for (std::int64_t c = 0; c < 3; ++c)
          p[c] = seq->positions[static_cast<std::size_t>(c * seq->prompt_length + slot)];
        if (const auto e = seq->image_row[static_cast<std::size_t>(slot)]; e >= 0) {
          auto embed = embeds_of(*seq, e);
          if (!embed)
            return embed.error();
          embed_rows_[at] = *embed;
        }
      } else if (seq != nullptr) {
        p[0] = p[1] = p[2] = slot + seq->delta;
      }
      for (std::int64_t c = 0; c < 3; ++c)
        positions_[static_cast<std::size_t>(c * T) + at] = static_cast<std::int32_t>(p[c]);
    }
  }
  return {};
}

}  // namespace mstar::models
