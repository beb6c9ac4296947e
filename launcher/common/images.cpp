#include "launcher/common/images.hpp"

#include <filesystem>
#include <fmt/format.h>

#include "models/vision/image_processor.hpp"

namespace mstar::launcher {

result<image_reader> image_reader::load(const std::string& model_dir,
                                        const models::causal_lm& model) {
  const auto facts = model.vision();
  if (!facts) {
    return make_error(
        errc::unsupported,
        fmt::format("the model in {} has no vision tower; it takes no images", model_dir));
  }
  const auto path = std::filesystem::path{model_dir} / "preprocessor_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return make_error(errc::not_found,
                      fmt::format("{}: not found; a model's images need its image processor's "
                                  "config",
                                  path.string()));
  }
  auto config = models::vision::image_processor_config::load(path);
  if (!config)
    return config.error();
  const auto mismatch = [&](const char* field, std::int64_t got, std::int64_t want) {
    return make_error(errc::invalid_argument,
                      fmt::format("{}: field '{}': {} but the model's vision tower takes {}",
                                  path.string(), field, got, want));
  };
  if (config->patch_size != facts->patch_size)
    return mismatch("patch_size", config->patch_size, facts->patch_size);
  if (config->temporal_patch_size != facts->temporal_patch_size)
    return mismatch("temporal_patch_size", config->temporal_patch_size, facts->temporal_patch_size);
  if (config->merge_size != facts->merge_size)
    return mismatch("merge_size", config->merge_size, facts->merge_size);
  return image_reader{*config, *facts};
}

result<models::image_input> image_reader::read(std::span<const std::byte> encoded) const {
  auto patches = models::vision::preprocess_image(encoded, config_);
  if (!patches)
    return patches.error();
  models::image_input im;
  im.pixel_values = std::move(patches->pixel_values);
  im.t = patches->grid_thw[0];
  im.h = patches->grid_thw[1];
  im.w = patches->grid_thw[2];
  return im;
}

std::vector<resources::token_id> image_marker_ids(const models::vision_facts& facts) {
  return {facts.vision_start, facts.image_token, facts.vision_end};
}

}  // namespace mstar::launcher
