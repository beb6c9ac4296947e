// mstar-tool keys, end to end: the published vectors through the CLI, error
// lines that leave later lines alone, and the exit code.
#include <gtest/gtest.h>
#include <sstream>

#include "tests/support/fixtures.hpp"
#include "tests/support/subprocess.hpp"

namespace mstar {
namespace {

using nlohmann::json;

std::vector<json> run_keys(const std::string& input, int* exit_code = nullptr) {
  const auto out = test::run_process({MSTAR_TOOL_PATH, "keys"}, input);
  if (exit_code != nullptr)
    *exit_code = out.exit_code;
  std::vector<json> lines;
  std::istringstream in{out.out};
  for (std::string line; std::getline(in, line);)
    lines.push_back(json::parse(line));
  return lines;
}

// The CLI's request for a vector case: the vector's inputs with its fn.
json request_for(const json& c) {
  json req = c.at("inputs");
  req["fn"] = c.at("fn");
  if (c.at("fn") == "fingerprint") {
    json fields = json::array();
    for (const auto& f : c.at("inputs").at("fields")) {
      fields.push_back(f.at("type") == "bytes" ? json{{"bytes", f.at("value")}}
                                               : json{{"text", f.at("as_text")}});
    }
    req["fields"] = fields;
  }
  return req;
}

TEST(mstar_tool_keys, answers_every_published_vector) {
  const auto cases = test::load_fixture_json("vectors/page_keys.json").at("cases");
  std::string input;
  for (const auto& c : cases)
    input += request_for(c).dump() + "\n";
  int rc = 0;
  const auto lines = run_keys(input, &rc);
  ASSERT_EQ(lines.size(), cases.size());
  bool any_error = false;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].at("id").get<std::string>());
    const auto& expected = cases[i].at("expected");
    if (expected.contains("raises")) {
      ASSERT_TRUE(lines[i].contains("error"));
      EXPECT_NE(lines[i]["error"].get<std::string>().find("2^32"), std::string::npos);
      any_error = true;
      continue;
    }
    for (const auto& [field, value] : expected.items()) {
      if (field == "preimage" || field == "tokens_used" || field == "items_used")
        continue;
      EXPECT_EQ(lines[i].at(field), value) << field;
    }
  }
  EXPECT_EQ(rc, any_error ? 1 : 0);
}

TEST(mstar_tool_keys, keys_a_prompt_layout_like_chain) {
  const auto lines = run_keys(
      R"({"fn":"layout","page_size":4,"spans":[{"ids":[1,2,3]},{"length":2,"digest":"ab"},{"ids":[4,5,6,7]}]})"
      "\n"
      R"({"fn":"chain","pages":[[1,2,3],[4,5,6],[7]],"items_by_page":{"0":[{"start":3,"offset":0,"length":2,"digest":"ab"}],"1":[{"start":0,"offset":1,"length":2,"digest":"ab"}]}})"
      "\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("keys"), lines[1].at("keys"));
  EXPECT_EQ(lines[0].at("tail"), json::array({7}));
  EXPECT_EQ(lines[0].at("keys").size(), 3u);
  EXPECT_EQ(lines[0].at("items_by_page").at("1").at(0).at("offset"), 1);
}

TEST(mstar_tool_keys, extends_every_generation_vector_like_the_engine) {
  const auto cases = test::load_fixture_json("vectors/generation_extend.json").at("cases");
  std::string input;
  for (const auto& c : cases)
    input += request_for(c).dump() + "\n";
  int rc = 1;
  const auto lines = run_keys(input, &rc);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(lines.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].at("id").get<std::string>());
    EXPECT_EQ(lines[i], cases[i].at("expected"));
  }
}

TEST(mstar_tool_keys, extend_keys_the_same_pages_as_layout_over_prompt_and_sampled_ids) {
  const auto lines = run_keys(
      R"({"fn":"extend","page_size":4,"spans":[{"ids":[1,2]},{"length":3,"digest":"ab"}],"sampled":[7,8,9,10]})"
      "\n"
      R"({"fn":"layout","page_size":4,"spans":[{"ids":[1,2]},{"length":3,"digest":"ab"},{"ids":[7,8,9,10]}]})"
      "\n");
  ASSERT_EQ(lines.size(), 2u);
  // 9 slots: two whole pages (page 1 holds 1 image slot and ids 7, 8, 9).
  EXPECT_EQ(lines[0].at("keyed_pages"), 2);
  EXPECT_EQ(lines[0].at("unkeyed"), json::array({10}));
  const auto& keys = lines[1].at("keys");
  EXPECT_EQ(lines[0].at("whole_page_keys"), json::array({keys[0], keys[1]}));
}

TEST(mstar_tool_keys, extend_names_the_field_it_refuses) {
  int rc = 0;
  const auto lines =
      run_keys(R"({"fn":"extend","page_size":4,"spans":[{"ids":[1]}]})"
               "\n"
               R"({"fn":"extend","page_size":4,"spans":[{"ids":[1]}],"sampled":[-3]})"
               "\n"
               R"({"fn":"extend","page_size":4,"spans":[{"ids":[1]}],"sampled":"x"})"
               "\n"
               R"({"fn":"extend","page_size":0,"spans":[],"sampled":[]})"
               "\n",
               &rc);
  EXPECT_EQ(rc, 1);
  ASSERT_EQ(lines.size(), 4u);
  const char* fragments[] = {"sampled", "sampled[0]", "sampled", "page_size"};
  for (std::size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(lines[i].contains("error")) << lines[i].dump();
    EXPECT_NE(lines[i]["error"].get<std::string>().find(fragments[i]), std::string::npos)
        << lines[i].dump();
  }
}

// A Python front end's stream (prefix_keys, prefix_tail, prefix_layout rows)
// extends exactly like the spans it was keyed from; layout writes the rows.
TEST(mstar_tool_keys, layout_rows_fed_back_as_a_python_stream_extend_like_the_spans) {
  const std::string spans =
      R"("spans":[{"ids":[1,2,3,4,5,6,7,8,9,10]},{"length":10,"digest":"aa","advance":4},{"ids":[11,12]}])";
  const auto first = run_keys(R"({"fn":"layout","page_size":16,)" + spans + "}\n");
  ASSERT_EQ(first.size(), 1u);
  const auto& rows = first[0].at("prefix_layout");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], json::parse(R"([10,10,"prefill",null,null])"));
  EXPECT_EQ(rows[1].at(1), 4);     // the image's advance
  EXPECT_EQ(rows[1].at(3), "aa");  // its digest
  EXPECT_TRUE(rows[2].at(4).is_null());
  // The image ends at slot 4 of page 1: its end key is end_key over page 1.
  json end_req = {{"fn", "end_key"},
                  {"prev", first[0].at("keys").at(0)},
                  {"tokens", json::array()},
                  {"items", first[0].at("items_by_page").at("1")},
                  {"end", 4}};
  json python = {{"fn", "extend"},
                 {"page_size", 16},
                 {"prefix_keys", first[0].at("keys")},
                 {"prefix_tail", first[0].at("tail")},
                 {"prefix_layout", rows},
                 {"prefix_decode", "text_outputs"},
                 {"sampled", json::array({20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32})}};
  json undecoded = python;
  undecoded.erase("prefix_decode");
  const auto lines = run_keys(
      end_req.dump() + "\n" + python.dump() + "\n" +
      R"({"fn":"extend","page_size":16,"sampled":[20,21,22,23,24,25,26,27,28,29,30,31,32],)" +
      spans + "}\n" + undecoded.dump() + "\n");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].at("key"), rows[1].at(4));
  EXPECT_EQ(lines[1].at("keyed_pages"), 2);
  EXPECT_EQ(lines[1], lines[2]);
  EXPECT_EQ(lines[3].at("keyed_pages"), 1);  // no decode walk: generated pages stay unkeyed
}

TEST(mstar_tool_keys, python_stream_names_the_row_it_refuses) {
  int rc = 0;
  const auto lines = run_keys(
      R"({"fn":"extend","page_size":4,"prefix_keys":[],"prefix_layout":[[2,2,"prefill"]],"sampled":[]})"
      "\n"
      R"({"fn":"extend","page_size":4,"prefix_keys":[],"prefix_layout":[[2,3,"prefill",null,null]],"sampled":[]})"
      "\n"
      R"({"fn":"extend","page_size":4,"prefix_keys":["ab"],"sampled":[]})"
      "\n"
      R"({"fn":"extend","page_size":4,"prefix_keys":[],"prefix_layout":[[2,2,"prefill",null,null]],"sampled":[]})"
      "\n",
      &rc);
  EXPECT_EQ(rc, 1);
  ASSERT_EQ(lines.size(), 4u);
  const char* fragments[] = {"prefix_layout[0] must be", "prefix_layout[0]: an ids row",
                             "prefix_keys[0] has 1 bytes", "prefix_keys, prefix_tail"};
  for (std::size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(lines[i].contains("error")) << lines[i].dump();
    EXPECT_NE(lines[i]["error"].get<std::string>().find(fragments[i]), std::string::npos)
        << lines[i].dump();
  }
}

TEST(mstar_tool_keys, reports_bad_lines_and_still_answers_later_ones) {
  int rc = 0;
  const auto lines = run_keys(
      "not json\n"
      R"({"fn":"nope"})"
      "\n"
      R"({"fn":"page_key","prev":"","tokens":[-1]})"
      "\n"
      R"({"fn":"page_key","prev":"zz","tokens":[1]})"
      "\n"
      R"({"fn":"page_key","prev":"","tokens":[1.5]})"
      "\n"
      R"({"fn":"page_key","prev":"","tokens":[1],"extra":1})"
      "\n"
      R"({"fn":"page_items","spans":[[4,null]],"page_size":0})"
      "\n"
      R"({"fn":"chain","pages":[[1]],"items_by_page":{"x":[]}})"
      "\n"
      R"({"fn":"page_key","prev":"","tokens":[1,2,3,4]})"
      "\n",
      &rc);
  EXPECT_EQ(rc, 1);
  ASSERT_EQ(lines.size(), 9u);
  const char* expected_fragments[] = {
      "not valid JSON",     "unknown fn 'nope'",     "tokens[0]", "not a hex digit",
      "must be an integer", "unknown field 'extra'", "page_size", "not a page index"};
  for (std::size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(lines[i].contains("error")) << lines[i].dump();
    EXPECT_NE(lines[i]["error"].get<std::string>().find(expected_fragments[i]), std::string::npos)
        << lines[i].dump();
    EXPECT_NE(lines[i]["error"].get<std::string>().find("line " + std::to_string(i + 1)),
              std::string::npos);
  }
  EXPECT_EQ(lines[8].at("key"), "e0073bb807f41c911589f8b1b7eb5a4ec88ebe2795093bcd06f348c6d51d178a");
}

TEST(mstar_tool_keys, fingerprints_typed_fields_like_python_str) {
  const auto lines = run_keys(
      R"({"fn":"fingerprint","fields":[{"text":"model"},{"int":128},{"int":-5},{"bool":true},{"bool":false},{"none":null},{"float":500000.0},{"float":1e16},{"float":1e-05},{"float":0.0001},{"bytes":"00ff"},{"text":""}]})"
      "\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].at("digest"),
            "850ac677e829d36e10f27471bcd010b9b4a1d7b81a37117d32b38cb5a070c336");
}

TEST(mstar_tool_keys, exits_zero_on_empty_input_and_documents_every_fn) {
  int rc = -1;
  EXPECT_TRUE(run_keys("", &rc).empty());
  EXPECT_EQ(rc, 0);
  const auto help = test::run_process({MSTAR_TOOL_PATH, "keys", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* fn : {"fingerprint", "page_key", "end_key", "page_items", "chain", "layout"}) {
    EXPECT_NE(help.out.find(fn), std::string::npos) << fn;
  }
}

TEST(mstar_tool, requires_a_command_and_rejects_unknown_ones) {
  EXPECT_EQ(test::run_process({MSTAR_TOOL_PATH}).exit_code, 2);
  EXPECT_EQ(test::run_process({MSTAR_TOOL_PATH, "frobnicate"}).exit_code, 2);
  EXPECT_EQ(test::run_process({MSTAR_TOOL_PATH, "--help"}).exit_code, 0);
}

TEST(mstar_tool, example_prints_keys_and_a_window_plan) {
  const auto out = test::run_process({MSTAR_TOOL_PATH, "example", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const auto doc = json::parse(out.out);
  EXPECT_EQ(doc.at("prompt").at("keys").size(), 5u);
  EXPECT_EQ(doc.at("prompt").at("keys").at(0),
            "0f8966e4fbbf8a411a7ae985b668b9f37e7663a78b14a2132d9247b837394533");
  // The image digest by the Python recipe, computed with Python's hashlib:
  // fingerprint(sha256(file), "image", "example-preprocess-v1", 30,
  //             repr(64), repr('bicubic'), repr(True)).
  const auto& image = doc.at("prompt").at("image");
  EXPECT_EQ(image.at("file_sha256"),
            "e3698ad2d69b2d2b23f64d06c437af19c26ab6be3694b114d2393b9544c91c9f");
  EXPECT_EQ(image.at("digest"), "613dcb8b095989b78bda75fc55b6a0c6aec7e3fc5632756eac35996112b39ef8");
  EXPECT_EQ(doc.at("prompt").at("items_by_page").at("1").at(0).at("digest"), image.at("digest"));
  EXPECT_EQ(doc.at("windows").size(), 6u);
  EXPECT_EQ(doc.at("retention").at("context_budget"), 64);
}

TEST(mstar_tool, devices_answers_json_with_devices_or_a_reason) {
  const auto out = test::run_process({MSTAR_TOOL_PATH, "devices"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const auto doc = json::parse(out.out);
  EXPECT_TRUE(doc.at("devices").is_array());
  if (doc.at("devices").empty()) {
    EXPECT_TRUE(doc.contains("reason"));
  }
}

}  // namespace
}  // namespace mstar
