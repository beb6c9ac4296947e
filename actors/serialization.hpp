#pragma once

// How a step's typed request and plans serialize with CAF's inspectors, so
// they can cross a process boundary as messages (the disaggregation issue
// sends them between nodes; in one process they travel by pointer, see
// protocol.hpp). A graph lease's static buffer pointers
// (`recurrent_addressing::graph_*`) are node-local and never serialized:
// the receiving pool plans its own.

#include <algorithm>
#include <caf/meta/type_name.hpp>
#include <caf/serializer.hpp>
#include <optional>

#include "engine/publication.hpp"
#include "engine/request.hpp"
#include "models/causal_lm.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"
#include "transport/checksum.hpp"
#include "transport/plan.hpp"

namespace mstar::resources {

/// An optional value as a presence flag and the value (serializers and
/// deserializers alike).
template <class Inspector, class T>
typename Inspector::result_type inspect_optional(Inspector& f, std::optional<T>& x) {
  bool has = x.has_value();
  T value = has ? *x : T{};
  if constexpr (Inspector::reads_state) {
    return f(has, value);
  } else {
    auto err = f(has, value);
    if (has) {
      x = std::move(value);
    } else {
      x.reset();
    }
    return err;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, segment& x) {
  return f(caf::meta::type_name("segment"), x.rid, x.label, x.span);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, retention_policy& x) {
  return f(caf::meta::type_name("retention_policy"), x.context_budget, x.protected_prefix);
}

/// An optional member as the inspectors see it (std::optional has no
/// inspect of its own in CAF 0.17).
template <class T>
struct optional_field {
  std::optional<T>* x;
};

template <class Inspector, class T>
typename Inspector::result_type inspect(Inspector& f, optional_field<T>& o) {
  return inspect_optional(f, *o.x);
}

template <class T>
optional_field<T> optional_of(std::optional<T>& x) {
  return {&x};
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_step& x) {
  auto rids = optional_of(x.fork_rids);
  return f(caf::meta::type_name("kv_step"), x.segments, x.commit, x.pre_forks, x.post_forks, rids,
           x.retention);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurrent_step& x) {
  auto rids = optional_of(x.fork_rids);
  return f(caf::meta::type_name("recurrent_step"), x.segments, x.pre_forks, x.post_forks, rids);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_label_plan& x) {
  return f(caf::meta::type_name("kv_label_plan"), x.rows, x.qo_indptr, x.kv_indptr, x.kv_indices,
           x.last_page_len, x.decode, x.decode_page, x.decode_offset);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_plan& x) {
  return f(caf::meta::type_name("kv_plan"), x.labels, x.pre_forks, x.post_forks);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurrent_addressing& x) {
  if constexpr (!Inspector::reads_state) {
    x.graph_slot_indices = nullptr;  // node-local: the receiver plans its own
    x.graph_has_state = nullptr;
  }
  return f(caf::meta::type_name("recurrent_addressing"), x.slot_indices, x.has_state, x.num_rows);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurrent_plan& x) {
  return f(caf::meta::type_name("recurrent_plan"), x.labels);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_key_chain& x) {
  return f(caf::meta::type_name("kv_key_chain"), x.keys, x.keyed_pages, x.unkeyed);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_end_page& x) {
  return f(caf::meta::type_name("kv_end_page"), x.slot, x.key, x.page);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_export& x) {
  auto chain = optional_of(x.chain);
  return f(caf::meta::type_name("kv_export"), x.stored_len, x.reset_generation, x.page_size,
           x.page_bytes, x.pages, x.root, x.page_keys, chain, x.ends);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, page_pair& x) {
  return f(caf::meta::type_name("page_pair"), x.local, x.remote);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_import& x) {
  return f(caf::meta::type_name("kv_import"), x.pages, x.fetch, x.adopted, x.end_fetch);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurrent_checkpoint& x) {
  return f(caf::meta::type_name("recurrent_checkpoint"), x.key, x.slot);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurrent_checkpoint_pair& x) {
  return f(caf::meta::type_name("recurrent_checkpoint_pair"), x.local, x.remote);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurrent_export& x) {
  return f(caf::meta::type_name("recurrent_export"), x.slot, x.has_state, x.generation,
           x.slot_bytes, x.checkpoints);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurrent_import& x) {
  return f(caf::meta::type_name("recurrent_import"), x.local_slot, x.remote_slot, x.checkpoints);
}

}  // namespace mstar::resources

namespace mstar::transport {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unit_checksum& x) {
  return f(caf::meta::type_name("unit_checksum"), x.unit, x.xxh3);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unit_pair& x) {
  return f(caf::meta::type_name("unit_pair"), x.src, x.dst);
}

}  // namespace mstar::transport

namespace mstar::models {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_request& x) {
  auto kv = resources::optional_of(x.kv);
  auto recurrent = resources::optional_of(x.recurrent);
  return f(caf::meta::type_name("step_request"), kv, recurrent);
}

/// An image's processor output travels whole with its request: a router
/// hands a request to nodes that each may run the vision tower (a decode
/// node whose adoption fails recomputes the prompt).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, image_input& x) {
  return f(caf::meta::type_name("image_input"), x.pixel_values, x.t, x.h, x.w);
}

}  // namespace mstar::models

namespace mstar::engine {

// A request and its deltas cross processes in a deployment (the router and
// the nodes); these are their wire forms.

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sampling_params& x) {
  return f(caf::meta::type_name("sampling_params"), x.temperature, x.top_k, x.top_p, x.seed,
           x.presence_penalty, x.frequency_penalty, x.repetition_penalty, x.n, x.logprobs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stop_rules& x) {
  return f(caf::meta::type_name("stop_rules"), x.max_tokens, x.ignore_eos, x.stop_token_ids,
           x.stop_strings);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, window_params& x) {
  return f(caf::meta::type_name("window_params"), x.window_units, x.context_units, x.overlap_units,
           x.tokens_per_unit);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefix_row& x) {
  return f(caf::meta::type_name("prefix_row"), x.length, x.advance, x.walk, x.digest, x.end_key);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefix_wire& x) {
  auto decode = resources::optional_of(x.decode);
  return f(caf::meta::type_name("prefix_wire"), x.keys, x.tail, x.layout, decode);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_spec& x) {
  auto text = resources::optional_of(x.text);
  auto window = resources::optional_of(x.window);
  auto prefix = resources::optional_of(x.prefix);
  return f(caf::meta::type_name("request_spec"), x.id, x.prompt, text, x.sampling, x.stop,
           x.generated, x.cache_salt, x.keep_logits, window, prefix, x.images);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_logprob& x) {
  return f(caf::meta::type_name("token_logprob"), x.id, x.logprob);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, usage& x) {
  return f(caf::meta::type_name("usage"), x.prompt_tokens, x.completion_tokens, x.cached_tokens,
           x.kv_pages_peak);
}

/// `finished` travels as 0 (still running) or 1 + the reason.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, delta& x) {
  std::uint8_t finished = x.finished ? 1 + static_cast<std::uint8_t>(*x.finished) : 0;
  if constexpr (Inspector::reads_state) {
    return f(caf::meta::type_name("delta"), x.id, x.index, x.tokens, x.text, x.chosen_logprobs,
             x.top_logprobs, x.logits, finished, x.error, x.counts, x.time_to_first_token_s);
  } else {
    auto err = f(caf::meta::type_name("delta"), x.id, x.index, x.tokens, x.text, x.chosen_logprobs,
                 x.top_logprobs, x.logits, finished, x.error, x.counts, x.time_to_first_token_s);
    constexpr auto last = 1 + static_cast<std::uint8_t>(finish_reason::error);
    if (finished == 0)
      x.finished.reset();
    else
      x.finished = static_cast<finish_reason>(std::min<std::uint8_t>(finished, last) - 1);
    return err;
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, published_stream& x) {
  auto kv = resources::optional_of(x.kv);
  auto recurrent = resources::optional_of(x.recurrent);
  return f(caf::meta::type_name("published_stream"), kv, recurrent);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, publication& x) {
  return f(caf::meta::type_name("publication"), x.streams);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, adopted_stream& x) {
  auto kv = resources::optional_of(x.kv);
  auto recurrent = resources::optional_of(x.recurrent);
  return f(caf::meta::type_name("adopted_stream"), kv, recurrent);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, adoption& x) {
  return f(caf::meta::type_name("adoption"), x.streams);
}

}  // namespace mstar::engine
