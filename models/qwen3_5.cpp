// qwen3_5_model: loading (config, weights, tokenizer), pools, steps. The
// layer math lives in qwen3_5_cpu.cpp.
#include "models/qwen3_5.hpp"

#include <fmt/format.h>

#include "kernels/sampling.hpp"
#include "models/internal/hybrid_pools.hpp"
#include "models/internal/weights.hpp"
#include "models/safetensors.hpp"

namespace mstar::models {
namespace {

// Zero-centred RMSNorm weights: the forward multiplies by 1 + w.
void add_one(std::vector<float>& w) {
  for (auto& x : w)
    x += 1.0F;
}

}  // namespace

result<std::unique_ptr<qwen3_5_model>> qwen3_5_model::load(const std::filesystem::path& folder,
                                                           const run_options& run) {
  auto device = parse_device(run.device);
  if (!device)
    return device.error();
  auto model = std::unique_ptr<qwen3_5_model>(new qwen3_5_model);
  if (*device >= 0) {
    auto gpu = qwen3_5_cuda::make(*device, run.dtype, run.cuda_graphs);
    if (!gpu)
      return gpu.error().with_context(folder.string());
    model->cuda_ = std::move(*gpu);
  }
  auto config = qwen3_5_config::load(folder);
  if (!config)
    return config.error();
  model->config_ = std::move(*config);
  if (auto ok = model->load_weights(folder); !ok)
    return ok.error();
  if (model->config_.multimodal) {
    auto ckpt = safetensors_checkpoint::open(folder);
    if (!ckpt)
      return ckpt.error();
    auto vc = qwen3_5_vision_config::load(folder);
    if (!vc)
      return vc.error();
    if (vc->out_hidden_size != model->config_.hidden_size) {
      return make_error(
          errc::invalid_argument,
          fmt::format("{}: vision_config.out_hidden_size {} is not the text "
                      "model's hidden_size {}",
                      folder.string(), vc->out_hidden_size, model->config_.hidden_size));
    }
    auto tower = qwen3_5_vision::load(std::move(*vc), *ckpt);
    if (!tower)
      return tower.error();
    model->vision_.emplace(std::move(*tower));
    if (*device >= 0) {
      auto gpu = qwen3_5_vision_cuda::make(*device, run.dtype, *model->vision_);
      if (!gpu)
        return gpu.error().with_context(folder.string());
      model->vision_cuda_ = std::move(*gpu);
    }
  }
  auto tok = load_tokenizer(folder, model->config_.vocab_size);
  if (tok) {
    model->tokenizer_ = std::move(*tok);
  } else if (tok.error().code() != errc::not_found) {
    return tok.error();
  }
  return model;
}

result<void> qwen3_5_model::load_weights(const std::filesystem::path& folder) {
  auto opened = safetensors_checkpoint::open(folder);
  if (!opened)
    return opened.error();
  const auto& ckpt = *opened;
  fingerprint_ = internal::weights_fingerprint("qwen3_5", folder, ckpt);
  const auto& c = config_;
  const std::int64_t hid = c.hidden_size, D = c.head_dim;
  const std::int64_t qd = c.num_attention_heads * D, kvd = c.num_key_value_heads * D;
  const std::int64_t cd = c.delta_net().conv_dim(), vd = c.value_dim();
  const std::int64_t HV = c.linear_num_value_heads, inter = c.intermediate_size;
  // The multimodal layout nests the language model; the text-only one does not.
  const std::string root = ckpt.find("model.language_model.embed_tokens.weight") != nullptr
                               ? "model.language_model."
                               : "model.";
  auto take = [&](std::vector<float>& out, const std::string& name,
                  std::vector<std::int64_t> shape) -> result<void> {
    auto t = internal::read_tensor(ckpt, name, std::move(shape));
    if (!t)
      return t.error();
    out = std::move(*t);
    return {};
  };
#define MSTAR_TAKE(out, name, ...)                   \
  if (auto ok = take(out, name, {__VA_ARGS__}); !ok) \
  return ok.error()
  MSTAR_TAKE(embeddings_, root + "embed_tokens.weight", c.vocab_size, hid);
  MSTAR_TAKE(norm_, root + "norm.weight", hid);
  add_one(norm_);
  if (c.tie_word_embeddings && ckpt.find("lm_head.weight") == nullptr) {
    lm_head_ = embeddings_;
  } else {
    MSTAR_TAKE(lm_head_, "lm_head.weight", c.vocab_size, hid);
  }
  std::int32_t counts[2] = {0, 0};
  for (std::size_t i = 0; i < c.layers.size(); ++i) {
    qwen3_5_layer l;
    l.mixer = c.layers[i];
    l.sub_index = counts[static_cast<int>(l.mixer)]++;
    const std::string p = fmt::format("{}layers.{}.", root, i);
    MSTAR_TAKE(l.in_norm, p + "input_layernorm.weight", hid);
    MSTAR_TAKE(l.mlp_norm, p + "post_attention_layernorm.weight", hid);
    add_one(l.in_norm);
    add_one(l.mlp_norm);
    MSTAR_TAKE(l.gate, p + "mlp.gate_proj.weight", inter, hid);
    MSTAR_TAKE(l.up, p + "mlp.up_proj.weight", inter, hid);
    MSTAR_TAKE(l.down, p + "mlp.down_proj.weight", hid, inter);
    if (l.mixer == qwen3_5_mixer::delta_net) {
      const std::string a = p + "linear_attn.";
      std::vector<float> qkv, z, b, av;
      MSTAR_TAKE(qkv, a + "in_proj_qkv.weight", cd, hid);
      MSTAR_TAKE(z, a + "in_proj_z.weight", vd, hid);
      MSTAR_TAKE(b, a + "in_proj_b.weight", HV, hid);
      MSTAR_TAKE(av, a + "in_proj_a.weight", HV, hid);
      l.in_proj = std::move(qkv);
      for (const auto* part : {&z, &b, &av})
        l.in_proj.insert(l.in_proj.end(), part->begin(), part->end());
      MSTAR_TAKE(l.conv_w, a + "conv1d.weight", cd, 1, c.linear_conv_kernel_dim);
      MSTAR_TAKE(l.dt_bias, a + "dt_bias", HV);
      MSTAR_TAKE(l.a_log, a + "A_log", HV);
      MSTAR_TAKE(l.gnorm, a + "norm.weight", c.linear_value_head_dim);
      MSTAR_TAKE(l.out_proj, a + "out_proj.weight", hid, vd);
    } else {
      const std::string a = p + "self_attn.";
      MSTAR_TAKE(l.q, a + "q_proj.weight", 2 * qd, hid);
      MSTAR_TAKE(l.k, a + "k_proj.weight", kvd, hid);
      MSTAR_TAKE(l.v, a + "v_proj.weight", kvd, hid);
      MSTAR_TAKE(l.o, a + "o_proj.weight", hid, qd);
      MSTAR_TAKE(l.q_norm, a + "q_norm.weight", D);
      MSTAR_TAKE(l.k_norm, a + "k_norm.weight", D);
      add_one(l.q_norm);
      add_one(l.k_norm);
    }
    layers_.push_back(std::move(l));
  }
#undef MSTAR_TAKE
  cpu_.load(config_, host_weights());
  return {};
}

result<pool_spec> qwen3_5_model::pools(const pool_options& options) const {
  auto shape = internal::pool_shape_of(config_, cuda_ ? cuda_->dtype() : mstar::dtype::float32);
  if (!shape)
    return shape.error();
  auto spec = internal::hybrid_pools(options, std::move(*shape), fingerprint_, checkpointed_);
  if (spec && cuda_)
    spec->memory = cuda_->memory();
  return spec;
}

result<void> qwen3_5_model::bind(resources::kv_pool* kv,
                                 resources::recurrent_state_pool* recurrent) {
  if (auto ok =
          internal::check_bound_pools("qwen3_5", config_.count(qwen3_5_mixer::attention) > 0, kv,
                                      config_.count(qwen3_5_mixer::delta_net) > 0, recurrent);
      !ok) {
    return ok;
  }
  conv_state_.clear();
  delta_state_.clear();
  if (kv != nullptr) {
    kv_view_ = kernels::kv_arena_view{kv->page_data(0), kv->geometry()};
    page_size_ = kv->geometry().page_size;
  }
  if (recurrent != nullptr) {
    if (auto geo = resources::delta_net_geometry::from_blocks(recurrent->config().blocks);
        !geo || *geo != config_.delta_net()) {
      return make_error(errc::invalid_argument,
                        "qwen3_5: the recurrent pool was not made for this model's delta nets");
    }
    for (std::int64_t m = 0; m < config_.count(qwen3_5_mixer::delta_net); ++m) {
      auto conv = recurrent->block("conv", m);
      auto state = recurrent->block("state", m);
      if (!conv || !state)
        return make_error(errc::not_found, "qwen3_5: the recurrent pool lacks its blocks");
      conv_state_.push_back(reinterpret_cast<float*>(conv->data));
      delta_state_.push_back(reinterpret_cast<float*>(state->data));
    }
  }
  if (cuda_) {
    if (auto ok = cuda_->load(config_, host_weights(), kv ? kv->config().max_num_pages : 0); !ok)
      return ok.error();
  }
  bound_ = true;
  return {};
}

step_request qwen3_5_model::declare(std::span<const step_row> rows) const {
  step_request req;
  std::vector<resources::segment> segments;
  segments.reserve(rows.size());
  for (const auto& r : rows)
    segments.push_back({r.rid, "main", static_cast<std::int64_t>(r.tokens.size())});
  if (config_.count(qwen3_5_mixer::attention) > 0) {
    req.kv.emplace();
    req.kv->segments = segments;
  }
  if (config_.count(qwen3_5_mixer::delta_net) > 0) {
    req.recurrent.emplace();
    req.recurrent->segments = std::move(segments);
  }
  return req;
}

result<qwen3_5_step> qwen3_5_model::prepare(std::span<const step_row> rows, const step_plans& plans,
                                            std::span<const row_sampling> draws) {
  if (!bound_)
    return make_error(errc::invalid_argument, "qwen3_5: forward before bind");
  if (!draws.empty() && draws.size() != rows.size()) {
    return make_error(errc::invalid_argument,
                      fmt::format("qwen3_5: {} draws for {} rows", draws.size(), rows.size()));
  }
  ids_.clear();
  cu_.assign(1, 0);
  bool decode = true;
  for (const auto& r : rows) {
    if (r.tokens.empty())
      return make_error(errc::invalid_argument, fmt::format("row {} feeds no tokens", r.rid));
    for (const auto t : r.tokens) {
      if (static_cast<std::int64_t>(t) >= config_.vocab_size) {
        return make_error(errc::out_of_range,
                          fmt::format("row {}: token id {} is outside the vocabulary of {}", r.rid,
                                      t, config_.vocab_size));
      }
      ids_.push_back(static_cast<std::int32_t>(t));
    }
    cu_.push_back(static_cast<std::int32_t>(ids_.size()));
    decode = decode && r.tokens.size() == 1;
  }
  qwen3_5_step step{ids_,    cu_,      {},      {},          decode,
                    nullptr, kv_view_, nullptr, conv_state_, delta_state_};
  if (config_.count(qwen3_5_mixer::attention) > 0) {
    if (!plans.kv || plans.kv->labels.count("main") == 0)
      return make_error(errc::invalid_argument, "qwen3_5: step has no KV plan for 'main'");
    step.kv_plan = &plans.kv->labels.at("main");
    if (auto ok = fill_positions(rows, *step.kv_plan); !ok)
      return ok.error();
    step.positions = positions_;
    step.embed_rows = embed_rows_;
  }
  if (config_.count(qwen3_5_mixer::delta_net) > 0) {
    if (!plans.recurrent)
      return make_error(errc::invalid_argument, "qwen3_5: step has no recurrent plan");
    auto a = plans.recurrent->addressing("main");
    if (!a)
      return a.error();
    step.rec = *a;
  }
  return step;
}

result<forward_output> qwen3_5_model::forward(std::span<const step_row> rows,
                                              const step_plans& plans,
                                              std::span<const row_sampling> draws) {
  if (cuda_) {
    auto ticket = launch(rows, plans, draws, {});
    if (!ticket)
      return ticket.error();
    return finish(*ticket);
  }
  auto prepared = prepare(rows, plans, draws);
  if (!prepared)
    return prepared.error();
  const qwen3_5_step& step = *prepared;
  forward_output out;
  cpu_.forward(step, out.logits);
  if (!draws.empty()) {
    const auto R = static_cast<std::int64_t>(rows.size());
    out.sampled.assign(rows.size(), -1);
    for (std::int64_t r = 0; r < R; ++r) {
      const auto& s = draws[static_cast<std::size_t>(r)];
      auto tok =
          kernels::sample({kernels::contiguous<const float, 1>(
                               out.logits.data() + r * config_.vocab_size, {config_.vocab_size}),
                           s.temperature, s.top_k, s.top_p, s.seed, s.counter});
      if (tok)
        out.sampled[static_cast<std::size_t>(r)] = *tok;
    }
    out.logits.clear();
  }
  return out;
}

result<std::uint64_t> qwen3_5_model::launch(std::span<const step_row> rows, const step_plans& plans,
                                            std::span<const row_sampling> draws,
                                            std::span<const std::int32_t> loopback) {
  if (!cuda_)
    return causal_lm::launch(rows, plans, draws, loopback);
  auto step = prepare(rows, plans, draws);
  if (!step)
    return step.error();
  const bool draw = !draws.empty();
  auto ticket = cuda_->launch(*step, !draw, draws, loopback);
  if (!ticket)
    return ticket.error();
  launched_.emplace_back(*ticket, draw);
  return *ticket;
}

result<forward_output> qwen3_5_model::finish(std::uint64_t ticket) {
  if (!cuda_)
    return causal_lm::finish(ticket);
  if (launched_.empty() || launched_.front().first != ticket) {
    return make_error(errc::invalid_argument,
                      fmt::format("qwen3_5: forward {} is not the oldest outstanding", ticket));
  }
  const bool draw = launched_.front().second;
  launched_.erase(launched_.begin());
  forward_output out;
  if (auto ok = cuda_->finish(ticket, draw ? nullptr : &out.logits, draw ? &out.sampled : nullptr);
      !ok) {
    return ok.error();
  }
  return out;
}

std::string qwen3_5_model::device_name() const {
  return cuda_ ? cuda_->name() : "cpu";
}

mstar::dtype qwen3_5_model::compute_dtype() const noexcept {
  return cuda_ ? cuda_->dtype() : mstar::dtype::float32;
}

bool qwen3_5_model::on_gpu() const noexcept {
  return cuda_ != nullptr;
}

std::int64_t qwen3_5_model::num_parameters() const noexcept {
  auto n = static_cast<std::int64_t>(embeddings_.size() + norm_.size() +
                                     (config_.tie_word_embeddings ? 0 : lm_head_.size()));
  for (const auto& l : layers_) {
    for (const auto* w :
         {&l.in_norm, &l.mlp_norm, &l.in_proj, &l.conv_w, &l.dt_bias, &l.a_log, &l.gnorm,
          &l.out_proj, &l.q, &l.k, &l.v, &l.o, &l.q_norm, &l.k_norm, &l.gate, &l.up, &l.down}) {
      n += static_cast<std::int64_t>(w->size());
    }
  }
  return n;
}

qwen3_5_model::~qwen3_5_model() = default;

}  // namespace mstar::models
