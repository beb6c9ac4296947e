#include "serve/service.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace mstar::serve {
namespace {

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Compares without an early exit, so the time taken does not reveal how
// much of a guessed key was right.
bool same_secret(std::string_view given, std::string_view key) {
  unsigned char diff = given.size() == key.size() ? 0 : 1;
  const auto n = std::min(given.size(), key.size());
  for (std::size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0 && !key.empty();
}

// One admission place: given back when it goes out of scope, unless a
// generation takes it over (then `service::finished` gives it back).
class admission_place {
 public:
  explicit admission_place(std::atomic<std::size_t>& outstanding) : outstanding_(&outstanding) {}
  admission_place(const admission_place&) = delete;
  admission_place& operator=(const admission_place&) = delete;
  ~admission_place() {
    if (outstanding_ != nullptr)
      --*outstanding_;
  }
  void hand_over() noexcept { outstanding_ = nullptr; }

 private:
  std::atomic<std::size_t>* outstanding_;
};

}  // namespace

service::service(engine_port* engine, served_model model, chat_renderer render,
                 service_options options)
    : engine_(engine),
      model_(std::move(model)),
      render_(std::move(render)),
      options_(std::move(options)),
      started_(unix_now()) {}

http_reply service::reply(const api_error& e) {
  return {e.status, "application/json", error_body(e)};
}

bool service::authorized(std::string_view header) const {
  if (options_.api_key.empty())
    return true;
  constexpr std::string_view bearer = "Bearer ";
  if (!header.starts_with(bearer))
    return false;
  return same_secret(header.substr(bearer.size()), options_.api_key);
}

service::outcome service::dispatch(const http_call& call) {
  auto path = call.target.substr(0, call.target.find('?'));
  while (path.size() > 1 && path.back() == '/')
    path.remove_suffix(1);
  const bool get = call.method == "GET" || call.method == "HEAD";
  const bool post = call.method == "POST";
  auto wrong_method = [&](const char* allowed) {
    return reply({405, fmt::format("{} {} is not allowed; use {}", call.method, path, allowed),
                  "invalid_request_error", "", "method_not_allowed"});
  };
  if (path == "/health") {
    if (!get)
      return wrong_method("GET");
    return draining_ ? reply({503, "the server is shutting down", "server_error", "", "draining"})
                     : http_reply{200, "text/plain", ""};
  }
  if (path == "/metrics") {
    if (!get)
      return wrong_method("GET");
    return metrics_reply();
  }
  if (!path.starts_with("/v1/")) {
    return reply({404, fmt::format("no route for {} {}", call.method, path),
                  "invalid_request_error", "", "not_found"});
  }
  if (!authorized(call.authorization)) {
    return reply({401, "a valid API key is required (Authorization: Bearer KEY)",
                  "authentication_error", "", "invalid_api_key"});
  }
  if (path == "/v1/models")
    return get ? outcome{models_reply()} : outcome{wrong_method("GET")};
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post)
      return wrong_method("POST");
    return generate(path == "/v1/completions" ? endpoint::completions : endpoint::chat, call.body);
  }
  return reply({404, fmt::format("no route for {} {}", call.method, path), "invalid_request_error",
                "", "not_found"});
}

service::outcome service::generate(endpoint kind, std::string_view body) {
  if (draining_)
    return reply({503, "the server is shutting down", "server_error", "", "draining"});
  auto req = parse_request(body, kind, model_);
  if (!req)
    return reply(req.error());
  // Admission: one place per generation; the engine queues within it. It
  // comes before the costly part (decoding images, the template, the
  // tokenizer), so a refused request costs the server only its parse.
  if (outstanding_.fetch_add(1) >= options_.max_outstanding) {
    --outstanding_;
    return reply({429,
                  fmt::format("the server is at its limit of {} outstanding requests; retry "
                              "later",
                              options_.max_outstanding),
                  "rate_limit_error", "", "queue_full"});
  }
  admission_place place{outstanding_};
  if (auto ok = read_images(*req, model_); !ok)
    return reply(ok.error());
  if (kind == endpoint::chat) {
    auto text = render_ ? render_(*req)
                        : result<std::string>{make_error(errc::invalid_argument, "no template")};
    if (!text) {
      return reply(bad_request(fmt::format("the chat template failed: {}", text.error().message()),
                               "messages", "chat_template_error"));
    }
    req->prompts = {{std::move(*text), {}}};
  }
  if (auto ok = finish_prompts(*req, model_); !ok)
    return reply(ok.error());
  auto id = make_response_id(kind);
  auto g = std::make_unique<generation>(std::move(*req), std::move(id), model_.tok);
  place.hand_over();
  return g;
}

void service::finished(const generation& g) {
  metrics_.finished(g);
  --outstanding_;
}

http_reply service::models_reply() const {
  nlohmann::json card{{"id", model_.name},   {"object", "model"},
                      {"created", started_}, {"owned_by", "mstar"},
                      {"root", model_.name}, {"max_model_len", model_.max_context}};
  nlohmann::json body{{"object", "list"}, {"data", nlohmann::json::array({card})}};
  return {200, "application/json", body.dump()};
}

http_reply service::metrics_reply() const {
  const auto gauges = engine_ != nullptr ? engine_->gauges() : std::nullopt;
  return {200, "text/plain; version=0.0.4; charset=utf-8",
          metrics_.render(gauges ? &*gauges : nullptr)};
}

}  // namespace mstar::serve
