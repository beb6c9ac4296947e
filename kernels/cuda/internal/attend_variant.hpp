#pragma once

// Which walk and merge a fast paged-attention launch takes (host side of
// attention.hpp's attention_variant; attention_variant.cpp): attention.cu
// and attention_split.cu ask once per launch.

#include <cstdint>

#include "kernels/cuda/attention.hpp"

namespace mstar::kernels::cuda::detail {

/// The walk of a fast-kernel launch: the override, else
/// MSTAR_ATTN_DECODE_WALK, else the default rule. `split`: the split
/// kernel; `decode`: a decode table; `rows`: the step's rows. Never
/// automatic.
[[nodiscard]] attention_walk walk_for(bool split, bool decode, std::int64_t rows);

/// The merge of a split launch, as walk_for. Never automatic.
[[nodiscard]] attention_merge merge_for(std::int64_t rows);

}  // namespace mstar::kernels::cuda::detail
