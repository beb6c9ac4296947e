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

/// Whether the tensor-core decode kernel (attention_walk::mma,
/// attention_decode_mma.cu) takes `p`: decode arrays present, a bf16 arena,
/// head_dim 64, 128 or 256, whole GQA groups, the arena 16-byte and q
/// 8-byte aligned. Host sizes and pointers only.
[[nodiscard]] bool decode_mma_takes(const paged_attention_params& p);

/// The prefill kernel the override, else MSTAR_ATTN_PREFILL, else the
/// default (`mma`) names; never automatic. Whether that kernel takes the
/// step is the caller's question (`prefill_wgmma_takes`).
[[nodiscard]] attention_prefill prefill_for();

/// Whether the warpgroup-MMA prefill kernel (attention_prefill_wgmma.cu,
/// sm_90a) can take step `p`: `prefill_takes`, head_dim 64 or 128, and the
/// current device of compute capability 9.0 (asked once per device).
[[nodiscard]] bool prefill_wgmma_takes(const paged_attention_params& p);

/// walk_for, with `mma` turned into `registers` where that kernel does not
/// take `p`: the walk a launch of `p` runs.
[[nodiscard]] attention_walk walk_of(const paged_attention_params& p, bool split);

}  // namespace mstar::kernels::cuda::detail
