// Admission comes before the costly part of a request: a request the
// service refuses with 429 (its places all held) has none of its images
// decoded, and a request that fails after admission (an image that cannot
// be read) gives its place back. The service is driven without sockets or
// an engine, over the tiny Qwen3.5 fixture's chat template and image
// reader, with a counter around the reader.
#include <atomic>
#include <memory>

#include "launcher/common/chat.hpp"
#include "launcher/common/served.hpp"
#include "models/load.hpp"
#include "serve/service.hpp"
#include "tests/serve/image_urls.hpp"
#include "tests/support/model_fixtures.hpp"

namespace mstar::test {
namespace {

using nlohmann::json;

struct counted_service {
  std::unique_ptr<models::causal_lm> model;
  std::shared_ptr<std::atomic<int>> reads = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<serve::service> svc;
};

// The fixture's front end with one admission place; `reads` counts the
// images the reader decodes.
std::unique_ptr<counted_service> start_counted() {
  auto out = std::make_unique<counted_service>();
  const auto dir = model_dir("qwen3_5_tiny").string();
  auto model = models::load_causal_lm(dir);
  EXPECT_TRUE(model.has_value()) << model.error().message();
  if (!model)
    return nullptr;
  out->model = std::move(*model);
  auto images = launcher::load_images(dir, *out->model).support;
  EXPECT_NE(images, nullptr);
  if (images == nullptr)
    return nullptr;
  auto counted = std::make_shared<serve::image_support>(*images);
  counted->read = [inner = images->read, reads = out->reads](std::span<const std::byte> bytes) {
    ++*reads;
    return inner(bytes);
  };
  serve::served_model m;
  m.name = "qwen3_5_tiny";
  m.vocab_size = out->model->vocab_size();
  m.tok = out->model->tok();
  m.max_context = 512;
  m.has_chat_template = true;
  m.images = counted;
  out->svc = std::make_unique<serve::service>(
      nullptr, m, launcher::load_chat(dir, out->model->tok()).render,
      serve::service_options{.api_key = "", .max_outstanding = 1});
  return out;
}

serve::service::outcome chat(serve::service& svc, const json& content) {
  const auto body = json{
      {"messages", json::array({{{"role", "user"}, {"content", content}}})},
      {"max_tokens", 2}}.dump();
  return svc.dispatch({"POST", "/v1/chat/completions", "", body});
}

json image_content(const std::string& url) {
  return json::array({{{"type", "text"}, {"text", "what is this?"}},
                      {{"type", "image_url"}, {"image_url", {{"url", url}}}}});
}

const serve::http_reply* reply_of(const serve::service::outcome& o) {
  return std::get_if<serve::http_reply>(&o);
}

TEST(admission, a_request_refused_with_429_has_no_image_decoded) {
  auto s = start_counted();
  ASSERT_NE(s, nullptr);
  // A text request takes the one place and keeps it.
  auto first = chat(*s->svc, "hello");
  auto* held = std::get_if<std::unique_ptr<serve::generation>>(&first);
  ASSERT_NE(held, nullptr) << reply_of(first)->body;
  EXPECT_EQ(s->svc->outstanding(), 1U);

  const auto refused = chat(*s->svc, image_content(data_url("rgb_20x12.png")));
  ASSERT_NE(reply_of(refused), nullptr);
  EXPECT_EQ(reply_of(refused)->status, 429);
  EXPECT_NE(reply_of(refused)->body.find("limit of 1 outstanding requests"), std::string::npos)
      << reply_of(refused)->body;
  EXPECT_EQ(*s->reads, 0) << "an image was decoded for a request refused by admission";
  EXPECT_EQ(s->svc->outstanding(), 1U);

  // Once the place is free, the same request is admitted and its image read.
  s->svc->finished(**held);
  auto admitted = chat(*s->svc, image_content(data_url("rgb_20x12.png")));
  auto* gen = std::get_if<std::unique_ptr<serve::generation>>(&admitted);
  ASSERT_NE(gen, nullptr) << reply_of(admitted)->body;
  EXPECT_EQ(*s->reads, 1);
  EXPECT_EQ((*gen)->request().images.size(), 1U);
  EXPECT_EQ((*gen)->request().image_parts.size(), 0U);
  s->svc->finished(**gen);
  EXPECT_EQ(s->svc->outstanding(), 0U);
}

TEST(admission, a_request_failing_after_admission_gives_its_place_back) {
  auto s = start_counted();
  ASSERT_NE(s, nullptr);
  // Bytes that are no image: admitted, read once, a 400 naming the part.
  const auto bad = chat(*s->svc, image_content("data:image/png;base64," + base64("no image")));
  ASSERT_NE(reply_of(bad), nullptr);
  EXPECT_EQ(reply_of(bad)->status, 400);
  const auto err = json::parse(reply_of(bad)->body)["error"];
  EXPECT_EQ(err["param"], "messages[0].content[1]");
  EXPECT_NE(err["message"].get<std::string>().find("the image cannot be read"), std::string::npos)
      << err;
  EXPECT_EQ(*s->reads, 1);
  EXPECT_EQ(s->svc->outstanding(), 0U);
  // Bad base64 is refused while parsing, before admission and before any
  // decoding, whatever the load.
  const auto b64 = chat(*s->svc, image_content("data:image/png;base64,iVBO*w0K"));
  ASSERT_NE(reply_of(b64), nullptr);
  EXPECT_EQ(reply_of(b64)->status, 400);
  EXPECT_NE(reply_of(b64)->body.find("character '*' at offset 4"), std::string::npos)
      << reply_of(b64)->body;
  EXPECT_EQ(*s->reads, 1);
  EXPECT_EQ(s->svc->outstanding(), 0U);
  // The place is free: a good image request is admitted.
  auto ok = chat(*s->svc, image_content(data_url("rgb_20x12.png")));
  auto* gen = std::get_if<std::unique_ptr<serve::generation>>(&ok);
  ASSERT_NE(gen, nullptr) << reply_of(ok)->body;
  s->svc->finished(**gen);
}

}  // namespace
}  // namespace mstar::test
