#pragma once

// Images for a model with a vision tower, as the front ends take them
// (`mstar-run --image`, the chat endpoint's image parts): PNG or JPEG bytes
// decoded and preprocessed with the model folder's preprocessor_config.json
// into what `request_spec::images` holds.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "models/causal_lm.hpp"
#include "models/image_input.hpp"
#include "models/vision/image_processor_config.hpp"

namespace mstar::launcher {

/// Turns encoded images into a model's image inputs. Immutable: reads may
/// run on several threads at once.
class image_reader {
 public:
  /// The reader of `model` loaded from `model_dir`. Fails naming the
  /// problem: the model has no vision tower, the folder has no (or a bad)
  /// preprocessor_config.json, or its patch geometry is not the tower's.
  [[nodiscard]] static result<image_reader> load(const std::string& model_dir,
                                                 const models::causal_lm& model);

  /// Decodes a PNG or JPEG and preprocesses it; errors say why the bytes are
  /// no image this reader takes.
  [[nodiscard]] result<models::image_input> read(std::span<const std::byte> encoded) const;

  /// The model's image markers.
  [[nodiscard]] const models::vision_facts& facts() const noexcept { return facts_; }

 private:
  image_reader(models::vision::image_processor_config config, models::vision_facts facts)
      : config_(config), facts_(facts) {}
  models::vision::image_processor_config config_;
  models::vision_facts facts_;
};

/// The ids of one image's marker block: vision_start, the placeholder, vision_end.
[[nodiscard]] std::vector<resources::token_id> image_marker_ids(const models::vision_facts& facts);

}  // namespace mstar::launcher
