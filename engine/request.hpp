#pragma once

// A request as the engine sees it: what to complete, how to sample, when to
// stop; and what it streams back, step by step. Plain values, CAF-free: the
// same structs are the actors' messages and the embedding API's types.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/image_input.hpp"
#include "resources/step/step.hpp"

namespace mstar::engine {

using resources::request_id;
using token_id = std::uint32_t;

/// How a request picks its tokens: the one sampling-parameters type (the
/// HTTP front end, `mstar-run` and the embedding API all fill it).
struct sampling_params {
  float temperature = 0.0F;  ///< 0: greedy
  std::int32_t top_k = 0;    ///< 0: all tokens
  float top_p = 1.0F;        ///< nucleus mass in (0, 1]
  std::uint64_t seed = 0;    ///< with the token index, fixes every draw
  /// OpenAI's additive penalties on logits of tokens already generated:
  /// `presence` once per distinct token, `frequency` per occurrence.
  float presence_penalty = 0.0F;
  float frequency_penalty = 0.0F;
  /// CTRL-style multiplicative penalty (> 1 discourages) on tokens of the
  /// prompt and of the output so far; 1 is off.
  float repetition_penalty = 1.0F;
  /// Parallel samples of one prompt (each its own sequence).
  std::int32_t n = 1;
  /// Top-n log-probabilities to report per generated token (0: none).
  std::int32_t logprobs = 0;

  /// Whether the draw needs the logits on the host (penalties or logprobs).
  [[nodiscard]] bool needs_logits() const noexcept {
    return presence_penalty != 0.0F || frequency_penalty != 0.0F || repetition_penalty != 1.0F ||
           logprobs > 0;
  }
};

/// When a sequence stops.
struct stop_rules {
  std::int32_t max_tokens = 16;
  bool ignore_eos = false;                ///< keep going past the model's eos ids
  std::vector<token_id> stop_token_ids;   ///< stop after generating one (it is returned)
  std::vector<std::string> stop_strings;  ///< stop at their first occurrence (not returned)
};

/// Windowed generation (seed 000's `WindowSchedule`): the output is made of
/// `units` of `tokens_per_unit` tokens, generated in windows of
/// `window_units` that start every `window_units - overlap_units` units.
/// When a window's last token is committed, the KV pool releases every
/// generated token older than the last `context_units` units (whole pages,
/// never the prompt), so the pages a request holds stay bounded however long
/// it generates. Attention then reads the prompt and the retained tokens at
/// their original positions; recurrent layers carry the whole history, as
/// they always do. `context_units` 0 keeps everything.
struct window_params {
  std::int64_t window_units = 0;
  std::int64_t context_units = 0;
  std::int64_t overlap_units = 0;
  std::int64_t tokens_per_unit = 1;
  friend bool operator==(const window_params&, const window_params&) = default;
};

/// One `prefix_layout` row as a Python preprocess stage sends it:
/// `[length, advance, walk, digest, end_key]`, digests in hex ("" for none).
struct prefix_row {
  std::uint64_t length = 0;
  std::uint64_t advance = 0;
  std::string walk;
  std::string digest;
  std::string end_key;
  friend bool operator==(const prefix_row&, const prefix_row&) = default;
};

/// The page keys a trusted preprocess stage computed for the prompt, in the
/// Python engine's wire form (reference §1.8): `prefix_keys` (one unrooted
/// key per page, a final partial page included, 64 hex digits each),
/// `prefix_tail` (the ids on that partial page), `prefix_layout` rows (none:
/// one ids span over the prompt) and `prefix_decode` (set: generated ids
/// key the pages they fill; unset: they key nothing). The pools use these
/// keys instead of keying the prompt's ids, so a front end that keys images
/// (an item row over each image's placeholder slots) or another layout
/// feeds this engine. Only trusted callers set it (the
/// embedding API, a deployment's own front end): the HTTP API never reads
/// it from a body, since a client could name another tenant's pages.
struct prefix_wire {
  std::vector<std::string> keys;
  std::vector<token_id> tail;
  std::vector<prefix_row> layout;
  std::optional<std::string> decode;
  friend bool operator==(const prefix_wire&, const prefix_wire&) = default;
};

/// One request to complete.
struct request_spec {
  request_id id;  ///< empty: the engine names it
  std::vector<token_id> prompt;
  /// Set instead of `prompt`: tokenized by the preprocess stage.
  std::optional<std::string> text;
  sampling_params sampling;
  stop_rules stop;
  /// Output already generated elsewhere (a prefill node's first token, or
  /// the tokens a failed node streamed before a re-route): the sequence
  /// continues after them as if it had drawn them itself; they count toward
  /// `max_tokens`, penalties and stop strings and are not streamed again.
  std::vector<token_id> generated;
  std::string cache_salt;    ///< a tenant's salt: only same-salt requests share cached pages
  bool keep_logits = false;  ///< report the logits row that chose each token (tests, mstar-run)
  /// Windowed generation with a bounded KV cache; unset: the whole history.
  std::optional<window_params> window;
  /// Page keys from a trusted preprocess stage (see `prefix_wire`).
  std::optional<prefix_wire> prefix;
  /// The prompt's images in order, as the model's image processor made them;
  /// each takes one run of the model's image placeholder tokens in `prompt`
  /// (the model checks at submit). Page keys name each image on the pages
  /// it touches (engine/prompt_layout.hpp): those pages are shared only
  /// with the same image in the same place, pages before it with any prompt
  /// with the same ids there. The local engine and the actor runtime serve
  /// them (a deployment sends them to each node it uses).
  std::vector<models::image_input> images;
};

/// Why a sequence ended.
enum class finish_reason : std::uint8_t { length, stop, eos, cancelled, error };

/// "length", "stop" (eos and stop rules both read "stop", as OpenAI does)...
[[nodiscard]] constexpr const char* to_string(finish_reason r) noexcept {
  switch (r) {
    case finish_reason::length:
      return "length";
    case finish_reason::stop:
    case finish_reason::eos:
      return "stop";
    case finish_reason::cancelled:
      return "cancelled";
    case finish_reason::error:
      return "error";
  }
  return "error";
}

/// One alternative and its log-probability.
struct token_logprob {
  token_id id = 0;
  float logprob = 0;
};

/// Token counts of a sequence.
struct usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_tokens = 0;  ///< prompt tokens served from cached pages
  /// The most KV pages the sequence held at once, over every label (the
  /// pages its steps addressed; shared cached pages count).
  std::int64_t kv_pages_peak = 0;
};

/// What one step produced for one sequence of a request.
struct delta {
  request_id id;
  std::int32_t index = 0;        ///< which of the `n` samples
  std::vector<token_id> tokens;  ///< new token ids
  /// Text of the new tokens: never splits a UTF-8 sequence, never shows a
  /// prefix of a stop string that may still complete.
  std::string text;
  /// Per new token: its log-probability and the top alternatives (with
  /// `sampling.logprobs`).
  std::vector<token_logprob> chosen_logprobs;
  std::vector<std::vector<token_logprob>> top_logprobs;
  /// With `keep_logits`: the logits row of each new token.
  std::vector<std::vector<float>> logits;
  std::optional<finish_reason> finished;
  std::string error;  ///< with finish_reason::error: what went wrong
  usage counts;
  double time_to_first_token_s = 0;  ///< set on the delta carrying the first token
};

}  // namespace mstar::engine
