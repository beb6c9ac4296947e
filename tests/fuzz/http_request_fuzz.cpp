// libFuzzer target over what a client controls: the raw HTTP request (Beast's
// parser with the server's limits) and the service behind it (routing, the
// API key, the OpenAI body checks, the chat template, tokenization, the
// context checks), then the response shapes of an admitted generation fed a
// few deltas. The first byte picks the route a body goes to when the bytes
// are not a whole HTTP request, so plain JSON bodies get fuzzed too.
//
//   build-fuzz/tests/fuzz/mstar-fuzz-http -max_total_time=60 tests/fuzz/corpus
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "models/tokenizer.hpp"
#include "serve/service.hpp"

namespace {

namespace http = boost::beast::http;
using mstar::serve::endpoint;

// A stand-in for a template: every message's content, then the role of
// what comes next (templates are fuzzed by their own tests).
mstar::result<std::string> render(const mstar::serve::generation_request& r) {
  std::string out;
  for (const auto& m : r.messages)
    out += m.value("content", std::string{}) + "\n";
  return out + "assistant:";
}

mstar::serve::service& the_service() {
  static const auto tok = mstar::models::byte_tokenizer::make(3, 259).value();
  static mstar::serve::service svc{nullptr,
                                   {.name = "fuzz",
                                    .max_context = 512,
                                    .vocab_size = 259,
                                    .tok = &tok,
                                    .has_chat_template = true,
                                    .images = nullptr},
                                   render,
                                   {.api_key = "", .max_outstanding = 1U << 30U}};
  return svc;
}

void feed(mstar::serve::generation& g) {
  mstar::engine::delta d;
  d.id = g.request().prompts.size() == 1 ? g.id() : g.id() + "-0";
  d.tokens = {70, 71};
  d.text = "AB";
  d.chosen_logprobs = {{70, -0.5F}, {71, -1.5F}};
  d.top_logprobs = {{{70, -0.5F}, {72, -2.F}}, {{71, -1.5F}}};
  (void)g.on_delta(d);
  d.finished = mstar::engine::finish_reason::length;
  d.counts = {3, 2, 0};
  (void)g.on_delta(d);
  (void)g.body();
  (void)g.stream_tail();
}

void dispatch(const mstar::serve::http_call& call) {
  auto& svc = the_service();
  auto out = svc.dispatch(call);
  if (auto* g = std::get_if<std::unique_ptr<mstar::serve::generation>>(&out)) {
    feed(**g);
    svc.finished(**g);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::string_view bytes{reinterpret_cast<const char*>(data) + 1, size - 1};
  http::request_parser<http::string_body> parser;
  parser.header_limit(64 * 1024);
  parser.body_limit(1U << 20U);
  parser.eager(true);
  boost::beast::error_code ec;
  std::size_t used = 0;
  while (!ec && used < bytes.size() && !parser.is_done()) {
    const auto n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (n == 0 && !ec)
      break;
    used += n;
  }
  if (!ec && !parser.is_done() && parser.got_some())
    parser.put_eof(ec);  // the connection closing ends a body without a length
  if (!ec && parser.is_done()) {
    const auto& req = parser.get();
    auto view = [](boost::beast::string_view v) { return std::string_view{v.data(), v.size()}; };
    dispatch({view(req.method_string()), view(req.target()), view(req[http::field::authorization]),
              req.body()});
    return 0;
  }
  // Not an HTTP request: the bytes as a body of one of the routes.
  const char* routes[] = {"/v1/completions", "/v1/chat/completions", "/v1/models", "/metrics"};
  dispatch({"POST", routes[data[0] % 4], "", bytes});
  return 0;
}
