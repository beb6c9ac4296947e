// A speculative step's rows (recurrent-specrows-protocol.md §3.2-3.6, §5.8,
// §5.10): deferred row inputs, threading the step in flight's outputs in by
// name, per-row loop-counter snapshots, and the uniform fast path.
#include "engine/spec_rows.hpp"

#include <gtest/gtest.h>

namespace mstar::engine {
namespace {

// A handle to a distinct (never read) tensor.
tensor_ref tensor(std::string tag) {
  return tensor_ref{std::make_shared<const int>(0), std::move(tag)};
}

std::shared_ptr<forward_pass_info> info_at(std::string loop, std::int64_t iter) {
  return std::make_shared<forward_pass_info>(forward_pass_info{{{std::move(loop), iter}}});
}

std::int64_t counter(const speculative_rows& rows, const request_id& rid, const char* loop) {
  return rows.per_request_input_metadata.at(rid).dynamic_loop_iter_counts.at(loop);
}

// ---------------------------------------------------------------------------
// deferred_row_inputs (§3.5)

TEST(deferred_row_inputs, iterates_in_row_order_without_building_a_row) {
  deferred_row_inputs rows{{"c", "a", "b"}, {"tokens"}};
  std::vector<request_id> seen(rows.begin(), rows.end());
  EXPECT_EQ(seen, (std::vector<request_id>{"c", "a", "b"}));
  EXPECT_EQ(rows.size(), 3U);
  EXPECT_TRUE(rows.contains("a"));
  EXPECT_FALSE(rows.contains("z"));
  EXPECT_EQ(rows.rows_built(), 0U);
}

TEST(deferred_row_inputs, builds_a_template_row_with_empty_signals_the_first_time_it_is_read) {
  deferred_row_inputs rows{{"a", "b"}, {"tokens", "hidden"}};
  row_inputs* a = rows.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(*a, (row_inputs{{"hidden", {}}, {"tokens", {}}}));
  EXPECT_EQ(rows.rows_built(), 1U);
  EXPECT_EQ(rows.find("a"), a);  // read again: the same row, not rebuilt
  EXPECT_EQ(rows.rows_built(), 1U);
}

TEST(deferred_row_inputs, finds_no_row_for_an_unknown_request) {
  deferred_row_inputs rows{{"a"}, {"tokens"}};
  EXPECT_EQ(rows.find("z"), nullptr);
  EXPECT_EQ(rows.rows_built(), 0U);
}

TEST(deferred_row_inputs, keeps_the_first_position_of_a_repeated_id) {
  deferred_row_inputs rows{{"a", "b", "a"}};
  EXPECT_EQ(rows.request_ids(), (std::vector<request_id>{"a", "b"}));
}

TEST(deferred_row_inputs, assigns_a_fresh_row_in_place_or_after_the_last_row) {
  deferred_row_inputs rows{{"a", "b"}, {"tokens"}};
  rows.assign("b", {{"prompt", {tensor("b0")}}});
  rows.assign("f", {{"prompt", {tensor("f0")}}});
  EXPECT_EQ(rows.request_ids(), (std::vector<request_id>{"a", "b", "f"}));
  EXPECT_EQ(rows.find("b")->at("prompt").at(0).tag, "b0");
  EXPECT_FALSE(rows.find("b")->contains("tokens"));
  EXPECT_EQ(rows.rows_built(), 0U);  // assigned rows are not template rows
}

TEST(deferred_row_inputs, erases_a_row_and_its_place_in_row_order) {
  deferred_row_inputs rows{{"a", "b", "c"}};
  EXPECT_TRUE(rows.erase("b"));
  EXPECT_FALSE(rows.erase("b"));
  EXPECT_EQ(rows.request_ids(), (std::vector<request_id>{"a", "c"}));
  EXPECT_FALSE(rows.contains("b"));
}

TEST(deferred_row_inputs, set_signals_reaches_a_template_row_already_read) {
  deferred_row_inputs rows{{"a", "b"}, {"old"}};
  row_inputs* a = rows.find("a");
  (*a)["old"].push_back(tensor("stale"));
  rows.set_signals({"text_inputs"});
  EXPECT_EQ(*a, (row_inputs{{"text_inputs", {}}}));  // in place: the held reference sees it
  EXPECT_EQ(*rows.find("b"), (row_inputs{{"text_inputs", {}}}));
  EXPECT_EQ(rows.signals(), (std::vector<std::string>{"text_inputs"}));
}

TEST(deferred_row_inputs, set_signals_leaves_assigned_rows_alone) {
  deferred_row_inputs rows{{"a", "f"}, {"old"}};
  const auto f0 = tensor("f0");
  rows.assign("f", {{"prompt", {f0}}});
  rows.set_signals({"text_inputs"});
  EXPECT_EQ(*rows.find("f"), (row_inputs{{"prompt", {f0}}}));
}

TEST(deferred_row_inputs, set_signals_leaves_threaded_rows_alone) {
  deferred_row_inputs rows{{"a"}, {"tokens"}};
  const auto t = tensor("a1");
  EXPECT_TRUE(rows.take_outputs({{"a", {{"tokens", {t}}}}}).empty());
  rows.set_signals({"other"});
  EXPECT_EQ(*rows.find("a"), (row_inputs{{"tokens", {t}}}));
}

TEST(deferred_row_inputs, materialize_returns_a_plain_copy_of_every_row) {
  deferred_row_inputs rows{{"a", "b", "f"}, {"tokens"}};
  const auto f0 = tensor("f0");
  rows.assign("f", {{"prompt", {f0}}});
  auto plain = rows.materialize();
  EXPECT_EQ(rows.rows_built(), 2U);  // the two template rows, now built
  ASSERT_EQ(plain.size(), 3U);
  EXPECT_EQ(plain.at("a"), (row_inputs{{"tokens", {}}}));
  EXPECT_EQ(plain.at("b"), (row_inputs{{"tokens", {}}}));
  EXPECT_EQ(plain.at("f"), (row_inputs{{"prompt", {f0}}}));
  plain.at("a")["tokens"].push_back(tensor("edit"));
  EXPECT_TRUE(rows.find("a")->at("tokens").empty());  // a copy, not a view
  EXPECT_EQ(rows.rows_built(), 2U);
}

// ---------------------------------------------------------------------------
// Threading the step in flight's outputs in (§3.3)

TEST(deferred_row_inputs, take_outputs_moves_each_declared_signal_into_its_continuing_row) {
  deferred_row_inputs rows{{"a", "b"}, {"tokens"}};
  const auto a1 = tensor("a1");
  const auto b1 = tensor("b1");
  const auto dropped = rows.take_outputs(
      {{"a", {{"tokens", {a1}}, {"unconsumed", {tensor("x")}}}}, {"b", {{"tokens", {b1}}}}});
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(*rows.find("a"), (row_inputs{{"tokens", {a1}}}));  // the same handle, no other name
  EXPECT_EQ(rows.find("b")->at("tokens").at(0).data, b1.data);
}

TEST(deferred_row_inputs, take_outputs_drops_a_continuing_row_whose_signal_is_missing) {
  deferred_row_inputs rows{{"a", "b", "c"}, {"tokens", "state"}};
  const auto dropped = rows.take_outputs({
      {"a", {{"tokens", {tensor("a1")}}, {"state", {tensor("a2")}}}},
      {"b", {{"tokens", {tensor("b1")}}}},  // no "state"
                                            // "c": no outputs at all
  });
  EXPECT_EQ(dropped, (std::vector<request_id>{"b", "c"}));
  EXPECT_EQ(rows.request_ids(), (std::vector<request_id>{"a"}));
  EXPECT_EQ(rows.rows_built(), 1U);  // a dropped row is never built
}

TEST(deferred_row_inputs, take_outputs_drops_a_continuing_row_whose_signal_is_empty) {
  deferred_row_inputs rows{{"a", "b"}, {"tokens"}};
  const auto dropped =
      rows.take_outputs({{"a", {{"tokens", {}}}}, {"b", {{"tokens", {tensor("b1")}}}}});
  EXPECT_EQ(dropped, (std::vector<request_id>{"a"}));
  EXPECT_FALSE(rows.contains("a"));
  EXPECT_TRUE(rows.contains("b"));
}

TEST(deferred_row_inputs, take_outputs_leaves_fresh_rows_untouched) {
  deferred_row_inputs rows{{"a", "f"}, {"tokens"}};
  const auto f0 = tensor("f0");
  rows.assign("f", {{"prompt", {f0}}});
  const auto dropped = rows.take_outputs(
      {{"a", {{"tokens", {tensor("a1")}}}}, {"f", {{"tokens", {tensor("not_for_f")}}}}});
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(*rows.find("f"), (row_inputs{{"prompt", {f0}}}));
}

TEST(deferred_row_inputs, take_outputs_keeps_a_fresh_row_that_has_no_outputs) {
  deferred_row_inputs rows{{"a", "f"}, {"tokens"}};
  rows.assign("f", {{"prompt", {tensor("f0")}}});
  const auto dropped = rows.take_outputs({{"a", {{"tokens", {tensor("a1")}}}}});
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(rows.request_ids(), (std::vector<request_id>{"a", "f"}));
}

// ---------------------------------------------------------------------------
// Assembling N+1 and dropping rows from its parallel tables (§3.2, §3.3)

speculation_plan decode_plan() {
  speculation_plan plan;
  plan.continuing = {"a", "b", "c"};
  plan.fresh = {{"f", {{"prompt", {tensor("f0")}}}}};
  plan.signals = {"tokens"};
  plan.loop_name = "decode";
  plan.is_new_loop_iter = true;
  plan.final_stream_rids = {"b", "f"};
  plan.stream_partition_done_rids = {"b"};
  return plan;
}

shared_infos decode_infos() {
  return {{"a", info_at("decode", 2)},
          {"b", info_at("decode", 2)},
          {"c", info_at("decode", 2)},
          {"f", info_at("decode", 0)}};
}

TEST(assemble_speculation, lays_out_continuing_rows_first_then_fresh_rows) {
  auto plan = decode_plan();
  plan.fresh.insert(plan.fresh.begin(), {"b", {{"prompt", {tensor("dup")}}}});
  const auto shared = decode_infos();
  auto rows = assemble_speculation(std::move(plan), shared);
  ASSERT_TRUE(rows) << rows.error().to_string();
  EXPECT_EQ(rows->request_ids, (std::vector<request_id>{"a", "b", "c", "f"}));
  EXPECT_EQ(rows->per_request_input_tensors.request_ids(), rows->request_ids);
  EXPECT_EQ(rows->n_continuing, 3U);
  // A fresh row that is also continuing keeps its continuing row and goes back.
  EXPECT_EQ(rows->pushed_back, (std::vector<request_id>{"b"}));
  EXPECT_EQ(*rows->per_request_input_tensors.find("b"), (row_inputs{{"tokens", {}}}));
}

TEST(assemble_speculation, fails_for_a_row_without_a_shared_info) {
  auto shared = decode_infos();
  shared.erase("c");
  const auto rows = assemble_speculation(decode_plan(), shared);
  ASSERT_FALSE(rows);
  EXPECT_EQ(rows.error().code(), errc::not_found);
  EXPECT_NE(rows.error().message().find("'c'"), std::string::npos);
}

TEST(thread_outputs, removes_dropped_rows_from_every_parallel_table) {
  const auto shared = decode_infos();
  auto rows = assemble_speculation(decode_plan(), shared).value();
  const auto dropped = thread_outputs(
      rows, {{"a", {{"tokens", {tensor("a1")}}}}, {"c", {{"tokens", {tensor("c1")}}}}});
  EXPECT_EQ(dropped, (std::vector<request_id>{"b"}));
  EXPECT_EQ(rows.request_ids, (std::vector<request_id>{"a", "c", "f"}));
  EXPECT_EQ(rows.n_continuing, 2U);
  EXPECT_FALSE(rows.per_request_input_tensors.contains("b"));
  EXPECT_FALSE(rows.per_request_info.contains("b"));
  EXPECT_FALSE(rows.per_request_input_metadata.contains("b"));
  EXPECT_EQ(rows.final_stream_rids, (std::set<request_id>{"f"}));
  EXPECT_TRUE(rows.stream_partition_done_rids.empty());
  EXPECT_EQ(rows.per_request_input_tensors.find("a")->at("tokens").at(0).tag, "a1");
  EXPECT_EQ(rows.per_request_input_tensors.find("f")->at("prompt").at(0).tag, "f0");
}

// ---------------------------------------------------------------------------
// Loop counters of a speculative batch (§3.4, §5.10)

TEST(assemble_speculation, continuing_row_on_a_new_iteration_runs_one_past_the_shared_counter) {
  const auto shared = decode_infos();
  const auto rows = assemble_speculation(decode_plan(), shared).value();
  EXPECT_EQ(counter(rows, "a", "decode"), 3);
  EXPECT_EQ(shared.at("a")->dynamic_loop_iter_counts.at("decode"), 2);  // N still reads 2
  EXPECT_EQ(rows.per_request_info.at("a"), shared.at("a"));             // the shared object itself
  EXPECT_TRUE(rows.is_new_iter);
}

TEST(assemble_speculation, fresh_row_keeps_its_shared_counter) {
  auto shared = decode_infos();
  shared["f"] = info_at("decode", 1);
  const auto rows = assemble_speculation(decode_plan(), shared).value();
  EXPECT_EQ(counter(rows, "f", "decode"), 1);
  EXPECT_EQ(counter(rows, "a", "decode"), 3);
}

TEST(assemble_speculation, transition_into_a_loop_keeps_the_current_index) {
  auto plan = decode_plan();
  plan.is_new_loop_iter = false;
  auto shared = decode_infos();
  shared["a"] = info_at("decode", 0);
  const auto rows = assemble_speculation(std::move(plan), shared).value();
  EXPECT_EQ(counter(rows, "a", "decode"), 0);
  EXPECT_FALSE(rows.is_new_iter);
}

TEST(assemble_speculation, records_on_the_shared_info_are_seen_through_the_batch) {
  const auto shared = decode_infos();
  const auto rows = assemble_speculation(decode_plan(), shared).value();
  rows.per_request_info.at("a")->dynamic_loop_iter_counts["denoise"] = 7;
  EXPECT_EQ(shared.at("a")->dynamic_loop_iter_counts.at("denoise"), 7);
  EXPECT_FALSE(
      rows.per_request_input_metadata.at("a").dynamic_loop_iter_counts.contains("denoise"));
}

TEST(assemble_speculation, copies_each_rows_existing_metadata) {
  auto plan = decode_plan();
  const auto chunk = tensor("chunk");
  plan.metadata["f"].stream_chunks = {chunk};
  const auto shared = decode_infos();
  const auto rows = assemble_speculation(std::move(plan), shared).value();
  EXPECT_EQ(rows.per_request_input_metadata.at("f").stream_chunks, (tensor_list{chunk}));
  EXPECT_TRUE(rows.per_request_input_metadata.at("a").stream_chunks.empty());
}

TEST(loop_counter_snapshots, advances_only_the_first_n_next_iter_rows) {
  const std::vector infos{info_at("decode", 4), info_at("decode", 4), info_at("decode", 4)};
  infos[0]->dynamic_loop_iter_counts["outer"] = 9;
  const auto snaps = loop_counter_snapshots(infos, "decode", 2).value();
  ASSERT_EQ(snaps.size(), 3U);
  EXPECT_EQ(snaps[0].dynamic_loop_iter_counts.at("decode"), 5);
  EXPECT_EQ(snaps[1].dynamic_loop_iter_counts.at("decode"), 5);
  EXPECT_EQ(snaps[2].dynamic_loop_iter_counts.at("decode"), 4);
  EXPECT_EQ(snaps[0].dynamic_loop_iter_counts.at("outer"), 9);  // other loops as they are
}

TEST(loop_counter_snapshots, are_copies_not_views_of_the_shared_counters) {
  const std::vector infos{info_at("decode", 2)};
  std::vector<input_metadata> base(1);
  base[0].stream_chunks = {tensor("c0")};
  const auto snaps = loop_counter_snapshots(infos, "decode", 1, base).value();
  infos[0]->dynamic_loop_iter_counts["decode"] = 5;  // N is routed while N+1 is prepared
  base[0].stream_chunks.push_back(tensor("c1"));
  EXPECT_EQ(snaps[0].dynamic_loop_iter_counts.at("decode"), 3);
  EXPECT_EQ(snaps[0].stream_chunks.size(), 1U);
  EXPECT_EQ(infos[0]->dynamic_loop_iter_counts.size(), 1U);
}

TEST(loop_counter_snapshots, without_a_loop_copies_the_counters_unchanged) {
  const std::vector infos{info_at("decode", 2), info_at("decode", 6)};
  const auto snaps = loop_counter_snapshots(infos, "", 2).value();
  EXPECT_EQ(snaps[0].dynamic_loop_iter_counts.at("decode"), 2);
  EXPECT_EQ(snaps[1].dynamic_loop_iter_counts.at("decode"), 6);
}

TEST(loop_counter_snapshots, rejects_n_next_iter_past_the_rows) {
  const std::vector infos{info_at("decode", 2)};
  const auto snaps = loop_counter_snapshots(infos, "decode", 2);
  ASSERT_FALSE(snaps);
  EXPECT_EQ(snaps.error().code(), errc::out_of_range);
}

TEST(loop_counter_snapshots, rejects_advancing_a_row_without_a_counter_for_the_loop) {
  const std::vector infos{info_at("prefill", 0)};
  const auto snaps = loop_counter_snapshots(infos, "decode", 1);
  ASSERT_FALSE(snaps);
  EXPECT_EQ(snaps.error().code(), errc::not_found);
  EXPECT_NE(snaps.error().message().find("'decode'"), std::string::npos);
}

TEST(loop_counter_snapshots, rejects_base_metadata_of_another_length) {
  const std::vector infos{info_at("decode", 2), info_at("decode", 2)};
  const std::vector<input_metadata> base(1);
  EXPECT_FALSE(loop_counter_snapshots(infos, "decode", 0, base));
}

TEST(check_stop_batched, reads_the_batch_snapshot_not_the_shared_info) {
  const std::vector infos{info_at("denoise", 2)};
  const auto snaps = loop_counter_snapshots(infos, "denoise", 1).value();
  infos[0]->dynamic_loop_iter_counts["denoise"] = 5;  // the worker already advanced it
  const auto stop = check_stop_batched(snaps, "denoise", 5).value();
  ASSERT_EQ(stop.size(), 1U);
  EXPECT_EQ(stop[0].iter, 3);
  EXPECT_FALSE(stop[0].last);  // the shared 5 would have stopped it
}

TEST(check_stop_batched, marks_the_rows_at_their_last_iteration) {
  std::vector<input_metadata> rows(2);
  rows[0].dynamic_loop_iter_counts["denoise"] = 3;
  rows[1].dynamic_loop_iter_counts["denoise"] = 4;
  const auto stop = check_stop_batched(rows, "denoise", 5).value();
  EXPECT_FALSE(stop[0].last);
  EXPECT_TRUE(stop[1].last);
}

TEST(check_stop_batched, rejects_a_row_without_the_loops_counter) {
  const std::vector<input_metadata> rows(1);
  const auto stop = check_stop_batched(rows, "denoise", 5);
  ASSERT_FALSE(stop);
  EXPECT_EQ(stop.error().code(), errc::not_found);
  EXPECT_FALSE(check_stop_batched({}, "denoise", 0));
}

// ---------------------------------------------------------------------------
// The uniform fast path (§3.6, §5.8)

struct ar_row {
  int input_seq_len = 1;
};

TEST(prepare_step_inputs, uniform_walk_shares_one_object_and_prepares_no_row) {
  deferred_row_inputs rows{{"a", "b", "c"}, {"text_inputs"}};
  const auto shared = std::make_shared<const ar_row>();
  int prepared = 0;
  const auto out = prepare_step_inputs<ar_row>(
      "decode", rows, [&](std::string_view walk) { return walk == "decode" ? shared : nullptr; },
      [&](const request_id&, row_inputs&) -> result<std::shared_ptr<const ar_row>> {
        ++prepared;
        return std::make_shared<const ar_row>();
      });
  ASSERT_TRUE(out);
  EXPECT_EQ(out->rows, (std::vector<std::shared_ptr<const ar_row>>(3, shared)));
  EXPECT_TRUE(out->running_batched);
  EXPECT_EQ(prepared, 0);
  EXPECT_EQ(rows.rows_built(), 0U);
}

TEST(prepare_step_inputs, non_uniform_walk_prepares_once_per_row) {
  deferred_row_inputs rows{{"a", "b", "c"}, {"text_inputs"}};
  std::vector<request_id> prepared;
  const auto out = prepare_step_inputs<ar_row>(
      "prefill_text", rows, [](std::string_view) { return std::shared_ptr<const ar_row>{}; },
      [&](const request_id& rid, row_inputs& inputs) -> result<std::shared_ptr<const ar_row>> {
        EXPECT_TRUE(inputs.contains("text_inputs"));
        prepared.push_back(rid);
        return std::make_shared<const ar_row>();
      });
  ASSERT_TRUE(out);
  EXPECT_EQ(prepared, (std::vector<request_id>{"a", "b", "c"}));
  EXPECT_FALSE(out->running_batched);
  EXPECT_NE(out->rows[0], out->rows[1]);
  EXPECT_EQ(rows.rows_built(), 3U);
}

TEST(prepare_step_inputs, names_the_row_a_failed_preparation_came_from) {
  deferred_row_inputs rows{{"a", "b"}, {"text_inputs"}};
  const auto out = prepare_step_inputs<ar_row>(
      "decode", rows, [](std::string_view) { return std::shared_ptr<const ar_row>{}; },
      [](const request_id& rid, row_inputs&) -> result<std::shared_ptr<const ar_row>> {
        if (rid == "b")
          return make_error(errc::not_found, "signal 'text_inputs' has no tensor");
        return std::make_shared<const ar_row>();
      });
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message().find("row 'b'"), std::string::npos);
}

}  // namespace
}  // namespace mstar::engine
