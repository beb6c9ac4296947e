#pragma once

// What the engine asks of a model family: its tokenizer and stop ids, the
// pools it needs, the resource steps a batch of rows declares, and the
// forward over the pools' plans. A model owns its walk and its backend
// (CPU or CUDA); it does not own pools. Whoever drives the step (the engine
// in tests, the pool actors at run time) makes the pools from `pools()`,
// binds the model to their arenas once, and for each step admits and plans
// the model's `declare`d request before calling `forward`.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"
#include "kernels/arena.hpp"
#include "models/image_input.hpp"
#include "models/nemotron_h_backend.hpp"
#include "models/tokenizer.hpp"
#include "parallel/communicator.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"

namespace mstar::models {

/// How the pools a model runs on are sized.
struct pool_options {
  std::int64_t page_size = 16;
  std::int64_t max_num_pages = 4096;
  std::int64_t max_slots = 64;  ///< recurrent slots, the sink included
  /// The most bytes the pools may take (engine/pool_memory.hpp checks it
  /// before they are made); 0: only the host's own limits.
  std::uint64_t max_memory = 0;
  bool prefix_cache = true;  ///< honoured only by prefix-skip-safe models
  std::string salt;          ///< prefix-cache salt (tenant)
  /// Recurrent-state checkpoints for prefix reuse on hybrid models (their
  /// own slots beside `max_slots`; 0: none, and hybrid models then never
  /// reuse a prefix), taken every `checkpoint_stride` tokens (0: every
  /// page; a whole number of pages).
  std::int64_t checkpoint_slots = 64;
  std::int64_t checkpoint_stride = 0;
};

/// Where and in what precision a model runs.
struct run_options {
  /// "cpu", or "cuda" / "cuda:N" (device N): the forward's kernels, the
  /// weights and the pools' arenas all live there.
  std::string device = "cpu";
  /// Weights and GEMM inputs on CUDA: bfloat16 (the reference's serving
  /// precision) or float32 (the CPU's numbers, for parity). The CPU always
  /// runs float32.
  mstar::dtype dtype = mstar::dtype::bfloat16;
  /// On CUDA, decode steps replay a graph captured once per batch size.
  bool cuda_graphs = true;
  /// This process's (or thread's) rank of a tensor-parallel group; empty or
  /// a group of one: the whole model. The model loads only its rank's part
  /// (models/nemotron_h_shard.hpp) and shares the communicator's ownership.
  /// Families without tensor parallelism refuse a group of more than one.
  std::shared_ptr<parallel::communicator> tensor_parallel;
  /// N > 1: `load_causal_lm` gives a models::tensor_parallel_lm of N ranks in
  /// this process (models/tensor_parallel_lm.hpp) over a new in-process
  /// group, one scheduler and one set of pools for all; every rank on
  /// `device`, except "cuda" with N visible GPUs: rank r on cuda:r
  /// (models/tensor_parallel_lm.hpp). `tensor_parallel` must then be empty.
  int tensor_parallel_ranks = 1;
  /// With tensor_parallel_ranks > 1: how the ranks' group is formed. Empty,
  /// or a maker that gives nullopt for the rank devices: the in-process
  /// group (host collectives). The launchers built with NCCL pass
  /// parallel::nccl_group_maker(), which takes ranks on distinct GPUs.
  parallel::group_maker tensor_parallel_groups;
};

/// Parses "cpu", "cuda" or "cuda:N" into the device index (-1 for cpu), or
/// invalid_argument naming the text.
[[nodiscard]] result<int> parse_device(const std::string& text);

/// A request's row for one step: the tokens it feeds now.
struct step_row {
  resources::request_id rid;
  std::span<const resources::token_id> tokens;
};

/// What one step asks of the pools: one typed step per pool kind, absent
/// when the model has no such pool. A value: it travels as a message.
struct step_request {
  std::optional<resources::kv_step> kv;
  std::optional<resources::recurrent_step> recurrent;
};

/// The pools' addressing for one step, one typed plan per pool kind.
struct step_plans {
  std::shared_ptr<const resources::kv_plan> kv;
  std::shared_ptr<const resources::recurrent_plan> recurrent;
};

/// The pools a model runs on, as configs for whoever makes them.
struct pool_spec {
  std::optional<resources::kv_pool_config> kv;
  std::optional<resources::recurrent_state_config> recurrent;
  /// The weights' identity, rooting prefix-cache keys.
  std::string fingerprint;
  /// Where the pools' bytes live (the backend's device); empty: host memory.
  kernels::arena_factory memory;
  /// Copies of every arena `memory` makes: N for the replicated arenas of a
  /// tensor_parallel_lm of N ranks (each rank's part of the state), so the
  /// pools take N times the bytes their geometry says (engine/pool_memory.hpp).
  std::int64_t replicas = 1;
};

/// What a forward produced.
struct forward_output {
  /// [rows, vocab]: each row's last token's logits (when no draws were asked).
  std::vector<float> logits;
  /// One id per row when draws were asked: drawn where the logits are (-1:
  /// the row's settings or logits were refused by the sampler).
  std::vector<std::int32_t> sampled;
};

/// Where one image sits in a prompt fitted by `place_images`: its run of
/// placeholder slots and how far it moves the position counter (M-RoPE: the
/// position after an image is its start plus the larger side of its merged
/// grid, not its start plus its slots).
struct image_span {
  std::int64_t start = 0;    ///< first placeholder slot
  std::int64_t length = 0;   ///< placeholder slots
  std::int64_t advance = 0;  ///< position counter advance
};

/// What a front end needs to hand a model images: the tokens a prompt marks
/// each image with, and the patch geometry its vision tower takes (an image
/// processor's config must agree with it).
struct vision_facts {
  resources::token_id image_token = 0;   ///< the placeholder: one per merged patch, or one alone
  resources::token_id vision_start = 0;  ///< before each image's placeholders
  resources::token_id vision_end = 0;    ///< after them
  std::int64_t patch_size = 0;           ///< pixels per patch side
  std::int64_t temporal_patch_size = 0;  ///< frames per patch
  std::int64_t merge_size = 0;           ///< patches per token side
};

/// A causal language model the engine can drive. Not thread-safe: one
/// owner (the worker) calls `bind` and `forward`; the const members may be
/// read from any thread once loaded.
class causal_lm {
 public:
  virtual ~causal_lm() = default;

  /// The tokenizer, or null for a folder without one (token-id prompts only).
  [[nodiscard]] virtual const tokenizer* tok() const noexcept = 0;
  /// Rows of the LM head.
  [[nodiscard]] virtual std::int64_t vocab_size() const noexcept = 0;
  /// The longest sequence (prompt and output) the model was trained for;
  /// 0 when the checkpoint does not say.
  [[nodiscard]] virtual std::int64_t max_context() const noexcept { return 0; }
  /// Ids that end a sequence (config.json's eos_token_id).
  [[nodiscard]] virtual std::span<const std::int64_t> eos_token_ids() const noexcept = 0;
  /// Whether a request whose front came from cached pages may skip that
  /// compute (false when recurrent state at the match boundary is not cached).
  [[nodiscard]] virtual bool prefix_skip_safe() const noexcept = 0;

  /// Whether windowed generation (pages released behind the window) keeps
  /// the forward's inputs right: false for a model whose rotary positions
  /// are read off the KV pages it holds.
  [[nodiscard]] virtual bool supports_windows() const noexcept { return true; }
  /// The pools this model needs, sized by `options`.
  [[nodiscard]] virtual result<pool_spec> pools(const pool_options& options) const = 0;
  /// Binds the forward to the pools' arenas (either may be null when `pools`
  /// asked for none); once, before the first forward. The pools must outlive
  /// the model's use of them.
  [[nodiscard]] virtual result<void> bind(resources::kv_pool* kv,
                                          resources::recurrent_state_pool* recurrent) = 0;
  /// The image markers and patch geometry of the model's vision tower, or
  /// nullopt for a model that takes no images (the default).
  [[nodiscard]] virtual std::optional<vision_facts> vision() const noexcept { return std::nullopt; }
  /// Fits a request's images to its prompt before it is queued: a model
  /// without a vision tower refuses any image (the default); one with a tower
  /// expands each single placeholder token to its image's token count and
  /// checks every placeholder run against its image's grid.
  [[nodiscard]] virtual result<void> place_images(std::vector<resources::token_id>& prompt,
                                                  std::span<const image_input> images) const;
  /// Each image's span in `prompt` (fitted by `place_images` with `images`),
  /// in prompt order: page keys name an image by its digest over these slots
  /// (reference kv-keys-windowing §1.8). Empty for a model taking no images.
  [[nodiscard]] virtual std::vector<image_span> image_spans(
      std::span<const resources::token_id> prompt, std::span<const image_input> images) const;
  /// Names how this model turns an image processor's patches into its
  /// placeholder slots and positions (the reference's
  /// `preprocess_fingerprint`), folded into every image's digest; empty for
  /// a model taking no images.
  [[nodiscard]] virtual std::string preprocess_fingerprint() const { return {}; }
  /// A sequence enters the pools: `prompt` is its request's prompt, whose
  /// placeholder runs take `images` (fitted by `place_images`); the model
  /// keeps what its forward needs for it (rotary positions, the images until
  /// their embeddings are made) until `end_sequence`. The default keeps
  /// nothing.
  virtual void begin_sequence(const resources::request_id& rid,
                              std::span<const resources::token_id> prompt,
                              std::span<const image_input> images);
  /// The sequence left the pools (finished, cancelled, preempted).
  virtual void end_sequence(const resources::request_id& rid);
  /// The resource steps a step over `rows` needs (one segment per row).
  [[nodiscard]] virtual step_request declare(std::span<const step_row> rows) const = 0;
  /// Runs the kernels of one admitted and planned step. With `draws` (one
  /// per row), each row's token is drawn where the logits are and only the
  /// ids come back; without, the logits do.
  [[nodiscard]] virtual result<forward_output> forward(std::span<const step_row> rows,
                                                       const step_plans& plans,
                                                       std::span<const row_sampling> draws) = 0;

  /// Starts the forward of one admitted and planned step without waiting
  /// for it; `finish` gives its output. On a GPU only the work is queued,
  /// so the host may admit, plan and launch the next step while this one
  /// runs (overlap scheduling); the default runs `forward` here. Forwards run
  /// in launch order, at most two outstanding. `loopback` is empty or one
  /// entry per row: j >= 0 makes a decode row feed the id the previously
  /// launched forward drew for its row j, read where it was drawn (on a GPU
  /// no host round trip), whatever the row's token says; -1: the row's own.
  /// `plans` and `rows` need to live only for the call.
  [[nodiscard]] virtual result<std::uint64_t> launch(std::span<const step_row> rows,
                                                     const step_plans& plans,
                                                     std::span<const row_sampling> draws,
                                                     std::span<const std::int32_t> loopback);
  /// Waits for the oldest outstanding forward, which must be `ticket`.
  [[nodiscard]] virtual result<forward_output> finish(std::uint64_t ticket);
  /// "cpu", or the CUDA device's name.
  [[nodiscard]] virtual std::string device_name() const = 0;
  /// The weights' precision in the forward.
  [[nodiscard]] virtual mstar::dtype compute_dtype() const noexcept = 0;
  /// Number of weights.
  [[nodiscard]] virtual std::int64_t num_parameters() const noexcept = 0;
  /// Whether the backend runs on a GPU (the engine warms it up then).
  [[nodiscard]] virtual bool on_gpu() const noexcept = 0;

 private:
  // The default launch's outputs, oldest first (see `launch`).
  std::vector<std::pair<std::uint64_t, forward_output>> launched_;
  std::vector<std::int32_t> last_drawn_;  ///< the last launch's draws
  std::uint64_t next_ticket_ = 0;
};

}  // namespace mstar::models
