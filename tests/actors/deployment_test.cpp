// A deployment's router over node actors in one process (the routing, not
// the wire: tests/launcher/ runs nodes as processes): prefill on one node
// and decode on another gives the tokens of one engine alone, for the
// attention-only and the hybrid fixture; `both` nodes take whole requests;
// a node that leaves mid-request has its requests re-routed (resumed after
// what the client already has, never repeating a token) or failed naming
// it; cancellation reaches the node that runs the request.
#include "actors/deployment.hpp"

#include <caf/all.hpp>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <gtest/gtest.h>
#include <mutex>
#include <thread>

#include "tests/actors/handle_support.hpp"
#include "tests/actors/nodes_support.hpp"
#include "tests/engine/engine_support.hpp"

namespace mstar::actors {
namespace {

using engine::finish_reason;
using engine::token_id;

constexpr auto deadline = std::chrono::seconds(60);

using mstar::test::nodes_fixture;
using mstar::test::read_all;
using mstar::test::tokens_of;

/// One request's deltas as they arrive (on an actor thread), with bounded
/// waits.
struct streamed {
  std::vector<engine::delta> ds;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::size_t seen = 0;

  std::function<void(const engine::delta&)> sink() {
    return [this](const engine::delta& x) {
      std::lock_guard lock{m};
      ds.push_back(x);
      seen += x.tokens.size();
      done = done || x.finished.has_value();
      cv.notify_all();
    };
  }
  /// Whether `n` tokens (or the end) came within the deadline.
  bool wait_for_tokens(std::size_t n) {
    std::unique_lock lock{m};
    return cv.wait_for(lock, deadline, [&] { return seen >= n || done; });
  }
  /// Whether the request ended within the deadline.
  bool wait_done() {
    std::unique_lock lock{m};
    return cv.wait_for(lock, deadline, [&] { return done; });
  }
};

std::vector<token_id> prompt_of(int len, token_id start) {
  std::vector<token_id> p;
  for (int i = 0; i < len; ++i)
    p.push_back(start + static_cast<token_id>(i * 13 % 150));
  return p;
}

// The tokens of each request on one engine alone.
std::vector<std::vector<token_id>> alone(const std::string& model,
                                         const std::vector<engine::request_spec>& specs) {
  auto m = models::nemotron_h_model::load(test::model_dir(model));
  auto rt = runtime::start(std::move(*m), {});
  EXPECT_TRUE(rt.has_value());
  std::vector<std::vector<token_id>> out;
  for (const auto& c : complete(**rt, specs))
    out.push_back(c.tokens.at(0));
  return out;
}

class pd_split : public testing::TestWithParam<std::string> {};

TEST_P(pd_split, prefill_and_decode_on_two_nodes_give_the_tokens_of_one_engine) {
  std::vector<engine::request_spec> specs;
  for (int i = 0; i < 6; ++i)
    specs.push_back(test::greedy_request(prompt_of(5 + 7 * i, 20 + i), 9));
  const auto expected = alone(GetParam(), specs);
  nodes_fixture f{GetParam()};
  f.add("prefill-0", "prefill");
  f.add("decode-0", "decode");
  auto& d = f.dep();
  std::vector<request_handle> hs;
  for (const auto& s : specs)
    hs.push_back(d.submit(s));
  for (std::size_t i = 0; i < hs.size(); ++i) {
    const auto ds = read_all(hs[i]);
    EXPECT_EQ(tokens_of(ds), expected[i]) << "request " << i;
    ASSERT_FALSE(ds.empty());
    EXPECT_EQ(ds.back().finished, finish_reason::length);
    EXPECT_EQ(ds.back().counts.prompt_tokens, static_cast<std::int64_t>(specs[i].prompt.size()));
    EXPECT_EQ(ds.back().counts.completion_tokens, 9);
  }
  auto s = d.stats();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->handoffs, 6);
  EXPECT_EQ(s->reroutes, 0);
  EXPECT_EQ(s->in_flight, 0);
  // The prefill node drew one token per request, the decode node the rest.
  auto pre = f.rt(0).stats();
  auto dec = f.rt(1).stats();
  ASSERT_TRUE(pre && dec);
  EXPECT_EQ(pre->generated_tokens, 6);
  EXPECT_EQ(dec->generated_tokens, 6 * 8);
  f.expect_pools_empty();
}

TEST_P(pd_split, the_decode_node_adopts_the_prefill_nodes_pages_and_slots_over_ucx) {
  std::vector<engine::request_spec> specs;
  for (int i = 0; i < 4; ++i)
    specs.push_back(test::greedy_request(prompt_of(9 + 11 * i, 30 + i), 8));
  const auto expected = alone(GetParam(), specs);
  nodes_fixture f{GetParam()};
  f.add("prefill-0", "prefill", {}, true);
  f.add("decode-0", "decode", {}, true);
  auto& d = f.dep();
  for (std::size_t i = 0; i < specs.size(); ++i) {  // one at a time: each adopts
    auto h = d.submit(specs[i]);
    const auto ds = read_all(h);
    EXPECT_EQ(tokens_of(ds), expected[i]) << "request " << i;
    ASSERT_FALSE(ds.empty());
    EXPECT_EQ(ds.back().finished, finish_reason::length);
  }
  auto s = d.stats();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->handoffs, 4);
  EXPECT_EQ(s->adopted, 4);  // no recompute: every prompt moved
  // The decode node computed no prompt: one token per request past it.
  auto dec = f.rt(1).stats();
  ASSERT_TRUE(dec.has_value());
  EXPECT_EQ(dec->generated_tokens, 4 * 7);
  // What moved, as /metrics reports it.
  auto n = d.node_stats();
  ASSERT_TRUE(n.has_value());
  const bool hybrid = std::string(GetParam()).find("hybrid") != std::string::npos;
  EXPECT_EQ(n->transfers.pulls, 4);
  EXPECT_EQ(n->transfers.failed, 0);
  EXPECT_EQ(n->transfers.mapped_pulls, 0);  // UCX over loopback TCP here
  EXPECT_GT(n->transfers.pages_fetched, 0);
  EXPECT_EQ(n->transfers.pages_local, 0);
  EXPECT_EQ(n->transfers.slots_fetched, hybrid ? 4 : 0);
  EXPECT_GT(n->transfers.bytes, 0);
  EXPECT_GT(n->transfers.micros, 0);
  // The same prompt again: the decode node still caches its full pages, so
  // it adopts those locally and reads only the rest (a hybrid model too:
  // its recurrent slot moves whole, the state at the prompt's end).
  {
    auto h = d.submit(specs[3]);
    EXPECT_EQ(tokens_of(read_all(h)), expected[3]) << "the repeated request";
    auto again = d.node_stats();
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->transfers.pulls, 5);
    // 42 prompt tokens: 3 pages at 16, of which the 2 full ones are cached.
    EXPECT_EQ(again->transfers.pages_local, 2);
    EXPECT_EQ(again->transfers.pages_fetched - n->transfers.pages_fetched, 1);
  }
  // The prefill node let go of what it published (the router said so).
  for (int i = 0; i < 100; ++i) {
    auto pre = f.rt(0).stats();
    ASSERT_TRUE(pre.has_value());
    if (pre->kv_free_pages + pre->kv_cached_pages == pre->kv_pages - 1 &&
        pre->free_slots == pre->slots - (pre->slots > 0 ? 1 : 0))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  f.expect_pools_empty();
}

TEST_P(pd_split, a_page_corrupted_in_flight_is_caught_and_the_prompt_recomputed) {
  const auto spec = test::greedy_request(prompt_of(21, 40), 8);
  const auto expected = alone(GetParam(), {spec});
  nodes_fixture f{GetParam()};
  f.add("prefill-0", "prefill", {}, true);
  f.add("decode-0", "decode", {}, true);
  auto& d = f.dep();
  ::setenv("MSTAR_TEST_CORRUPT_TRANSFER", "1", 1);  // flips a byte of what lands
  auto h = d.submit(spec);
  const auto ds = read_all(h);
  ::unsetenv("MSTAR_TEST_CORRUPT_TRANSFER");
  EXPECT_EQ(tokens_of(ds), expected.at(0));  // recomputed, not decoded from bad state
  auto s = d.stats();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->handoffs, 1);
  EXPECT_EQ(s->adopted, 0);
  // The decode node prefilled the prompt itself: its adoption was undone.
  f.expect_pools_empty();
}

INSTANTIATE_TEST_SUITE_P(fixtures, pd_split,
                         testing::Values("nemotron_h_tiny_attn", "nemotron_h_tiny_hybrid"));

TEST(deployment, both_nodes_take_whole_requests_and_n_samples) {
  nodes_fixture f{"nemotron_h_tiny_hybrid"};
  f.add("both-0", "both");
  f.add("both-1", "both");
  auto& d = f.dep();
  auto spec = test::greedy_request(prompt_of(12, 30), 5);
  spec.sampling.n = 3;
  spec.sampling.temperature = 0.8F;
  auto h = d.submit(spec);
  const auto ds = read_all(h);
  int finished = 0;
  for (const auto& x : ds)
    finished += x.finished ? 1 : 0;
  EXPECT_EQ(finished, 3);
  auto s = d.stats();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->handoffs, 0);
  f.expect_pools_empty();
}

TEST(deployment, a_decode_node_that_leaves_mid_decode_has_its_requests_resumed_elsewhere) {
  const auto spec = test::greedy_request(prompt_of(20, 40), 40);
  const auto expected = alone("nemotron_h_tiny_hybrid", {spec});
  nodes_fixture f{"nemotron_h_tiny_hybrid"};
  f.add("prefill-0", "prefill");
  auto doomed = f.add("decode-0", "decode");
  auto& d = f.dep();
  streamed st;
  d.submit(spec, st.sink());
  ASSERT_TRUE(st.wait_for_tokens(4));
  // A second decode node joins; the first one goes away mid-decode.
  auto spare = f.add("decode-1", "decode");
  ASSERT_TRUE(d.join(spare, std::chrono::seconds(5)).has_value());
  caf::anon_send_exit(doomed, caf::exit_reason::kill);
  ASSERT_TRUE(st.wait_done());
  const auto& ds = st.ds;
  EXPECT_EQ(tokens_of(ds), expected.at(0));  // no token lost or repeated
  EXPECT_EQ(ds.back().finished, finish_reason::length);
  auto s = d.stats();
  ASSERT_TRUE(s.has_value());
  EXPECT_LE(s->reroutes, 1);  // 0 when it had finished before the exit landed
  EXPECT_EQ(s->in_flight, 0);
}

// What a dropped link looks like to the router (CAF's middleman reports a
// remote node unreachable while it runs on): the request moves, the same
// node joins again and takes it back, resumed, under a new wire id, while
// its earlier dispatch there is cancelled. Before wire ids the node refused
// the second dispatch ("already on node") and the request failed.
TEST(deployment, a_node_taken_for_dead_that_joins_again_runs_the_request_once) {
  const auto spec =
      test::greedy_request(prompt_of(20, 40), 400);  // long enough to still run at the re-join
  const auto expected = alone("nemotron_h_tiny_hybrid", {spec});
  nodes_fixture f{"nemotron_h_tiny_hybrid"};
  f.add("prefill-0", "prefill");
  auto flaky = f.add("decode-0", "decode");
  router_options o;
  o.wait_for_node = std::chrono::seconds(30);
  auto& d = f.dep(o);
  streamed st;
  d.submit(spec, st.sink());
  ASSERT_TRUE(st.wait_for_tokens(4));
  caf::anon_send(d.router(),
                 caf::down_msg{flaky.address(), caf::make_error(caf::sec::remote_linking_failed)});
  ASSERT_TRUE(d.join(flaky, std::chrono::seconds(5)).has_value());
  ASSERT_TRUE(st.wait_done());
  const auto& ds = st.ds;
  EXPECT_EQ(tokens_of(ds), expected.at(0));  // no token lost or repeated
  EXPECT_EQ(ds.back().finished, finish_reason::length) << ds.back().error;
  auto s = d.stats();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->reroutes, 1);
  EXPECT_EQ(s->in_flight, 0);
  // The earlier dispatch was cancelled on the node: nothing runs there.
  for (int i = 0; i < 200; ++i) {
    auto n = f.rt(1).stats();
    ASSERT_TRUE(n.has_value());
    if (n->running == 0 && n->waiting == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  f.expect_pools_empty();
}

TEST(deployment, fails_clearly_when_no_node_that_can_decode_is_left) {
  nodes_fixture f{"nemotron_h_tiny_attn"};
  f.add("prefill-0", "prefill");
  auto doomed = f.add("decode-0", "decode");
  auto& d = f.dep();
  caf::anon_send_exit(doomed, caf::exit_reason::kill);
  // The router learns of the exit before the next request reaches it
  // (both go through its mailbox; the down message was sent first).
  for (int i = 0; i < 100; ++i) {
    auto s = d.stats();
    ASSERT_TRUE(s.has_value());
    if (!s->nodes.at(1).alive)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto h = d.submit(test::greedy_request(prompt_of(8, 50), 6));
  const auto ds = read_all(h);
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds.back().finished, finish_reason::error);
  EXPECT_NE(ds.back().error.find("can decode"), std::string::npos) << ds.back().error;
}

TEST(deployment, a_request_waits_for_a_node_that_can_take_it_to_join) {
  const auto spec = test::greedy_request(prompt_of(9, 70), 6);
  const auto expected = alone("nemotron_h_tiny_attn", {spec});
  nodes_fixture f{"nemotron_h_tiny_attn"};
  f.add("prefill-0", "prefill");
  router_options o;
  o.wait_for_node = std::chrono::seconds(30);
  auto& d = f.dep(o);
  auto h = d.submit(spec);  // only a prefill node: the request waits for a decoder
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(h.done());
  // A decode node joins (a restarted one would, too): the request runs.
  auto late = f.add("decode-0", "decode");
  ASSERT_TRUE(d.join(late, std::chrono::seconds(5)).has_value());
  const auto ds = read_all(h);
  EXPECT_EQ(tokens_of(ds), expected.at(0));
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds.back().finished, finish_reason::length);
}

TEST(deployment, a_waiting_request_fails_when_no_node_joins_in_time) {
  nodes_fixture f{"nemotron_h_tiny_attn"};
  f.add("prefill-0", "prefill");
  router_options o;
  o.wait_for_node = std::chrono::milliseconds(150);
  auto& d = f.dep(o);
  auto h = d.submit(test::greedy_request(prompt_of(9, 70), 6));
  const auto ds = read_all(h);
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds.back().finished, finish_reason::error);
  EXPECT_NE(ds.back().error.find("can decode"), std::string::npos) << ds.back().error;
}

TEST(deployment, cancel_reaches_the_node_running_the_request) {
  nodes_fixture f{"nemotron_h_tiny_hybrid"};
  f.add("prefill-0", "prefill");
  f.add("decode-0", "decode");
  auto& d = f.dep();
  auto h = d.submit(test::greedy_request(prompt_of(10, 60), 100000));
  auto first = h.next_for(std::chrono::duration_cast<std::chrono::milliseconds>(deadline));
  ASSERT_TRUE(first.has_value());
  h.cancel();
  const auto ds = read_all(h);
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds.back().finished, finish_reason::cancelled);
  f.expect_pools_empty();
}

}  // namespace
}  // namespace mstar::actors
