#pragma once

// What the HTTP server does with a request, without the sockets: routing,
// the API key, the OpenAI bodies, the chat template, admission (429 past
// the queue limit) and the plain endpoints (/health, /v1/models, /metrics).
// The session (internal/session.hpp) does the I/O and the streaming; the
// fuzz target and the unit tests call `dispatch` directly.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "core/result.hpp"
#include "serve/api_error.hpp"
#include "serve/engine_port.hpp"
#include "serve/generation.hpp"
#include "serve/metrics.hpp"
#include "serve/openai_request.hpp"

namespace mstar::serve {

/// A finished answer: status, content type, body.
struct http_reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

/// Turns a chat request's messages into the prompt text (the model's chat
/// template); an error names what the template refused.
using chat_renderer = std::function<result<std::string>(const generation_request&)>;

struct service_options {
  std::string api_key;                 ///< empty: no key needed
  std::size_t max_outstanding = 1024;  ///< generations in the engine at once; more get 429
};

/// One HTTP request as the service sees it.
struct http_call {
  std::string_view method;  ///< "GET", "POST"...
  std::string_view target;  ///< "/v1/completions?x=y"
  std::string_view authorization;
  std::string_view body;
};

class service {
 public:
  /// `engine` may be null (the fuzz target): generations are then prepared
  /// but fail when run, and /metrics shows no engine gauges.
  service(engine_port* engine, served_model model, chat_renderer render, service_options options);

  /// Either a reply to send now, or a generation to run (admitted: call
  /// `finished` once it ends).
  using outcome = std::variant<http_reply, std::unique_ptr<generation>>;
  [[nodiscard]] outcome dispatch(const http_call& call);

  /// A generation admitted by `dispatch` ended (after its last delta).
  void finished(const generation& g);
  /// Counts an HTTP response in the metrics.
  void responded(int status) { metrics_.responded(status); }
  /// While draining, new work gets 503.
  void drain() noexcept { draining_ = true; }
  [[nodiscard]] bool draining() const noexcept { return draining_; }
  [[nodiscard]] std::size_t outstanding() const noexcept { return outstanding_; }

  [[nodiscard]] engine_port* engine() const noexcept { return engine_; }
  [[nodiscard]] const served_model& model() const noexcept { return model_; }

  /// An error reply.
  [[nodiscard]] static http_reply reply(const api_error& e);

 private:
  [[nodiscard]] outcome generate(endpoint kind, std::string_view body);
  [[nodiscard]] http_reply models_reply() const;
  [[nodiscard]] http_reply metrics_reply() const;
  [[nodiscard]] bool authorized(std::string_view header) const;

  engine_port* engine_;
  served_model model_;
  chat_renderer render_;
  service_options options_;
  metrics metrics_;
  std::atomic<std::size_t> outstanding_{0};
  std::atomic<bool> draining_{false};
  std::int64_t started_;
};

}  // namespace mstar::serve
