#pragma once

// Which part of every Nemotron-H weight one tensor-parallel rank holds: pure
// functions of the config and (rank, size), so the split is tested without a
// model and every backend (CPU now, CUDA with NCCL later) slices the same way.
//
// - Mamba-2 by heads: in_proj's z, x and dt rows of the rank's heads, the B
//   and C rows of the rank's groups; the conv's channels of that x, B and C;
//   A_log, D, dt_bias by head; the gated norm's weight by channel (a norm
//   group never spans ranks); out_proj row-parallel (its input columns),
//   then an all-reduce. B/C split by groups, so n_groups must divide by the
//   size: replicating B/C instead would put each gated-norm group on several
//   ranks, and the norm would need a collective of its own.
// - Attention by KV heads, each GQA group whole: q of the rank's query
//   heads, k and v of its KV heads; o_proj row-parallel, then an all-reduce.
// - MLP: up column-parallel, down row-parallel, then an all-reduce.
// - Embedding and norms replicated; the LM head vocabulary-parallel, padded
//   to equal chunks so the logits gather with equal counts.
// - Each rank's recurrent pool block is the full geometry's blocks sharded
//   on their shard dims (resources/recurrent/config.hpp), which equals the
//   rank's own geometry; KV pool heads are the rank's KV heads.

#include <cstdint>
#include <vector>

#include "core/result.hpp"
#include "models/nemotron_h_config.hpp"
#include "models/nemotron_h_weights.hpp"
#include "resources/recurrent/config.hpp"

namespace mstar::models {

/// Rows (or columns) [begin, begin + count) of a weight's axis.
struct index_range {
  std::int64_t begin = 0;
  std::int64_t count = 0;
  friend bool operator==(const index_range&, const index_range&) = default;
};

/// One rank's part of a Nemotron-H checkpoint.
struct nemotron_h_shard_plan {
  int rank = 0;
  int size = 1;
  /// The rank's own config: head, group and MLP widths divided by `size`
  /// (vocab_size, hidden_size and the layers unchanged). What its forward
  /// and its pools are shaped by.
  nemotron_h_config local;
  // Mamba-2, as rows of the full in_proj [z | x | B | C | dt] and channels of
  // the full conv [x | B | C].
  std::vector<index_range> in_proj_rows;   ///< z, x, B, C, dt: rows of the full in_proj
  std::vector<index_range> conv_channels;  ///< x, B, C: channels of the full conv
  index_range mamba_heads;                 ///< A_log, D, dt_bias
  index_range mamba_inner;                 ///< gated norm weight, out_proj columns
  // Attention.
  index_range q_rows;   ///< q rows and o_proj columns
  index_range kv_rows;  ///< k and v rows
  // MLP.
  index_range mlp_rows;  ///< up rows, down columns
  // LM head.
  index_range vocab;             ///< rows of lm_head this rank holds
  std::int64_t vocab_chunk = 0;  ///< rows per rank with padding: ceil(vocab / size)
};

/// The plan of `rank` of `size` for `config` (validated). invalid_argument
/// naming the field when the config does not split: mamba_num_heads,
/// n_groups, num_key_value_heads (GQA groups stay whole) or
/// intermediate_size not divisible by `size` (each checked only when the
/// model has that kind of layer), or a rank outside [0, size).
[[nodiscard]] result<nemotron_h_shard_plan> plan_shard(const nemotron_h_config& config, int rank,
                                                       int size);

/// The part of full-size layer `full` that `plan`'s rank holds.
[[nodiscard]] nemotron_h_layer shard_layer(const nemotron_h_shard_plan& plan,
                                           const nemotron_h_config& config,
                                           const nemotron_h_layer& full);

/// The rank's rows of the full LM head ([vocab, hidden]).
[[nodiscard]] std::vector<float> shard_lm_head(const nemotron_h_shard_plan& plan,
                                               const nemotron_h_config& config,
                                               const std::vector<float>& full);

/// The rank's recurrent pool blocks: `blocks` (the full geometry's) sharded
/// by the plan's size on their shard dims; internal error when that is not
/// the rank's own Mamba-2 geometry (the pool and the forward would disagree).
[[nodiscard]] result<resources::recurrent_blocks> shard_blocks(const nemotron_h_shard_plan& plan,
                                                               resources::recurrent_blocks blocks);

}  // namespace mstar::models
