// qwen3_5_vision_weights: the vision tower's tensors of a Qwen3.5 checkpoint,
// shape-checked against the config and widened to float32.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>

#include "models/qwen3_5_vision.hpp"

namespace mstar::models {
namespace {

// Reads the tensors of one checkpoint under one prefix, keeping the first error.
class tensor_reader {
 public:
  tensor_reader(const safetensors_checkpoint& checkpoint, std::string_view prefix)
      : checkpoint_(checkpoint), prefix_(prefix) {}

  void read(std::string_view name, std::vector<std::int64_t> shape, std::vector<float>& out) {
    if (error_)
      return;
    const std::string full = prefix_ + std::string{name};
    auto t = checkpoint_.get(full);
    if (!t) {
      error_ = t.error();
      return;
    }
    if ((*t)->shape != shape) {
      error_ = make_error(errc::invalid_argument,
                          fmt::format("{}: tensor '{}' has shape [{}], config.json implies [{}]",
                                      checkpoint_.folder().string(), full,
                                      fmt::join((*t)->shape, ", "), fmt::join(shape, ", ")));
      return;
    }
    auto values = to_float32(**t);
    if (!values) {
      error_ = values.error();
      return;
    }
    out = std::move(*values);
  }

  [[nodiscard]] result<void> outcome() const {
    if (error_)
      return *error_;
    return {};
  }

 private:
  const safetensors_checkpoint& checkpoint_;
  std::string prefix_;
  std::optional<error> error_;
};

void read_block(tensor_reader& in, const qwen3_5_vision_config& c, std::int64_t i,
                qwen3_5_vision_block& b) {
  const std::int64_t hid = c.hidden_size;
  const std::int64_t inter = c.intermediate_size;
  const std::string at = fmt::format("blocks.{}.", i);
  in.read(at + "norm1.weight", {hid}, b.norm1_w);
  in.read(at + "norm1.bias", {hid}, b.norm1_b);
  in.read(at + "attn.qkv.weight", {3 * hid, hid}, b.qkv_w);
  in.read(at + "attn.qkv.bias", {3 * hid}, b.qkv_b);
  in.read(at + "attn.proj.weight", {hid, hid}, b.proj_w);
  in.read(at + "attn.proj.bias", {hid}, b.proj_b);
  in.read(at + "norm2.weight", {hid}, b.norm2_w);
  in.read(at + "norm2.bias", {hid}, b.norm2_b);
  in.read(at + "mlp.linear_fc1.weight", {inter, hid}, b.fc1_w);
  in.read(at + "mlp.linear_fc1.bias", {inter}, b.fc1_b);
  in.read(at + "mlp.linear_fc2.weight", {hid, inter}, b.fc2_w);
  in.read(at + "mlp.linear_fc2.bias", {hid}, b.fc2_b);
}

}  // namespace

result<qwen3_5_vision_weights> qwen3_5_vision_weights::load(
    const qwen3_5_vision_config& c, const safetensors_checkpoint& checkpoint,
    std::string_view prefix) {
  const std::int64_t hid = c.hidden_size;
  const std::int64_t merged = c.merged_hidden();
  qwen3_5_vision_weights w;
  tensor_reader in{checkpoint, prefix};
  // The Conv3d kernel [hidden, C, Tp, P, P] is, flattened, the linear map of a patch row.
  in.read("patch_embed.proj.weight",
          {hid, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size}, w.patch_w);
  in.read("patch_embed.proj.bias", {hid}, w.patch_b);
  in.read("pos_embed.weight", {c.num_position_embeddings, hid}, w.pos_embed);
  // Block by block, so a config claiming more blocks than the file holds
  // stops at the first missing one instead of reserving them all.
  for (std::int64_t i = 0; i < c.depth && in.outcome(); ++i)
    read_block(in, c, i, w.blocks.emplace_back());
  in.read("merger.norm.weight", {hid}, w.merger_norm_w);
  in.read("merger.norm.bias", {hid}, w.merger_norm_b);
  in.read("merger.linear_fc1.weight", {merged, merged}, w.merger_fc1_w);
  in.read("merger.linear_fc1.bias", {merged}, w.merger_fc1_b);
  in.read("merger.linear_fc2.weight", {c.out_hidden_size, merged}, w.merger_fc2_w);
  in.read("merger.linear_fc2.bias", {c.out_hidden_size}, w.merger_fc2_b);
  if (auto ok = in.outcome(); !ok)
    return ok.error();
  return w;
}

}  // namespace mstar::models
