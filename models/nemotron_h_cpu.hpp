#pragma once

// The Nemotron-H forward on the CPU, float32: the reference every other
// backend is compared with. Borrows the model's host weights; pools live in
// host memory (plain or shared-memory arenas).

#include <memory>
#include <string>
#include <vector>

#include "models/nemotron_h_backend.hpp"

namespace mstar::models {

/// The CPU backend. See the file comment.
class nemotron_h_cpu final : public nemotron_h_backend {
 public:
  [[nodiscard]] kernels::arena_factory memory() const override { return {}; }
  [[nodiscard]] mstar::dtype kv_dtype() const noexcept override { return mstar::dtype::float32; }
  [[nodiscard]] mstar::dtype dtype() const noexcept override { return mstar::dtype::float32; }
  [[nodiscard]] const std::string& name() const noexcept override { return name_; }
  [[nodiscard]] result<void> load(const nemotron_h_config& config,
                                  const nemotron_h_host_weights& weights,
                                  std::int64_t kv_pages) override;
  /// Joins a tensor-parallel group: all-reduces after out_proj, o_proj and
  /// down_proj, and gathers each rank's vocabulary part of the logits, so
  /// every rank ends a forward with the same logits and the same draws.
  [[nodiscard]] result<void> set_tensor_parallel(const nemotron_h_tensor_parallel& tp) override;
  [[nodiscard]] result<void> forward(const nemotron_h_batch& batch, const nemotron_h_state& state,
                                     std::vector<float>* logits, std::vector<std::int32_t>* sampled,
                                     std::span<const row_sampling> sampling) override;

 private:
  /// Per-step work buffers, reused across layers and steps (only grown), so
  /// a step does not allocate per layer.
  struct scratch {
    std::vector<float> h, x, out, zxbcdt, xbc, y, q, k, v, o, inter, last, logits, part, gathered;
  };
  void mamba_layer(const nemotron_h_layer& l, const float* x, float* out, std::int64_t tokens,
                   const nemotron_h_batch& batch, const nemotron_h_state& state);
  void attention_layer(const nemotron_h_layer& l, const float* x, float* out, std::int64_t tokens,
                       const nemotron_h_state& state);

  /// The LM head on each row's final hidden state `last` [R, hidden]:
  /// `rows` [R, vocab]; with a group, this rank's part and the gather.
  [[nodiscard]] result<void> lm_head(const float* last, std::int64_t rows_n,
                                     std::vector<float>& rows);

  std::string name_ = "cpu";
  nemotron_h_tensor_parallel tp_;
  nemotron_h_config config_;
  nemotron_h_host_weights weights_;
  scratch scratch_;
};

}  // namespace mstar::models
