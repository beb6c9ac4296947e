// The OpenAI body checks and response shapes without sockets or an engine.
#include "serve/openai_request.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/tokenizer.hpp"
#include "serve/generation.hpp"

namespace mstar::serve {
namespace {

using nlohmann::json;

struct fixture {
  models::byte_tokenizer tok = models::byte_tokenizer::make(3, 259).value();
  served_model model{.name = "m",
                     .max_context = 64,
                     .vocab_size = 259,
                     .tok = &tok,
                     .has_chat_template = true,
                     .images = nullptr};
  api_result<generation_request> parse(const json& body, endpoint kind = endpoint::completions) {
    return parse_request(body.dump(), kind, model);
  }
};

TEST(openai_request, reads_every_prompt_form) {
  fixture f;
  EXPECT_EQ(f.parse({{"prompt", "hi"}})->prompts.size(), 1U);
  EXPECT_EQ(f.parse({{"prompt", {"a", "b"}}})->prompts.size(), 2U);
  EXPECT_EQ(f.parse({{"prompt", {5, 6}}})->prompts[0].ids, (std::vector<engine::token_id>{5, 6}));
  EXPECT_EQ(f.parse({{"prompt", {{5}, {6, 7}}}})->prompts.size(), 2U);
  EXPECT_EQ(f.parse({{"prompt", {"a", 5}}}).error().param, "prompt");
  EXPECT_EQ(f.parse({{"prompt", {5, "a"}}}).error().param, "prompt");
  EXPECT_EQ(f.parse({{"prompt", 5}}).error().param, "prompt");
}

TEST(openai_request, fills_sampling_and_stop_rules_with_openai_defaults) {
  fixture f;
  auto r = f.parse({{"prompt", "hi"}, {"stop", "x"}, {"top_k", -1}, {"seed", 3}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sampling.temperature, 1.0F);
  EXPECT_EQ(r->sampling.top_k, 0);
  EXPECT_EQ(r->sampling.seed, 3U);
  EXPECT_EQ(r->stop.stop_strings, std::vector<std::string>{"x"});
  ASSERT_TRUE(finish_prompts(*r, f.model).has_value());
  EXPECT_EQ(r->stop.max_tokens, 62) << "what the context leaves";
  auto chat =
      f.parse({{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"max_completion_tokens", 7}},
              endpoint::chat);
  ASSERT_TRUE(chat.has_value());
  EXPECT_EQ(chat->stop.max_tokens, 7);
}

TEST(openai_request, refuses_what_would_change_the_answer_and_ignores_the_rest) {
  fixture f;
  EXPECT_TRUE(f.parse({{"prompt", "hi"}, {"user", "u1"}, {"metadata", {{"a", 1}}}}).has_value());
  EXPECT_TRUE(f.parse({{"prompt", "hi"}, {"logit_bias", json::object()}}).has_value());
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, json>>{{"logit_bias", {{"5", 1}}},
                                                 {"suffix", "x"},
                                                 {"min_tokens", 3},
                                                 {"guided_json", {{"type", "object"}}},
                                                 {"best_of", 3}}) {
    json body{{"prompt", "hi"}};
    body[field] = value;
    EXPECT_EQ(f.parse(body).error().param, field);
  }
  EXPECT_EQ(f.parse({{"messages", {{{"role", "user"}, {"content", "a"}}}},
                     {"response_format", {{"type", "json_object"}}}},
                    endpoint::chat)
                .error()
                .param,
            "response_format");
}

TEST(openai_request, flattens_text_parts_and_refuses_images) {
  fixture f;
  auto r = f.parse(
      {{"messages",
        {{{"role", "user"},
          {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}},
      endpoint::chat);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->messages[0]["content"], "a\nb");
  auto image =
      f.parse({{"messages",
                {{{"role", "user"},
                  {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}},
              endpoint::chat);
  EXPECT_EQ(image.error().param, "messages[0].content[0]");  // this model takes no images
  EXPECT_EQ(f.parse({{"messages", {{{"role", "robot"}, {"content", "a"}}}}}, endpoint::chat)
                .error()
                .param,
            "messages[0].role");
}

TEST(openai_request, checks_the_context_after_tokenizing) {
  fixture f;
  auto r = f.parse({{"prompt", std::string(64, 'a')}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(finish_prompts(*r, f.model).error().code, "context_length_exceeded");
  auto fits = f.parse({{"prompt", std::string(60, 'a')}, {"max_tokens", 4}});
  EXPECT_TRUE(finish_prompts(*fits, f.model).has_value());
  auto over = f.parse({{"prompt", std::string(60, 'a')}, {"max_tokens", 5}});
  EXPECT_EQ(finish_prompts(*over, f.model).error().param, "max_tokens");
}

TEST(generation, folds_deltas_of_two_prompts_and_n_samples_into_indexed_choices) {
  fixture f;
  auto r = f.parse({{"prompt", {"ab", "c"}}, {"n", 2}, {"logprobs", 1}});
  ASSERT_TRUE(finish_prompts(*r, f.model).has_value());
  generation g{std::move(*r), "cmpl-x", &f.tok};
  for (const char* id : {"cmpl-x-0", "cmpl-x-1"}) {
    for (int i = 0; i < 2; ++i) {
      engine::delta d;
      d.id = id;
      d.index = i;
      d.tokens = {100};
      d.text = "a";
      d.chosen_logprobs = {{100, -0.25F}};
      d.top_logprobs = {{{100, -0.25F}}};
      d.finished = engine::finish_reason::stop;
      d.counts = {2, 1, 0};
      EXPECT_TRUE(g.on_delta(d).empty()) << "not streaming";
    }
  }
  ASSERT_TRUE(g.done());
  const auto body = json::parse(g.body());
  ASSERT_EQ(body["choices"].size(), 4U);
  EXPECT_EQ(body["choices"][3]["index"], 3);
  EXPECT_EQ(body["choices"][0]["logprobs"]["token_logprobs"][0], -0.25);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
}

}  // namespace
}  // namespace mstar::serve
