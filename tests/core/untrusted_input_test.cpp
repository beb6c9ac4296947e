#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "core/host_memory.hpp"
#include "core/input_file.hpp"
#include "core/untrusted_json.hpp"

namespace mstar {
namespace {

using json = nlohmann::json;

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + "1" + std::string(depth, ']');
}

TEST(untrusted_json, parses_values_up_to_the_depth_limit) {
  const auto ok = parse_untrusted_json<json>(nested(64), "x");
  ASSERT_TRUE(ok) << ok.error().message();
  auto deep = parse_untrusted_json<json>(nested(65), "x");
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().message(), "x nests deeper than 64 levels");
}

TEST(untrusted_json, refuses_100000_levels_without_recursing) {
  const auto deep = parse_untrusted_json<nlohmann::ordered_json>(nested(100'000), "the body");
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().code(), errc::parse_error);
  EXPECT_TRUE(contains(deep.error().message(), "the body nests deeper than 64 levels"));
}

TEST(untrusted_json, builds_the_same_value_as_nlohmanns_parser) {
  const std::string text =
      R"({"a":[1,-2,3.5,true,null,"s",{"b":{}}],"c":18446744073709551615,"d":[[],[[]]]})";
  const auto parsed = parse_untrusted_json<json>(text, "x");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, json::parse(text));
  const auto ordered = parse_untrusted_json<nlohmann::ordered_json>(text, "x");
  ASSERT_TRUE(ordered);
  EXPECT_EQ(ordered->dump(), nlohmann::ordered_json::parse(text).dump());
}

TEST(untrusted_json, keeps_the_last_duplicate_key_or_refuses_it_when_asked) {
  const auto last = parse_untrusted_json<json>(R"({"fn":1,"fn":2})", "x");
  ASSERT_TRUE(last);
  EXPECT_EQ((*last)["fn"], 2);
  const auto refused = parse_untrusted_json<json>(R"({"a":{"fn":1,"fn":2}})", "the line",
                                                  {.allow_duplicate_keys = false});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message(), R"(the line has the key "fn" twice in one object)");
}

TEST(untrusted_json, names_truncations_and_trailing_text_with_a_short_reason) {
  const std::string unterminated = "\"" + std::string(1 << 20, 'x');
  for (const std::string& text :
       std::vector<std::string>{"{\"a\": ", "[1, 2", "{} x", "", unterminated}) {
    const auto bad = parse_untrusted_json<json>(text, "cfg");
    ASSERT_FALSE(bad) << text.substr(0, 20);
    EXPECT_TRUE(contains(bad.error().message(), "cfg is not valid JSON: "))
        << bad.error().message();
    EXPECT_LT(bad.error().message().size(), 220u);
  }
}

TEST(json_excerpt, renders_small_values_whole_and_cuts_big_ones_short) {
  EXPECT_EQ(json_excerpt(json::parse(R"({"a":[1,2]})")), R"({"a":[1,2]})");
  const json big = json(std::string(50'000'000, 'v'));
  const std::string cut = json_excerpt(big);
  EXPECT_EQ(cut.size(), default_excerpt_chars);
  EXPECT_TRUE(cut.starts_with("\"vvv"));
  EXPECT_TRUE(cut.ends_with("..."));
  json deep = json::array();
  for (int i = 0; i < 1000; ++i)
    deep = json::array({deep});
  EXPECT_TRUE(json_excerpt(deep, 20).starts_with("[[[[["));
}

TEST(text_excerpt, never_cuts_inside_a_utf8_character) {
  const std::string text = std::string(56, 'a') + "\xC3\xA9\xC3\xA9\xC3\xA9";  // é é é
  const std::string cut = text_excerpt(text, 60);
  EXPECT_EQ(cut, std::string(56, 'a') + "...");  // byte 57 is inside the first é
  EXPECT_EQ(text_excerpt("short"), "short");
}

class input_file_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("mstar-input-file-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(input_file_test, reads_a_regular_file_within_its_bound) {
  const auto path = dir_ / "a.txt";
  std::ofstream{path} << "hello";
  const auto text = read_input_file(path);
  ASSERT_TRUE(text) << text.error().message();
  EXPECT_EQ(*text, "hello");
  const auto big = read_input_file(path, 4);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().message(),
            path.string() + ": is 5 bytes, more than the 4 bytes this reader accepts");
}

TEST_F(input_file_test, names_what_a_path_is_instead_of_a_file_without_blocking) {
  const auto fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto from_fifo = read_input_file(fifo);  // would block forever if opened
  ASSERT_FALSE(from_fifo);
  EXPECT_EQ(from_fifo.error().message(),
            fifo.string() + ": is a FIFO (named pipe), not a regular file");
  const auto from_dir = read_input_file(dir_);
  ASSERT_FALSE(from_dir);
  EXPECT_EQ(from_dir.error().message(), dir_.string() + ": is a directory, not a file");
  const auto missing = read_input_file(dir_ / "missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::not_found);
  EXPECT_EQ(missing.error().message(), (dir_ / "missing").string() + ": no such file");
  const auto device = read_input_file("/dev/null");
  ASSERT_FALSE(device);
  EXPECT_TRUE(contains(device.error().message(), "is a character device"));
}

TEST(host_memory, reports_a_bound_and_formats_bytes_for_people) {
  const auto bound = host_memory_available();
  ASSERT_TRUE(bound.has_value());  // /proc/meminfo is always there on Linux
  EXPECT_GT(bound->bytes, 0u);
  EXPECT_FALSE(bound->source.empty());
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(16 * 1024), "16.0 KiB");
  EXPECT_EQ(format_bytes(std::uint64_t{3} << 29), "1.5 GiB");
}

}  // namespace
}  // namespace mstar
