// The tensor-parallel split of a Nemotron-H checkpoint (see the header).
#include "models/nemotron_h_shard.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "resources/recurrent/geometry.hpp"

namespace mstar::models {
namespace {

/// Part `rank` of `size` equal parts of [0, n).
index_range part(std::int64_t n, int rank, int size) {
  const auto each = n / size;
  return {each * rank, each};
}

index_range shifted(index_range r, std::int64_t by) {
  return {r.begin + by, r.count};
}

result<void> divides(std::string_view field, std::int64_t value, int size, std::string_view why) {
  if (value % size == 0)
    return {};
  return make_error(errc::invalid_argument,
                    fmt::format("config.json: field '{}': {} does not split across tensor_parallel "
                                "{} ({})",
                                field, value, size, why));
}

/// The rows `ranges` of a row-major [*, cols] matrix, one after another.
std::vector<float> take_rows(const std::vector<float>& w, std::int64_t cols,
                             const std::vector<index_range>& ranges) {
  std::vector<float> out;
  for (const auto& r : ranges) {
    const auto first = w.begin() + r.begin * cols;
    out.insert(out.end(), first, first + r.count * cols);
  }
  return out;
}

std::vector<float> take_rows(const std::vector<float>& w, std::int64_t cols, index_range r) {
  return take_rows(w, cols, std::vector<index_range>{r});
}

/// The columns `r` of a row-major [rows, cols] matrix.
std::vector<float> take_cols(const std::vector<float>& w, std::int64_t cols, index_range r) {
  const auto rows = static_cast<std::int64_t>(w.size()) / cols;
  std::vector<float> out(static_cast<std::size_t>(rows * r.count));
  for (std::int64_t i = 0; i < rows; ++i) {
    std::copy_n(w.begin() + i * cols + r.begin, r.count, out.begin() + i * r.count);
  }
  return out;
}

}  // namespace

result<nemotron_h_shard_plan> plan_shard(const nemotron_h_config& config, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) {
    return make_error(errc::invalid_argument,
                      fmt::format("tensor parallel: rank {} is not one of {} ranks", rank, size));
  }
  const auto& c = config;
  if (c.count(layer_kind::mamba2) > 0) {
    if (auto ok =
            divides("mamba_num_heads", c.mamba_num_heads, size, "Mamba-2 layers split by heads");
        !ok)
      return ok.error();
    if (auto ok = divides("n_groups", c.n_groups, size,
                          "B/C split with their heads, and a gated-norm group may not span ranks");
        !ok)
      return ok.error();
  }
  if (c.count(layer_kind::attention) > 0) {
    if (auto ok = divides("num_key_value_heads", c.num_key_value_heads, size,
                          "attention splits by KV heads and keeps each GQA group whole");
        !ok)
      return ok.error();
  }
  if (c.count(layer_kind::mlp) > 0) {
    if (auto ok = divides("intermediate_size", c.intermediate_size, size,
                          "the MLP splits its hidden width");
        !ok)
      return ok.error();
  }
  nemotron_h_shard_plan p;
  p.rank = rank;
  p.size = size;
  p.local = c;
  p.local.mamba_num_heads = c.mamba_num_heads / size;
  p.local.n_groups = c.n_groups / size;
  p.local.num_attention_heads = c.num_attention_heads / size;
  p.local.num_key_value_heads = c.num_key_value_heads / size;
  p.local.intermediate_size = c.intermediate_size / size;

  const std::int64_t di = c.d_inner(), gn = c.n_groups * c.ssm_state_size;
  p.mamba_heads = part(c.mamba_num_heads, rank, size);
  p.mamba_inner = part(di, rank, size);
  const auto groups = part(gn, rank, size);  // whole groups: n_groups divides
  // in_proj rows: z [0, di), x [di, 2di), B [2di, 2di+gn), C [.., +gn), dt [.., +H).
  p.in_proj_rows = {p.mamba_inner, shifted(p.mamba_inner, di), shifted(groups, 2 * di),
                    shifted(groups, 2 * di + gn), shifted(p.mamba_heads, 2 * di + 2 * gn)};
  // conv channels: x [0, di), B [di, di+gn), C [di+gn, di+2gn).
  p.conv_channels = {p.mamba_inner, shifted(groups, di), shifted(groups, di + gn)};
  p.q_rows = part(c.num_attention_heads * c.head_dim, rank, size);
  p.kv_rows = part(c.num_key_value_heads * c.head_dim, rank, size);
  p.mlp_rows = part(c.intermediate_size, rank, size);
  p.vocab_chunk = (c.vocab_size + size - 1) / size;
  const auto vb = std::min<std::int64_t>(p.vocab_chunk * rank, c.vocab_size);
  p.vocab = {vb, std::min(p.vocab_chunk, c.vocab_size - vb)};
  if (auto ok = p.local.validate(); !ok)
    return ok.error().with_context(fmt::format("tensor parallel rank {} of {}", rank, size));
  return p;
}

nemotron_h_layer shard_layer(const nemotron_h_shard_plan& plan, const nemotron_h_config& config,
                             const nemotron_h_layer& full) {
  const auto& c = config;
  const std::int64_t hid = c.hidden_size;
  nemotron_h_layer l;
  l.kind = full.kind;
  l.sub_index = full.sub_index;
  l.norm = full.norm;
  switch (full.kind) {
    case layer_kind::mamba2:
      l.in_proj = take_rows(full.in_proj, hid, plan.in_proj_rows);
      l.conv_w = take_rows(full.conv_w, c.conv_kernel, plan.conv_channels);
      if (!full.conv_b.empty())
        l.conv_b = take_rows(full.conv_b, 1, plan.conv_channels);
      l.dt_bias = take_rows(full.dt_bias, 1, plan.mamba_heads);
      l.a_log = take_rows(full.a_log, 1, plan.mamba_heads);
      l.d = take_rows(full.d, 1, plan.mamba_heads);
      l.gnorm = take_rows(full.gnorm, 1, plan.mamba_inner);
      l.out_proj = take_cols(full.out_proj, c.d_inner(), plan.mamba_inner);
      break;
    case layer_kind::attention: {
      l.q = take_rows(full.q, hid, plan.q_rows);
      l.k = take_rows(full.k, hid, plan.kv_rows);
      l.v = take_rows(full.v, hid, plan.kv_rows);
      l.o = take_cols(full.o, c.num_attention_heads * c.head_dim, plan.q_rows);
      break;
    }
    case layer_kind::mlp:
      l.up = take_rows(full.up, hid, plan.mlp_rows);
      l.down = take_cols(full.down, c.intermediate_size, plan.mlp_rows);
      break;
    case layer_kind::moe:
      break;  // refused by validate
  }
  return l;
}

std::vector<float> shard_lm_head(const nemotron_h_shard_plan& plan, const nemotron_h_config& config,
                                 const std::vector<float>& full) {
  return take_rows(full, config.hidden_size, plan.vocab);
}

result<resources::recurrent_blocks> shard_blocks(const nemotron_h_shard_plan& plan,
                                                 resources::recurrent_blocks blocks) {
  for (auto& kv : blocks) {
    if (auto ok = kv.second.shard(plan.size); !ok)
      return ok.error().with_context(fmt::format("recurrent block '{}'", kv.first));
  }
  auto geometry = resources::mamba2_geometry::from_blocks(blocks);
  if (!geometry)
    return geometry.error();
  if (!(*geometry == plan.local.to_mamba2_geometry())) {
    return make_error(errc::internal,
                      fmt::format("tensor parallel rank {}: the sharded recurrent blocks are not "
                                  "the rank's Mamba-2 geometry",
                                  plan.rank));
  }
  return blocks;
}

}  // namespace mstar::models
