#pragma once

// One HTTP generation request as it comes back from the engine: the deltas
// of its engine requests (one per prompt, `n` samples each) folded into
// OpenAI choices, either as Server-Sent Events chunk by chunk or as one JSON
// body at the end. No I/O: the HTTP session feeds it deltas and writes what
// it returns; tests drive it with hand-made deltas.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.hpp"
#include "serve/api_error.hpp"
#include "serve/openai_request.hpp"

namespace mstar::serve {

/// Per-request timings the metrics and the request log read.
struct generation_timing {
  std::optional<double> ttft_s;       ///< first token of any choice
  std::vector<double> inter_token_s;  ///< gaps between deltas of one choice
  double e2e_s = 0;
};

class generation {
 public:
  using clock = std::chrono::steady_clock;

  /// `req` after `finish_prompts`; `id` is the response id ("cmpl-..." or
  /// "chatcmpl-..."); the engine requests are `to_specs(req, id)`.
  generation(generation_request req, std::string id, const models::tokenizer* tok,
             clock::time_point start = clock::now());

  /// Folds `d` in. Streaming: returns the SSE events to send now (possibly
  /// none); otherwise returns "".
  [[nodiscard]] std::string on_delta(const engine::delta& d);
  /// Whether every choice finished.
  [[nodiscard]] bool done() const noexcept { return unfinished_ == 0; }
  /// When the engine failed the request before any choice produced text:
  /// the error to answer with instead of a body.
  [[nodiscard]] std::optional<api_error> failure() const;
  /// The whole response body (non-streaming), once `done()`.
  [[nodiscard]] std::string body() const;
  /// The events after the last choice finished: the usage chunk (with
  /// `stream_options.include_usage`) and `data: [DONE]`.
  [[nodiscard]] std::string stream_tail() const;
  /// An error event for a stream that cannot go on, then `[DONE]`.
  [[nodiscard]] static std::string stream_error(const api_error& e);

  [[nodiscard]] const generation_request& request() const noexcept { return req_; }
  [[nodiscard]] const std::string& id() const noexcept { return id_; }
  [[nodiscard]] const engine::usage& usage() const noexcept { return usage_; }
  [[nodiscard]] const generation_timing& timing() const noexcept { return timing_; }
  /// The finish reason of choice 0 ("" until it finished).
  [[nodiscard]] std::string finish_reason() const;

 private:
  struct choice {
    std::string text;
    std::vector<engine::token_id> tokens;
    std::vector<engine::token_logprob> chosen;
    std::vector<std::vector<engine::token_logprob>> top;
    std::optional<engine::finish_reason> finished;
    std::string error;
    bool started = false;  ///< streamed its first chunk (chat: the role)
    std::optional<clock::time_point> last_delta;
  };

  [[nodiscard]] std::string chunk(std::size_t index, const engine::delta& d, choice& c);
  [[nodiscard]] std::string header_json() const;  // "id", "object", "created", "model" fields
  [[nodiscard]] std::string logprobs_json(std::span<const engine::token_logprob> chosen,
                                          std::span<const std::vector<engine::token_logprob>> top,
                                          std::size_t text_offset) const;
  [[nodiscard]] std::string usage_json() const;
  /// What `echo` puts before a choice's text: the prompt as sent or decoded.
  [[nodiscard]] std::string echo_text(const prompt_input& p) const;

  generation_request req_;
  std::string id_;
  const models::tokenizer* tok_;
  clock::time_point start_;
  std::int64_t created_;
  std::map<std::string, std::size_t> prompt_of_;  ///< engine request id -> prompt index
  std::vector<choice> choices_;                   ///< prompt-major, n per prompt
  std::size_t unfinished_;
  engine::usage usage_;
  generation_timing timing_;
};

/// "cmpl-" / "chatcmpl-" followed by 24 random hex digits.
[[nodiscard]] std::string make_response_id(endpoint kind);

}  // namespace mstar::serve
