// mstar-run --image end to end on the tiny Qwen3.5 fixture: the chat prompts
// of tests/fixtures/models/qwen3_5_tiny/expected.json with their committed
// images give transformers' greedy tokens (an image kept as it is, one
// resized, a JPEG and a PNG in one prompt); a prompt without image markers
// gets one block per image before its text; every bad input is one clear
// line and exit code 2.
#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <vector>

#include "tests/models/temp_folder.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/subprocess.hpp"

namespace mstar {
namespace {

using nlohmann::json;

const std::string model = std::string{MSTAR_FIXTURES_DIR} + "/models/qwen3_5_tiny";
const std::string images = std::string{MSTAR_FIXTURES_DIR} + "/images/";

// `ids` with each run of the image placeholder (300) cut to one token.
std::vector<std::uint32_t> collapsed(const std::vector<std::uint32_t>& ids) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i == 0 || ids[i] != 300 || ids[i - 1] != 300)
      out.push_back(ids[i]);
  }
  return out;
}

// mstar-run's one JSON line for `prompt` with `files`, greedy, 8 tokens.
json run_one(const std::string& prompt, const std::vector<std::string>& files) {
  std::vector<std::string> argv = {MSTAR_RUN_PATH, "--model",      model,
                                   "--prompt",     prompt,         "--json",
                                   "--ignore-eos", "--max-tokens", "8"};
  for (const auto& f : files) {
    argv.push_back("--image");
    argv.push_back(images + f);
  }
  const auto out = test::run_process(argv);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  std::istringstream lines{out.out};
  std::string line;
  std::getline(lines, line);
  return line.empty() ? json{} : json::parse(line);
}

TEST(mstar_run_images, chat_prompts_with_images_give_transformers_tokens) {
  const auto expected = test::load_fixture_json("models/qwen3_5_tiny/expected.json");
  ASSERT_EQ(expected.at("chat_prompts").size(), 3U);
  for (const auto& c : expected.at("chat_prompts")) {
    const auto got = run_one(c.at("text"), c.at("images"));
    ASSERT_FALSE(got.is_null());
    EXPECT_EQ(got.at("generated_ids"), c.at("generated_ids")) << c.at("images");
    // The tokenizer's ids for the rendered text, one placeholder per image.
    EXPECT_EQ(got.at("prompt_ids").get<std::vector<std::uint32_t>>(),
              collapsed(c.at("prompt_ids").get<std::vector<std::uint32_t>>()));
  }
}

TEST(mstar_run_images, a_prompt_without_markers_gets_one_block_per_image_before_its_text) {
  const auto bare = run_one("Which is brighter?", {"jpeg444_24x16.jpg", "rgb_20x12.png"});
  const std::string block = "<|vision_start|><|image_pad|><|vision_end|>";
  const auto marked =
      run_one(block + block + "Which is brighter?", {"jpeg444_24x16.jpg", "rgb_20x12.png"});
  ASSERT_FALSE(bare.is_null());
  ASSERT_FALSE(marked.is_null());
  const auto ids = bare.at("prompt_ids").get<std::vector<std::uint32_t>>();
  ASSERT_GE(ids.size(), 6U);
  EXPECT_EQ(std::vector<std::uint32_t>(ids.begin(), ids.begin() + 6),
            (std::vector<std::uint32_t>{302, 300, 303, 302, 300, 303}));
  EXPECT_EQ(bare.at("prompt_ids"), marked.at("prompt_ids"));
  EXPECT_EQ(bare.at("generated_ids"), marked.at("generated_ids"));
}

TEST(mstar_run_images, refuses_bad_images_with_one_line_naming_the_problem) {
  test::temp_folder tmp;
  const auto not_image = tmp.write("notes.png", "<html>not an image</html>");
  test::temp_folder no_processor;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    std::filesystem::copy_file(model + "/" + f, no_processor.path() / f);
  const std::string text_only = std::string{MSTAR_FIXTURES_DIR} + "/models/qwen3_5_tiny_text";
  const std::string png = images + "rgb_20x12.png";
  struct bad {
    std::vector<std::string> argv;
    std::string says;
  };
  const std::vector<bad> cases = {
      {{"--model", model, "--image", "/nonexistent/cat.png"}, "/nonexistent/cat.png"},
      {{"--model", model, "--image", not_image.string()}, "--image " + not_image.string() + ": "},
      {{"--model", text_only, "--image", png}, "has no vision tower"},
      {{"--model", no_processor.path().string(), "--image", png},
       "preprocessor_config.json: not found"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {MSTAR_RUN_PATH};
    argv.insert(argv.end(), c.argv.begin(), c.argv.end());
    const auto out = test::run_process(argv);
    EXPECT_EQ(out.exit_code, 2) << c.says << ": " << out.err;
    EXPECT_NE(out.err.find(c.says), std::string::npos) << out.err;
    EXPECT_NE(out.err.find("--image"), std::string::npos) << out.err;
    EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << out.err;
    EXPECT_TRUE(out.out.empty()) << out.out;
  }
}

}  // namespace
}  // namespace mstar
