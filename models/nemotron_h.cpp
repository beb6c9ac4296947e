// nemotron_h_model: loading (config, weights, tokenizer), pools, requests.
// The forward pass lives in the backends (nemotron_h_cpu.cpp, cuda/).
#include "models/nemotron_h.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <random>

#include "models/cuda/nemotron_h_cuda.hpp"
#include "models/internal/hybrid_pools.hpp"
#include "models/internal/weights.hpp"
#include "models/nemotron_h_cpu.hpp"
#include "models/safetensors.hpp"
#include "resources/kv/keys.hpp"

namespace mstar::models {
using internal::read_tensor;

result<std::unique_ptr<nemotron_h_model>> nemotron_h_model::load(
    const std::filesystem::path& folder, const run_options& run) {
  auto model = std::unique_ptr<nemotron_h_model>(new nemotron_h_model);
  if (auto ok = model->open_device(run); !ok)
    return ok.error();
  auto config = nemotron_h_config::load(folder);  // folder/config.json, named once in errors
  if (!config)
    return config.error();
  model->config_ = std::move(*config);
  if (auto ok = model->config_.validate(); !ok)
    return ok.error().with_context(folder.string());
  if (auto ok = model->join_group(run); !ok)
    return ok.error().with_context(folder.string());
  // Weights before the tokenizer: their shapes prove vocab_size, which then
  // bounds the tokenizer's ids (and so its tables).
  if (auto ok = model->load_weights(folder); !ok)
    return ok.error();
  auto tok = load_tokenizer(folder, model->config_.vocab_size);
  if (tok) {
    model->tokenizer_ = std::move(*tok);
  } else if (tok.error().code() != errc::not_found) {
    return tok.error();  // a tokenizer that is there but broken is an error; none is not
  }
  auto ckpt = safetensors_checkpoint::open(folder);
  if (!ckpt)
    return ckpt.error();
  model->fingerprint_ = internal::weights_fingerprint("nemotron_h", folder, *ckpt);
  if (model->shard_) {  // a rank's pages hold its heads only: never another rank's prefix
    model->fingerprint_ += fmt::format(" tp {}/{}", model->shard_->rank, model->shard_->size);
  }
  return model;
}

result<void> nemotron_h_model::load_weights(const std::filesystem::path& folder) {
  auto opened = safetensors_checkpoint::open(folder);
  if (!opened)
    return opened.error();
  const auto& ckpt = *opened;
  const auto& c = config_;
  const std::int64_t hid = c.hidden_size, H = c.mamba_num_heads, di = c.d_inner();
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  auto take = [&](std::vector<float>& out, const std::string& name,
                  std::vector<std::int64_t> shape) -> result<void> {
    auto t = read_tensor(ckpt, name, std::move(shape));
    if (!t)
      return t.error();
    out = std::move(*t);
    return {};
  };
#define MSTAR_TAKE(out, name, ...)                   \
  if (auto ok = take(out, name, {__VA_ARGS__}); !ok) \
  return ok.error()
  MSTAR_TAKE(embeddings_, "backbone.embeddings.weight", c.vocab_size, hid);
  MSTAR_TAKE(norm_f_, "backbone.norm_f.weight", hid);
  if (c.tie_word_embeddings && ckpt.find("lm_head.weight") == nullptr) {
    lm_head_ = embeddings_;
  } else {
    MSTAR_TAKE(lm_head_, "lm_head.weight", c.vocab_size, hid);
  }
  if (shard_)
    lm_head_ = shard_lm_head(*shard_, c, lm_head_);
  std::int32_t counts[4] = {0, 0, 0, 0};
  for (std::size_t i = 0; i < c.layers.size(); ++i) {
    nemotron_h_layer l;
    l.kind = c.layers[i];
    l.sub_index = counts[static_cast<int>(l.kind)]++;
    const std::string p = fmt::format("backbone.layers.{}.", i);
    MSTAR_TAKE(l.norm, p + "norm.weight", hid);
    switch (l.kind) {
      case layer_kind::mamba2:
        MSTAR_TAKE(l.in_proj, p + "mixer.in_proj.weight", c.in_proj_size(), hid);
        MSTAR_TAKE(l.conv_w, p + "mixer.conv1d.weight", c.conv_dim(), 1, c.conv_kernel);
        if (c.use_conv_bias)
          MSTAR_TAKE(l.conv_b, p + "mixer.conv1d.bias", c.conv_dim());
        MSTAR_TAKE(l.dt_bias, p + "mixer.dt_bias", H);
        MSTAR_TAKE(l.a_log, p + "mixer.A_log", H);
        MSTAR_TAKE(l.d, p + "mixer.D", H);
        MSTAR_TAKE(l.gnorm, p + "mixer.norm.weight", di);
        MSTAR_TAKE(l.out_proj, p + "mixer.out_proj.weight", hid, di);
        break;
      case layer_kind::attention:
        MSTAR_TAKE(l.q, p + "mixer.q_proj.weight", qd, hid);
        MSTAR_TAKE(l.k, p + "mixer.k_proj.weight", kvd, hid);
        MSTAR_TAKE(l.v, p + "mixer.v_proj.weight", kvd, hid);
        MSTAR_TAKE(l.o, p + "mixer.o_proj.weight", hid, qd);
        break;
      case layer_kind::mlp:
        MSTAR_TAKE(l.up, p + "mixer.up_proj.weight", c.intermediate_size, hid);
        MSTAR_TAKE(l.down, p + "mixer.down_proj.weight", hid, c.intermediate_size);
        break;
      case layer_kind::moe:
        return make_error(errc::unsupported, "MoE layers (E) are not supported yet");
    }
    keep_part(l);
    layers_.push_back(std::move(l));
  }
#undef MSTAR_TAKE
  return {};
}

result<pool_spec> nemotron_h_model::pools(const pool_options& options) const {
  auto shape = internal::pool_shape_of(config_, backend_->kv_dtype());
  if (!shape)
    return shape.error();
  if (shard_) {  // each rank's pools hold its part: its KV heads, its heads' state
    shape->kv_heads = shard_->local.num_key_value_heads;
    if (shape->recurrent_layers > 0) {
      auto blocks = shard_blocks(*shard_, std::move(shape->blocks));
      if (!blocks)
        return blocks.error();
      shape->blocks = std::move(*blocks);
    }
  }
  auto spec = internal::hybrid_pools(options, std::move(*shape), fingerprint_, checkpointed_);
  if (spec)
    spec->memory = backend_->memory();
  return spec;
}

result<void> nemotron_h_model::bind(resources::kv_pool* kv,
                                    resources::recurrent_state_pool* recurrent) {
  if (auto ok = internal::check_bound_pools("nemotron_h", config_.count(layer_kind::attention) > 0,
                                            kv, config_.count(layer_kind::mamba2) > 0, recurrent);
      !ok) {
    return ok;
  }
  conv_state_.clear();
  ssm_state_.clear();
  // A rank of a tensor-parallel group computes on its own copy of the pools'
  // bytes: pools shared by all ranks (models/tensor_parallel_lm.hpp) keep
  // one member per rank (kernels/replicated_arena.hpp), laid out alike, so
  // the rank's address is its member's base plus the pool's offset. Any
  // other arena is its own member 0: the address is unchanged.
  const int member = shard_ ? shard_->rank : 0;
  auto rebase = [member](kernels::arena& storage, std::byte* p) {
    return storage.member(member).data() + (p - storage.data());
  };
  if (kv != nullptr) {
    kv_view_ = kernels::kv_arena_view{rebase(kv->storage(), kv->page_data(0)), kv->geometry()};
  }
  if (recurrent != nullptr) {
    kernels::arena* conv_storage = recurrent->storage("conv");
    kernels::arena* ssm_storage = recurrent->storage("ssm");
    for (std::int64_t m = 0; m < config_.count(layer_kind::mamba2); ++m) {
      auto conv = recurrent->block("conv", m);
      auto ssm = recurrent->block("ssm", m);
      if (!conv || !ssm || conv_storage == nullptr || ssm_storage == nullptr)
        return make_error(errc::not_found, "recurrent pool lacks its blocks");
      conv_state_.push_back(reinterpret_cast<float*>(rebase(*conv_storage, conv->data)));
      ssm_state_.push_back(reinterpret_cast<float*>(rebase(*ssm_storage, ssm->data)));
    }
  }
  if (auto ok = backend_->load(shard_ ? shard_->local : config_, host_weights(),
                               kv ? kv->config().max_num_pages : 0);
      !ok) {
    return ok.error();
  }
  bound_ = true;
  return {};
}

step_request nemotron_h_model::declare(std::span<const step_row> rows) const {
  step_request req;
  std::vector<resources::segment> segments;
  segments.reserve(rows.size());
  for (const auto& r : rows) {
    segments.push_back({r.rid, "main", static_cast<std::int64_t>(r.tokens.size())});
  }
  if (config_.count(layer_kind::attention) > 0) {
    req.kv.emplace();
    req.kv->segments = segments;
  }
  if (config_.count(layer_kind::mamba2) > 0) {
    req.recurrent.emplace();
    req.recurrent->segments = std::move(segments);
  }
  return req;
}

result<forward_output> nemotron_h_model::forward(std::span<const step_row> rows,
                                                 const step_plans& plans,
                                                 std::span<const row_sampling> draws) {
  auto ticket = launch(rows, plans, draws, {});
  if (!ticket)
    return ticket.error();
  return finish(*ticket);
}

result<forward_output> nemotron_h_model::finish(std::uint64_t ticket) {
  forward_output out;
  const bool draw = draws_.empty() ? false : draws_.front().second;
  if (draws_.empty() || draws_.front().first != ticket) {
    return make_error(errc::invalid_argument,
                      fmt::format("nemotron_h: forward {} is not the oldest outstanding", ticket));
  }
  draws_.erase(draws_.begin());
  if (auto ok =
          backend_->finish(ticket, draw ? nullptr : &out.logits, draw ? &out.sampled : nullptr);
      !ok) {
    return ok.error();
  }
  return out;
}

result<std::uint64_t> nemotron_h_model::launch(std::span<const step_row> rows,
                                               const step_plans& plans,
                                               std::span<const row_sampling> draws,
                                               std::span<const std::int32_t> loopback) {
  if (!bound_)
    return make_error(errc::invalid_argument, "nemotron_h: forward before bind");
  nemotron_h_state state{nullptr, nullptr, kv_view_, conv_state_, ssm_state_};
  if (config_.count(layer_kind::attention) > 0) {
    if (!plans.kv)
      return make_error(errc::invalid_argument, "nemotron_h: step has no KV plan");
    const auto it = plans.kv->labels.find("main");
    if (it == plans.kv->labels.end()) {
      return make_error(errc::invalid_argument, "nemotron_h: KV plan has no 'main' label");
    }
    state.kv_plan = &it->second;
  }
  if (config_.count(layer_kind::mamba2) > 0) {
    if (!plans.recurrent) {
      return make_error(errc::invalid_argument, "nemotron_h: step has no recurrent plan");
    }
    auto a = plans.recurrent->addressing("main");
    if (!a)
      return a.error();
    state.rec = *a;
  }
  // The rows packed: token ids, cumulative counts, whether all feed one.
  ids_.clear();
  cu_.assign(1, 0);
  bool decode = true;
  for (const auto& r : rows) {
    if (r.tokens.empty()) {
      return make_error(errc::invalid_argument, fmt::format("row {} feeds no tokens", r.rid));
    }
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
  if (!draws.empty() && draws.size() != rows.size()) {
    return make_error(errc::invalid_argument,
                      fmt::format("nemotron_h: {} draws for {} rows", draws.size(), rows.size()));
  }
  const bool draw = !draws.empty();
  auto ticket = backend_->launch({ids_, cu_, decode}, state, !draw, draws, loopback);
  if (!ticket)
    return ticket.error();
  draws_.emplace_back(*ticket, draw);
  return *ticket;
}

result<std::unique_ptr<nemotron_h_model>> nemotron_h_model::random(nemotron_h_config config,
                                                                   std::uint64_t seed,
                                                                   const run_options& run) {
  if (auto ok = config.validate(); !ok)
    return ok.error();
  auto model = std::unique_ptr<nemotron_h_model>(new nemotron_h_model);
  if (auto ok = model->open_device(run); !ok)
    return ok.error();
  model->config_ = std::move(config);
  if (auto ok = model->join_group(run); !ok)
    return ok.error();
  const auto& c = model->config_;
  auto tok = byte_tokenizer::make(3, c.vocab_size);
  if (!tok)
    return tok.error();
  model->tokenizer_ = std::make_unique<byte_tokenizer>(std::move(*tok));
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> normal{0.0F, 0.02F};
  auto fill = [&](std::vector<float>& w, std::int64_t n) {
    w.resize(static_cast<std::size_t>(n));
    for (auto& x : w)
      x = normal(rng);
  };
  auto ones = [](std::vector<float>& w, std::int64_t n) {
    w.assign(static_cast<std::size_t>(n), 1.0F);
  };
  const std::int64_t hid = c.hidden_size, H = c.mamba_num_heads, di = c.d_inner();
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  fill(model->embeddings_, c.vocab_size * hid);
  fill(model->lm_head_, c.vocab_size * hid);
  ones(model->norm_f_, hid);
  std::int32_t counts[4] = {0, 0, 0, 0};
  for (const auto kind : c.layers) {
    nemotron_h_layer l;
    l.kind = kind;
    l.sub_index = counts[static_cast<int>(kind)]++;
    ones(l.norm, hid);
    if (kind == layer_kind::mamba2) {
      fill(l.in_proj, c.in_proj_size() * hid);
      fill(l.conv_w, c.conv_dim() * c.conv_kernel);
      if (c.use_conv_bias)
        fill(l.conv_b, c.conv_dim());
      ones(l.dt_bias, H);
      l.a_log.resize(static_cast<std::size_t>(H));
      for (std::int64_t h = 0; h < H; ++h)
        l.a_log[static_cast<std::size_t>(h)] = std::log(static_cast<float>(h + 1));
      ones(l.d, H);
      ones(l.gnorm, di);
      fill(l.out_proj, hid * di);
    } else if (kind == layer_kind::attention) {
      fill(l.q, qd * hid);
      fill(l.k, kvd * hid);
      fill(l.v, kvd * hid);
      fill(l.o, hid * qd);
    } else if (kind == layer_kind::mlp) {
      fill(l.up, c.intermediate_size * hid);
      fill(l.down, hid * c.intermediate_size);
    }
    model->keep_part(l);  // after drawing the whole layer: every rank draws the same numbers
    model->layers_.push_back(std::move(l));
  }
  if (model->shard_)
    model->lm_head_ = shard_lm_head(*model->shard_, c, model->lm_head_);
  const auto id = resources::fingerprint("random nemotron_h", seed, c.pattern(), hid);
  model->fingerprint_ = std::string(id.begin(), id.end());
  if (model->shard_)
    model->fingerprint_ += fmt::format(" tp {}/{}", model->shard_->rank, model->shard_->size);
  return model;
}

nemotron_h_model::~nemotron_h_model() = default;

result<void> nemotron_h_model::join_group(const run_options& run) {
  if (!run.tensor_parallel || run.tensor_parallel->size() == 1)
    return {};
  const auto& comm = *run.tensor_parallel;
  auto plan = plan_shard(config_, comm.rank(), comm.size());
  if (!plan)
    return plan.error();
  if (auto ok = backend_->set_tensor_parallel(
          {run.tensor_parallel.get(), plan->vocab.count, plan->vocab_chunk});
      !ok) {
    return ok.error();
  }
  shard_ = std::move(*plan);
  group_ = run.tensor_parallel;
  return {};
}

result<int> parse_device(const std::string& text) {
  if (text == "cpu")
    return -1;
  if (text == "cuda")
    return 0;
  if (text.starts_with("cuda:")) {
    const auto digits = text.substr(5);
    if (!digits.empty() && digits.size() < 4 &&
        std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return std::stoi(digits);
    }
  }
  return make_error(errc::invalid_argument,
                    fmt::format("device '{}' is not one of cpu, cuda, cuda:N", text));
}

result<void> nemotron_h_model::open_device(const run_options& run) {
  auto device = parse_device(run.device);
  if (!device)
    return device.error();
  if (*device < 0) {
    backend_ = std::make_unique<nemotron_h_cpu>();
    return {};
  }
  auto gpu = nemotron_h_cuda::make(*device, run.dtype, run.cuda_graphs);
  if (!gpu)
    return gpu.error();
  backend_ = std::move(*gpu);
  return {};
}

std::int64_t nemotron_h_model::num_parameters() const noexcept {
  auto n = static_cast<std::int64_t>(embeddings_.size() + norm_f_.size() +
                                     (lm_head_.data() == embeddings_.data() ? 0 : lm_head_.size()));
  for (const auto& l : layers_) {
    for (const auto* w : {&l.norm, &l.in_proj, &l.conv_w, &l.conv_b, &l.dt_bias, &l.a_log, &l.d,
                          &l.gnorm, &l.out_proj, &l.q, &l.k, &l.v, &l.o, &l.up, &l.down}) {
      n += static_cast<std::int64_t>(w->size());
    }
  }
  return n;
}

std::vector<std::pair<std::int64_t, std::int64_t>> nemotron_h_model::gemm_shapes() const {
  const auto& c = config_;
  const std::int64_t hid = c.hidden_size;
  const std::int64_t qd = c.num_attention_heads * c.head_dim;
  const std::int64_t kvd = c.num_key_value_heads * c.head_dim;
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto kind : c.layers) {
    if (kind == layer_kind::mamba2) {
      out.insert(out.end(), {{c.in_proj_size(), hid}, {hid, c.d_inner()}});
    } else if (kind == layer_kind::attention) {
      out.insert(out.end(), {{qd, hid}, {kvd, hid}, {kvd, hid}, {hid, qd}});
    } else if (kind == layer_kind::mlp) {
      out.insert(out.end(), {{c.intermediate_size, hid}, {hid, c.intermediate_size}});
    }
  }
  return out;
}

}  // namespace mstar::models
