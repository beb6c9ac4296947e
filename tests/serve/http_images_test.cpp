// Images through the chat endpoint end to end (real sockets, the tiny
// Qwen3.5 fixture with its folder's chat template and image processor, as
// mstar-serve loads them): OpenAI image_url parts with PNG and JPEG data URLs
// give transformers' greedy tokens (tests/fixtures/models/qwen3_5_tiny's
// chat_prompts), /metrics counts the images; URLs the server would have to
// fetch, bad base64, bytes that are no image and images for a model without
// a vision tower are 400s naming the part.
#include "tests/serve/image_urls.hpp"
#include "tests/serve/serve_support.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::test {
namespace {

// The fixture's messages with each image file name replaced by its data URL.
json with_data_urls(json messages) {
  for (auto& m : messages) {
    for (auto& part : m["content"]) {
      if (part["type"] == "image_url")
        part["image_url"]["url"] = data_url(part["image_url"]["url"]);
    }
  }
  return messages;
}

serve_setup qwen_setup() {
  auto setup = default_setup();
  setup.model = "qwen3_5_tiny";
  setup.engine.pools.page_size = 4;
  setup.folder_front_end = true;
  return setup;
}

json chat(const json& messages) {
  return {{"messages", messages},
          {"max_tokens", 8},
          {"temperature", 0},
          {"ignore_eos", true},
          {"return_token_ids", true}};
}

void expect_400(const http::response<http::string_body>& r, const std::string& param,
                const std::string& says) {
  EXPECT_EQ(r.result_int(), 400) << r.body();
  const auto j = json::parse(r.body(), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.body();
  EXPECT_EQ(j["error"]["param"], param) << r.body();
  EXPECT_NE(j["error"]["message"].get<std::string>().find(says), std::string::npos) << r.body();
}

TEST(http_images, chat_image_parts_give_transformers_greedy_tokens) {
  const auto expected = load_fixture_json("models/qwen3_5_tiny/expected.json");
  auto s = start_server(qwen_setup());
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  std::size_t images = 0;
  for (const auto& p : expected.at("chat_prompts")) {
    const auto r = c.post("/v1/chat/completions", chat(with_data_urls(p.at("messages"))));
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const auto j = json::parse(r.body());
    EXPECT_EQ(j["choices"][0]["token_ids"], p.at("generated_ids")) << p.at("images");
    EXPECT_EQ(j["usage"]["prompt_tokens"], p.at("prompt_ids").size()) << p.at("images");
    images += p.at("images").size();
  }
  // Streamed, the same tokens.
  const auto& p = expected.at("chat_prompts").at(2);
  auto body = chat(with_data_urls(p.at("messages")));
  body["stream"] = true;
  const auto r = c.post("/v1/chat/completions", body);
  ASSERT_EQ(r.result_int(), 200) << r.body();
  std::vector<std::uint32_t> ids;
  for (const auto& e : sse_events(r.body())) {
    if (e == "[DONE]")
      continue;
    const auto j = json::parse(e);
    for (const auto& id : j["choices"][0].value("token_ids", json::array()))
      ids.push_back(id);
  }
  EXPECT_EQ(json(ids), p.at("generated_ids"));
  images += p.at("images").size();
  const auto text = c.call(http::verb::get, "/metrics").body();
  EXPECT_EQ(metric(text, "mstar:request_images_total"), static_cast<double>(images)) << text;
}

TEST(http_images, refuses_urls_bad_base64_and_bad_images_naming_the_part) {
  auto s = start_server(qwen_setup());
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  auto with_url = [](const std::string& url) {
    return chat(json::array({{{"role", "user"},
                              {"content",
                               {{{"type", "text"}, {"text", "look"}},
                                {{"type", "image_url"}, {"image_url", {{"url", url}}}}}}}}));
  };
  const std::string part = "messages[0].content[1]";
  for (const char* url : {"https://example.com/cat.png", "http://127.0.0.1/cat.png",
                          "file:///etc/passwd", "cat.png"}) {
    expect_400(c.post("/v1/chat/completions", with_url(url)), part + ".image_url.url",
               "fetches nothing");
  }
  expect_400(c.post("/v1/chat/completions", with_url("data:image/png;base64,iVBO*w0K")),
             part + ".image_url.url", "not base64: character '*' at offset 4");
  expect_400(c.post("/v1/chat/completions", with_url("data:image/gif;base64,R0lG")),
             part + ".image_url.url", "'image/gif' is not supported");
  expect_400(c.post("/v1/chat/completions",
                    with_url("data:image/png;base64," + base64("<html>no image</html>"))),
             part, "the image cannot be read");
  const auto png = image_file_bytes("rgb_20x12.png");
  expect_400(c.post("/v1/chat/completions",
                    with_url("data:image/png;base64," + base64(png.substr(0, png.size() / 2)))),
             part, "the image cannot be read");
  auto no_object = with_url("x");
  no_object["messages"][0]["content"][1]["image_url"] = 5;
  expect_400(c.post("/v1/chat/completions", no_object), part + ".image_url", "'url'");
  // The server still serves.
  const auto ok = c.post("/v1/chat/completions", with_url(data_url("rgb_20x12.png")));
  EXPECT_EQ(ok.result_int(), 200) << ok.body();
}

TEST(http_images, a_model_without_a_vision_tower_refuses_image_parts) {
  auto setup = default_setup();
  setup.render = [](const serve::generation_request&) { return result<std::string>{"x"}; };
  auto s = start_server(setup);
  ASSERT_NE(s, nullptr);
  client c{s->http_port()};
  const auto body = chat(json::array(
      {{{"role", "user"},
        {"content",
         {{{"type", "image_url"}, {"image_url", {{"url", data_url("rgb_20x12.png")}}}}}}}}));
  expect_400(c.post("/v1/chat/completions", body), "messages[0].content[0]", "takes no images");
}

}  // namespace
}  // namespace mstar::test
