// mstar-serve's HTTP server end to end over real sockets: a runtime over the
// fixture models, the server on a free loopback port, a Beast client.
// Greedy tokens are checked against transformers' (the fixtures), errors
// against the OpenAI error shape, and the pools against /metrics.
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <list>
#include <mutex>
#include <thread>

#include "tests/serve/serve_support.hpp"

namespace mstar::test {
namespace {

json body_of(const http::response<http::string_body>& r) {
  auto j = json::parse(r.body(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.body();
  return j;
}

void expect_error(const http::response<http::string_body>& r, int status,
                  const std::string& param) {
  EXPECT_EQ(r.result_int(), status) << r.body();
  const auto j = body_of(r);
  ASSERT_TRUE(j.contains("error")) << r.body();
  const auto& e = j["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param") && e.contains("code"));
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r.body();
  }
}

// Polls /metrics until `ok` holds (at most ~10 s).
template <class Pred>
bool metrics_reach(std::uint16_t port, Pred ok) {
  for (int i = 0; i < 1000; ++i) {
    client c{port};
    if (ok(c.call(http::verb::get, "/metrics").body()))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A streamed completion on a raw socket, read up to its first event; the
// socket closes (the client hangs up mid-stream) when this goes.
struct open_stream {
  net::io_context ioc;
  tcp::socket sock{ioc};
  std::string head;  ///< what arrived up to the first "data: "

  open_stream(std::uint16_t port, const json& prompt, int max_tokens) {
    sock.connect(tcp::endpoint{net::ip::address_v4::loopback(), port});
    const auto body = json{
        {"prompt", prompt},
        {"max_tokens", max_tokens},
        {"ignore_eos", true},
        {"stream", true}}.dump();
    const auto req =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    net::write(sock, net::buffer(req));
    net::read_until(sock, net::dynamic_buffer(head), "data: ");
  }
};

TEST(http_server, serves_transformers_greedy_tokens_on_one_keep_alive_connection) {
  const auto expected = load_expected("nemotron_h_tiny_hybrid");
  auto s = start_server(default_setup());
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  for (const auto& p : expected) {
    const auto r = c.post("/v1/completions", {{"prompt", p.prompt},
                                              {"max_tokens", p.generated.size()},
                                              {"temperature", 0},
                                              {"ignore_eos", true},
                                              {"return_token_ids", true}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_TRUE(r.keep_alive());
    const auto j = body_of(r);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<std::uint32_t>>(), p.generated);
    EXPECT_EQ(j["prompt_token_ids"].get<std::vector<std::uint32_t>>(), p.prompt);
    EXPECT_EQ(j["usage"]["prompt_tokens"], p.prompt.size());
    EXPECT_EQ(j["usage"]["completion_tokens"], p.generated.size());
    EXPECT_EQ(j["usage"]["total_tokens"], p.prompt.size() + p.generated.size());
    EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  }
  EXPECT_TRUE(c.call(http::verb::get, "/health").result_int() == 200);
  const auto models = body_of(c.call(http::verb::get, "/v1/models"));
  EXPECT_EQ(models["data"][0]["id"], "nemotron_h_tiny_hybrid");
}

TEST(http_server, streams_server_sent_events_that_add_up_to_the_plain_answer) {
  const auto expected = load_expected("nemotron_h_tiny_hybrid");
  auto s = start_server(default_setup());
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  const auto& p = expected[0];
  const auto r = c.post("/v1/completions", {{"prompt", p.prompt},
                                            {"max_tokens", p.generated.size()},
                                            {"temperature", 0},
                                            {"ignore_eos", true},
                                            {"stream", true},
                                            {"return_token_ids", true},
                                            {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.result_int(), 200);
  EXPECT_EQ(r[http::field::content_type], "text/event-stream");
  EXPECT_TRUE(r.chunked());
  const auto events = sse_events(r.body());
  ASSERT_GE(events.size(), 3U);
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<std::uint32_t> ids;
  std::string finish;
  for (std::size_t i = 0; i + 2 < events.size(); ++i) {
    const auto j = json::parse(events[i]);
    EXPECT_TRUE(j["usage"].is_null());
    for (const auto& id : j["choices"][0]["token_ids"])
      ids.push_back(id.get<std::uint32_t>());
    if (!j["choices"][0]["finish_reason"].is_null())
      finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(ids, p.generated);
  EXPECT_EQ(finish, "length");
  const auto usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], p.generated.size());
  // The connection stays usable after a stream.
  EXPECT_EQ(c.call(http::verb::get, "/health").result_int(), 200);
}

TEST(http_server, answers_several_prompts_and_n_samples_with_indexed_choices) {
  auto s = start_server(default_setup());
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  const auto r = c.post("/v1/completions",
                        {{"prompt", json::array({json::array({5, 6, 7}), json::array({8, 9})})},
                         {"max_tokens", 4},
                         {"n", 3},
                         {"temperature", 1.0},
                         {"seed", 7},
                         {"ignore_eos", true}});
  ASSERT_EQ(r.result_int(), 200) << r.body();
  const auto j = body_of(r);
  ASSERT_EQ(j["choices"].size(), 6U);
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 24);
}

TEST(http_server, refuses_bad_requests_with_the_openai_error_shape) {
  serve_setup setup;
  setup.service.api_key = "sesame";
  auto s = start_server(setup);
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  auto post = [&](const std::string& body, const std::string& key = "sesame") {
    return c.call(http::verb::post, "/v1/completions", body, key);
  };
  expect_error(post(R"({"prompt":[1,2],"max_tokens":2})", ""), 401, "");
  expect_error(post(R"({"prompt":[1,2],"max_tokens":2})", "wrong"), 401, "");
  expect_error(post(R"({"prompt":[1,2],)"), 400, "");
  expect_error(post(R"([1,2])"), 400, "");
  expect_error(post(R"({"prompt":[1,2],"max_tokens":"x"})"), 400, "max_tokens");
  expect_error(post(R"({"prompt":[1,2],"temperature":-1})"), 400, "temperature");
  expect_error(post(R"({"prompt":[1,2],"model":"gpt-4"})"), 400, "model");
  expect_error(post(R"({"prompt":""})"), 400, "prompt");
  expect_error(post(R"({"prompt":[]})"), 400, "prompt");
  expect_error(post(R"({"prompt":[1,99999]})"), 400, "prompt");
  expect_error(post(R"({"max_tokens":2})"), 400, "prompt");
  expect_error(post(R"({"prompt":[1,2],"max_tokens":255})"), 400, "max_tokens");
  expect_error(post(json{{"prompt", std::vector<int>(256, 5)}}.dump()), 400, "prompt");
  expect_error(post(R"({"prompt":[1,2],"logit_bias":{"5":3}})"), 400, "logit_bias");
  expect_error(post(R"({"prompt":[1,2],"n":0})"), 400, "n");
  expect_error(post(R"({"prompt":[1,2],"stop":[3]})"), 400, "stop");
  expect_error(post(std::string(100, '[') + std::string(100, ']')), 400, "");
  expect_error(c.call(http::verb::get, "/v1/completions", "", "sesame"), 405, "");
  expect_error(c.call(http::verb::get, "/v2/nothing", "", "sesame"), 404, "");
  // The key guards /v1 only: health and metrics stay open to probes.
  EXPECT_EQ(c.call(http::verb::get, "/health").result_int(), 200);
  const auto m = c.call(http::verb::get, "/metrics").body();
  EXPECT_EQ(metric(m, R"(mstar:http_responses_total{code="401"})"), 2);
}

TEST(http_server, mstar_window_generates_past_the_context_in_bounded_pages) {
  auto s = start_server(default_setup());  // a context of 256, pages of 16
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  const json window{{"window_units", 4}, {"context_units", 4}, {"tokens_per_unit", 4}};
  const auto r = c.post("/v1/completions", {{"prompt", std::vector<int>{5, 17, 33}},
                                            {"max_tokens", 600},
                                            {"temperature", 0},
                                            {"ignore_eos", true},
                                            {"mstar_window", window}});
  ASSERT_EQ(r.result_int(), 200) << r.body();
  const auto j = body_of(r);
  EXPECT_EQ(j["usage"]["completion_tokens"], 600);
  // The prompt's page, 16 tokens of context and a window of 16: at most 4
  // pages at once (the unwindowed run would need 38).
  const auto peak = j["usage"]["kv_pages_peak"].get<int>();
  EXPECT_GT(peak, 0);
  EXPECT_LE(peak, 4);
  // Unwindowed, the same request is over the context.
  expect_error(
      c.call(http::verb::post, "/v1/completions", R"({"prompt":[5,17,33],"max_tokens":600})"), 400,
      "max_tokens");
  auto post = [&](const std::string& w) {
    return c.call(http::verb::post, "/v1/completions",
                  R"({"prompt":[5,17,33],"max_tokens":600,"mstar_window":)" + w + "}");
  };
  expect_error(post("3"), 400, "mstar_window");
  expect_error(post(R"({"context_units":2})"), 400, "mstar_window.window_units");
  expect_error(post(R"({"window_units":2,"overlap_units":2})"), 400, "mstar_window.overlap_units");
  expect_error(post(R"({"window_units":2,"tokens_per_unit":0})"), 400,
               "mstar_window.tokens_per_unit");
  expect_error(post(R"({"window_units":2,"colour":1})"), 400, "mstar_window.colour");
  expect_error(post(R"({"window_units":40,"context_units":40,"tokens_per_unit":4})"), 400,
               "mstar_window");
}

TEST(http_server, refuses_a_body_over_the_limit_with_413) {
  serve_setup setup;
  setup.http.max_body_bytes = 4096;
  auto s = start_server(setup);
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  const auto big = json{{"prompt", std::string(8000, 'a')}}.dump();
  expect_error(c.call(http::verb::post, "/v1/completions", big), 413, "");
}

// A long stream holds the one admission slot; the next request gets 429.
TEST(http_server, answers_429_past_the_queue_limit) {
  serve_setup setup;
  setup.service.max_outstanding = 1;
  setup.max_context = 4096;
  auto s = start_server(setup);
  ASSERT_NE(s, nullptr);
  {
    // A streamed request holds the only place until its client hangs up
    // (waiting for 3,000 tokens took past the client's 60 s under ASan on a
    // loaded machine).
    const open_stream first{s->http_port(), {1, 2}, 3000};
    ASSERT_TRUE(metrics_reach(s->http_port(), [](const std::string& m) {
      return metric(m, "mstar:num_requests_running") == 1;
    }));
    client second{s->http_port()};
    expect_error(second.post("/v1/completions", {{"prompt", {1, 2}}, {"max_tokens", 2}}), 429, "");
  }  // hangs up: the request is cancelled within a step
  ASSERT_TRUE(metrics_reach(s->http_port(), [](const std::string& m) {
    return metric(m, "mstar:num_requests_running") == 0;
  }));
  client third{s->http_port()};
  EXPECT_EQ(third.post("/v1/completions", {{"prompt", {1, 2}}, {"max_tokens", 2}}).result_int(),
            200);
}

// The client reads one event and hangs up: the request is cancelled and its
// page and slot come back, as /metrics shows.
TEST(http_server, a_client_that_disconnects_mid_stream_cancels_and_frees_its_pages_and_slot) {
  serve_setup setup;
  setup.max_context = 4096;
  auto s = start_server(setup);
  ASSERT_NE(s, nullptr);
  {
    const open_stream stream{s->http_port(), {1, 2, 3}, 4000};
    EXPECT_NE(stream.head.find("text/event-stream"), std::string::npos);
    ASSERT_TRUE(metrics_reach(s->http_port(), [](const std::string& m) {
      return metric(m, "mstar:kv_pages_used") > 0 && metric(m, "mstar:recurrent_slots_used") == 1;
    }));
  }  // closes the socket mid-stream
  EXPECT_TRUE(metrics_reach(s->http_port(), [](const std::string& m) {
    return metric(m, R"(mstar:request_success_total{finished_reason="abort"})") == 1 &&
           metric(m, "mstar:kv_pages_used") == 0 && metric(m, "mstar:recurrent_slots_used") == 0 &&
           metric(m, "mstar:num_requests_running") == 0;
  }));
  EXPECT_LT(metric(client{s->http_port()}.call(http::verb::get, "/metrics").body(),
                   "mstar:generation_tokens_total"),
            4000);
  auto ok = s->rt->check_pools();
  EXPECT_TRUE(ok.has_value()) << ok.error().message();
}

// Same prompt under two salts: the second tenant gets nothing from the
// first's pages; the same salt again reuses them.
TEST(http_server, cache_salt_separates_tenants_in_the_prefix_cache) {
  serve_setup setup;
  setup.model = "nemotron_h_tiny_attn";
  setup.engine.pools.page_size = 4;
  auto s = start_server(setup);
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  std::vector<int> prompt(20);
  for (int i = 0; i < 20; ++i)
    prompt[i] = 3 + i;
  auto cached = [&](const std::string& salt) {
    json body{{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}};
    if (!salt.empty())
      body["cache_salt"] = salt;
    const auto r = c.post("/v1/completions", body);
    EXPECT_EQ(r.result_int(), 200) << r.body();
    return body_of(r)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached("tenant-a"), 0);
  EXPECT_EQ(cached("tenant-b"), 0);
  EXPECT_EQ(cached(""), 0);
  EXPECT_GT(cached("tenant-a"), 0);
  EXPECT_GT(cached(""), 0);
  const auto m = c.call(http::verb::get, "/metrics").body();
  EXPECT_GT(metric(m, "mstar:prefix_cache_hits_total"), 0);
  EXPECT_EQ(metric(m, "mstar:prefix_cache_queries_total"), 100);
}

// stop() while a stream runs: no new connections, the stream finishes
// inside the grace period, stop returns. The stream has sent its first event
// before stop() (polling /metrics for a running request raced a short stream
// on a loaded machine: stop 53's CI).
TEST(http_server, stops_gracefully_letting_an_in_flight_stream_finish) {
  serve_setup setup;
  setup.max_context = 4096;
  auto s = start_server(setup);
  ASSERT_NE(s, nullptr);
  const auto port = s->http_port();
  open_stream stream{port, {1, 2}, 200};
  auto stopped = std::async(std::launch::async, [&] { s->server->stop(); });
  std::string rest = stream.head;
  beast::error_code read_ec;
  net::read_until(stream.sock, net::dynamic_buffer(rest), "data: [DONE]", read_ec);
  ASSERT_FALSE(read_ec) << read_ec.message() << "\n" << rest;
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_NE(rest.find("HTTP/1.1 200"), std::string::npos) << rest.substr(0, 200);
  const auto finish = rest.rfind("\"finish_reason\":");
  ASSERT_NE(finish, std::string::npos);
  const std::string length = "\"finish_reason\":\"length\"";
  EXPECT_EQ(rest.compare(finish, length.size(), length), 0) << rest.substr(finish, 40);
  net::io_context ioc;
  tcp::socket sock{ioc};
  beast::error_code ec;
  sock.connect(tcp::endpoint{net::ip::address_v4::loopback(), port}, ec);
  EXPECT_TRUE(ec) << "the listener is closed";
}

// An engine that answers each request at once, on a thread of its own, with
// one token and its end, and keeps the request's callback (and with it the
// connection's session) until release(), which drops them on a thread of
// its own: a deployment's router that lets a finished request go late.
class late_release_port final : public serve::engine_port {
 public:
  ~late_release_port() override {
    for (auto& t : threads_)
      t.join();
  }

  void submit(engine::request_spec spec,
              std::function<void(const engine::delta&)> on_delta) override {
    const std::lock_guard lock{mutex_};
    held_.push_back(std::move(on_delta));
    threads_.emplace_back([id = spec.id, prompt = spec.prompt.size(), cb = &held_.back()] {
      engine::delta d;
      d.id = id;
      d.tokens = {1};
      d.text = "x";
      d.finished = engine::finish_reason::length;
      d.counts.prompt_tokens = static_cast<std::int64_t>(prompt);
      d.counts.completion_tokens = 1;
      (*cb)(d);
    });
  }
  void cancel(const engine::request_id& /*id*/) override {}
  std::optional<serve::engine_gauges> gauges() override { return serve::engine_gauges{}; }

  // Drops every callback held, on a new thread; returns when it has.
  void release() {
    std::list<std::function<void(const engine::delta&)>> out;
    {
      const std::lock_guard lock{mutex_};
      for (auto& t : threads_)
        t.join();
      threads_.clear();
      out.swap(held_);
    }
    std::thread{[out = std::move(out)]() mutable { out.clear(); }}.join();
  }

 private:
  std::mutex mutex_;
  std::list<std::function<void(const engine::delta&)>> held_;
  std::vector<std::thread> threads_;
};

// stop() returns only once every session is gone, destructor included: here
// the last reference to a finished request's session is the engine's
// callback, dropped on another thread after stop() began (CI's
// AddressSanitizer report in launcher.pd_processes.pd-images came from a
// session destroyed there after stop() had destroyed the io_context).
TEST(http_server, stop_waits_for_sessions_an_engine_lets_go_late) {
  auto model = models::load_causal_lm(model_dir("nemotron_h_tiny_hybrid"));
  ASSERT_TRUE(model.has_value()) << model.error().message();
  serve::served_model m;
  m.name = "late";
  m.vocab_size = (*model)->vocab_size();
  m.tok = (*model)->tok();
  m.max_context = 256;
  late_release_port engine;
  auto svc = std::make_shared<serve::service>(&engine, m, serve::chat_renderer{},
                                              serve::service_options{});
  serve::server_options options{.host = "127.0.0.1",
                                .port = 0,
                                .threads = 2,
                                .shutdown_grace = std::chrono::seconds(5),
                                .log_requests = false};
  auto server = serve::http_server::start(svc, options);
  ASSERT_TRUE(server.has_value()) << server.error().message();
  {
    client c{(*server)->port()};
    const auto r = c.post("/v1/completions", {{"prompt", {1, 2}}, {"max_tokens", 1}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
  }  // the client hangs up: only the engine's callback holds the session now
  auto stopped = std::async(std::launch::async, [&] { (*server)->stop(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "stop() returned while an engine still held a session";
  engine.release();
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  stopped.get();
  server->reset();
}

}  // namespace
}  // namespace mstar::test
