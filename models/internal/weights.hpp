#pragma once

// Reading a checkpoint's tensors into float32 with their shapes checked, and
// the weights' identity for prefix-cache roots: what every model family's
// loader does.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "models/safetensors.hpp"

namespace mstar::models::internal {

/// Tensor `name` of `ckpt` as float32, after checking its shape is `shape`
/// (the error names the folder, the tensor and both shapes).
[[nodiscard]] result<std::vector<float>> read_tensor(const safetensors_checkpoint& ckpt,
                                                     const std::string& name,
                                                     std::vector<std::int64_t> shape);

/// The model's identity for prefix-cache roots: the family, config.json's
/// bytes and every weight file's name and size, so two checkpoints differing
/// in weights never share keys.
[[nodiscard]] std::string weights_fingerprint(std::string_view family,
                                              const std::filesystem::path& folder,
                                              const safetensors_checkpoint& ckpt);

}  // namespace mstar::models::internal
