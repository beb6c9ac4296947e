#pragma once

// Helpers of the server tests: a runtime over a fixture model behind a real
// mstar-serve HTTP server on a free loopback port, and a small blocking HTTP
// client (Boost.Beast) with a deadline on every call.

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <gtest/gtest.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "actors/runtime.hpp"
#include "launcher/common/chat.hpp"
#include "launcher/common/served.hpp"
#include "models/load.hpp"
#include "serve/http_server.hpp"
#include "serve/runtime_port.hpp"
#include "tests/support/model_fixtures.hpp"

namespace mstar::test {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;
using nlohmann::json;

struct served {
  std::unique_ptr<actors::runtime> rt;
  std::unique_ptr<serve::runtime_port> port;
  std::shared_ptr<serve::service> svc;
  std::unique_ptr<serve::http_server> server;

  [[nodiscard]] std::uint16_t http_port() const { return server->port(); }
  ~served() {
    if (server)
      server->stop();
    if (rt)
      rt->stop();
  }
};

struct serve_setup {
  std::string model = "nemotron_h_tiny_hybrid";
  engine::engine_config engine;
  serve::service_options service;
  serve::server_options http{.host = "127.0.0.1",
                             .port = 0,
                             .threads = 2,
                             .shutdown_grace = std::chrono::seconds(5),
                             .log_requests = false};
  std::int64_t max_context = 256;
  serve::chat_renderer render;
  /// Chat template and images from the model folder, as mstar-serve loads
  /// them (launcher/common), instead of `render`.
  bool folder_front_end = false;
};

/// A server over fixture `setup.model`, or null (the test has failed).
/// The default setup, built out of line: GCC 12 at -O3 warns (a false
/// maybe-uninitialized on a string in engine_config) about a braced
/// temporary `serve_setup{}` destroyed in the caller.
[[gnu::noinline]] inline serve_setup default_setup() {
  return serve_setup{};
}

inline std::unique_ptr<served> start_server(const serve_setup& setup) {
  auto s = std::make_unique<served>();
  auto model = models::load_causal_lm(model_dir(setup.model));
  EXPECT_TRUE(model.has_value()) << model.error().message();
  if (!model)
    return nullptr;
  serve::served_model m;
  m.name = setup.model;
  m.vocab_size = (*model)->vocab_size();
  m.tok = (*model)->tok();
  m.max_context = setup.max_context;
  auto render = setup.render;
  if (setup.folder_front_end) {
    render = launcher::load_chat(model_dir(setup.model).string(), (*model)->tok()).render;
    m.images = launcher::load_images(model_dir(setup.model).string(), **model).support;
    EXPECT_NE(m.images, nullptr);
  }
  m.has_chat_template = static_cast<bool>(render);
  auto rt = actors::runtime::start(std::move(*model), setup.engine);
  EXPECT_TRUE(rt.has_value()) << rt.error().message();
  if (!rt)
    return nullptr;
  s->rt = std::move(*rt);
  m.tok = s->rt->model().tok();
  s->port = std::make_unique<serve::runtime_port>(*s->rt);
  s->svc = std::make_shared<serve::service>(s->port.get(), m, render, setup.service);
  auto server = serve::http_server::start(s->svc, setup.http);
  EXPECT_TRUE(server.has_value()) << server.error().message();
  if (!server)
    return nullptr;
  s->server = std::move(*server);
  return s;
}

/// One keep-alive connection.
class client {
 public:
  explicit client(std::uint16_t port) : stream_(ioc_) {
    stream_.expires_after(std::chrono::seconds(60));
    stream_.connect(tcp::endpoint{net::ip::address_v4::loopback(), port});
  }

  http::response<http::string_body> call(http::verb method, const std::string& target,
                                         const std::string& body = {},
                                         const std::string& api_key = {}) {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    if (!api_key.empty())
      req.set(http::field::authorization, "Bearer " + api_key);
    req.keep_alive(true);
    req.prepare_payload();
    stream_.expires_after(std::chrono::seconds(60));
    http::write(stream_, req);
    http::response_parser<http::string_body> parser;
    parser.body_limit(64U << 20U);
    http::read(stream_, buffer_, parser);
    return parser.release();
  }

  http::response<http::string_body> post(const std::string& target, const json& body) {
    return call(http::verb::post, target, body.dump());
  }

  beast::tcp_stream& stream() { return stream_; }

 private:
  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

/// The value of metric line `name` (exact, labels included) in `text`, or -1.
inline double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos)
    return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

/// The `data:` payloads of an SSE body.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const auto end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

}  // namespace mstar::test
