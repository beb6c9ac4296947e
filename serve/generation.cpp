#include "serve/generation.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <random>

#include "models/tokenizer.hpp"

namespace mstar::serve {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* reason_text(engine::finish_reason r) {
  return r == engine::finish_reason::cancelled ? "abort" : engine::to_string(r);
}

json reason_json(const std::optional<engine::finish_reason>& r) {
  return r ? json(reason_text(*r)) : json(nullptr);
}

}  // namespace

std::string make_response_id(endpoint kind) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:016x}{:08x}", kind == endpoint::chat ? "chatcmpl" : "cmpl", rng(),
                     static_cast<std::uint32_t>(rng()));
}

generation::generation(generation_request req, std::string id, const models::tokenizer* tok,
                       clock::time_point start)
    : req_(std::move(req)),
      id_(std::move(id)),
      tok_(tok),
      start_(start),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
  const auto n = static_cast<std::size_t>(req_.sampling.n);
  choices_.resize(req_.prompts.size() * n);
  unfinished_ = choices_.size();
  for (std::size_t i = 0; i < req_.prompts.size(); ++i) {
    prompt_of_[req_.prompts.size() == 1 ? id_ : fmt::format("{}-{}", id_, i)] = i;
    usage_.prompt_tokens += static_cast<std::int64_t>(req_.prompts[i].ids.size());
  }
  usage_.prompt_tokens += req_.image_tokens;
}

std::string generation::on_delta(const engine::delta& d) {
  const auto it = prompt_of_.find(d.id);
  if (it == prompt_of_.end() || d.index < 0 || d.index >= req_.sampling.n)
    return {};
  const auto index =
      it->second * static_cast<std::size_t>(req_.sampling.n) + static_cast<std::size_t>(d.index);
  auto& c = choices_[index];
  if (c.finished)
    return {};
  const auto now = clock::now();
  if (!d.tokens.empty()) {
    if (!timing_.ttft_s)
      timing_.ttft_s = std::chrono::duration<double>(now - start_).count();
    if (c.last_delta)
      timing_.inter_token_s.push_back(std::chrono::duration<double>(now - *c.last_delta).count());
    c.last_delta = now;
  }
  std::string out;
  if (req_.stream)
    out = chunk(index, d, c);
  c.text += d.text;
  c.tokens.insert(c.tokens.end(), d.tokens.begin(), d.tokens.end());
  c.chosen.insert(c.chosen.end(), d.chosen_logprobs.begin(), d.chosen_logprobs.end());
  c.top.insert(c.top.end(), d.top_logprobs.begin(), d.top_logprobs.end());
  if (d.finished) {
    c.finished = d.finished;
    c.error = d.error;
    --unfinished_;
    usage_.completion_tokens += d.counts.completion_tokens;
    if (d.index == 0)
      usage_.cached_tokens += d.counts.cached_tokens;
    usage_.kv_pages_peak = std::max(usage_.kv_pages_peak, d.counts.kv_pages_peak);
    if (unfinished_ == 0)
      timing_.e2e_s = std::chrono::duration<double>(now - start_).count();
  }
  return out;
}

std::optional<api_error> generation::failure() const {
  for (const auto& c : choices_) {
    if (c.finished == engine::finish_reason::error) {
      return api_error{500, fmt::format("the engine failed the request: {}", c.error),
                       "internal_server_error", "", "engine_error"};
    }
  }
  return std::nullopt;
}

std::string generation::finish_reason() const {
  return choices_.empty() || !choices_[0].finished ? std::string{}
                                                   : reason_text(*choices_[0].finished);
}

std::string generation::header_json() const {
  const char* object = req_.kind == endpoint::chat
                           ? (req_.stream ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  return fmt::format(R"("id":{},"object":"{}","created":{},"model":{})", dump(id_), object,
                     created_, dump(req_.model));
}

std::string generation::logprobs_json(std::span<const engine::token_logprob> chosen,
                                      std::span<const std::vector<engine::token_logprob>> top,
                                      std::size_t text_offset) const {
  if (!req_.logprobs)
    return "null";
  auto text_of = [&](engine::token_id id) {
    const engine::token_id one[] = {id};
    return tok_ != nullptr ? tok_->decode(one) : fmt::format("token_id:{}", id);
  };
  const auto k = static_cast<std::size_t>(req_.top_logprobs);
  if (req_.kind == endpoint::chat) {
    json content = json::array();
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      auto entry = [&](const engine::token_logprob& t) {
        const auto s = text_of(t.id);
        return json{
            {"token", s}, {"logprob", t.logprob}, {"bytes", std::vector<int>(s.begin(), s.end())}};
      };
      json e = entry(chosen[i]);
      e["top_logprobs"] = json::array();
      for (std::size_t j = 0; i < top.size() && j < std::min(k, top[i].size()); ++j)
        e["top_logprobs"].push_back(entry(top[i][j]));
      content.push_back(std::move(e));
    }
    return dump(json{{"content", std::move(content)}});
  }
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const auto s = text_of(chosen[i].id);
    tokens.push_back(s);
    lps.push_back(chosen[i].logprob);
    offsets.push_back(text_offset);
    text_offset += s.size();
    json alts = json::object();
    for (std::size_t j = 0; i < top.size() && j < std::min(k, top[i].size()); ++j)
      alts[text_of(top[i][j].id)] = top[i][j].logprob;
    tops.push_back(std::move(alts));
  }
  return dump(json{{"tokens", tokens},
                   {"token_logprobs", lps},
                   {"top_logprobs", tops},
                   {"text_offset", offsets}});
}

std::string generation::usage_json() const {
  const auto& u = usage_;
  return fmt::format(R"({{"prompt_tokens":{},"completion_tokens":{},"total_tokens":{},)"
                     R"("prompt_tokens_details":{{"cached_tokens":{}}},"kv_pages_peak":{}}})",
                     u.prompt_tokens, u.completion_tokens, u.prompt_tokens + u.completion_tokens,
                     u.cached_tokens, u.kv_pages_peak);
}

std::string generation::chunk(std::size_t index, const engine::delta& d, choice& c) {
  const auto prompt = index / static_cast<std::size_t>(req_.sampling.n);
  std::string out;
  const std::string usage_field = req_.include_usage ? R"(,"usage":null)" : "";
  auto emit = [&](const std::string& choice_body) {
    out += fmt::format("data: {{{},\"choices\":[{{\"index\":{},{}}}]{}}}\n\n", header_json(), index,
                       choice_body, usage_field);
  };
  std::string extra;
  if (req_.return_token_ids) {
    extra += ",\"token_ids\":" + dump(d.tokens);
    if (!c.started)
      extra += ",\"prompt_token_ids\":" + dump(req_.prompts[prompt].ids);
  }
  const auto logprobs = logprobs_json(d.chosen_logprobs, d.top_logprobs, c.text.size());
  if (req_.kind == endpoint::chat) {
    if (!c.started) {
      emit(R"("delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null)");
    }
    const auto delta = d.text.empty() ? std::string{"{}"} : dump(json{{"content", d.text}});
    if (!d.text.empty() || d.finished || !d.tokens.empty()) {
      emit(fmt::format(R"("delta":{},"logprobs":{},"finish_reason":{}{})", delta, logprobs,
                       dump(reason_json(d.finished)), extra));
    }
  } else {
    std::string text = d.text;
    if (!c.started && req_.echo) {
      const auto& p = req_.prompts[prompt];
      text = echo_text(p) + text;
    }
    if (!text.empty() || d.finished || !d.tokens.empty()) {
      emit(fmt::format(R"("text":{},"logprobs":{},"finish_reason":{}{})", dump(text), logprobs,
                       dump(reason_json(d.finished)), extra));
    }
  }
  c.started = true;
  return out;
}

std::string generation::echo_text(const prompt_input& p) const {
  if (p.text)
    return *p.text;
  return tok_ != nullptr ? tok_->decode(p.ids) : std::string{};
}

std::string generation::stream_tail() const {
  std::string out;
  if (req_.include_usage)
    out += fmt::format("data: {{{},\"choices\":[],\"usage\":{}}}\n\n", header_json(), usage_json());
  return out + "data: [DONE]\n\n";
}

std::string generation::stream_error(const api_error& e) {
  return "data: " + error_body(e) + "\n\ndata: [DONE]\n\n";
}

std::string generation::body() const {
  std::string choices;
  const auto n = static_cast<std::size_t>(req_.sampling.n);
  for (std::size_t i = 0; i < choices_.size(); ++i) {
    const auto& c = choices_[i];
    const auto& p = req_.prompts[i / n];
    std::string extra;
    if (req_.return_token_ids)
      extra = ",\"token_ids\":" + dump(c.tokens) + ",\"prompt_token_ids\":" + dump(p.ids);
    if (!choices.empty())
      choices += ",";
    const auto logprobs = logprobs_json(c.chosen, c.top, 0);
    if (req_.kind == endpoint::chat) {
      choices +=
          fmt::format(R"({{"index":{},"message":{{"role":"assistant","content":{}}},"logprobs":{},)"
                      R"("finish_reason":{}{}}})",
                      i, dump(c.text), logprobs, dump(reason_json(c.finished)), extra);
    } else {
      std::string text = c.text;
      if (req_.echo)
        text = echo_text(p) + text;
      choices += fmt::format(R"({{"index":{},"text":{},"logprobs":{},"finish_reason":{}{}}})", i,
                             dump(text), logprobs, dump(reason_json(c.finished)), extra);
    }
  }
  std::string prompt_ids;
  if (req_.return_token_ids) {
    json ids = req_.prompts.size() == 1 ? json(req_.prompts[0].ids) : json::array();
    if (req_.prompts.size() > 1) {
      for (const auto& p : req_.prompts)
        ids.push_back(p.ids);
    }
    prompt_ids = ",\"prompt_token_ids\":" + dump(ids);
  }
  return fmt::format(R"({{{},"choices":[{}],"usage":{}{}}})", header_json(), choices, usage_json(),
                     prompt_ids);
}

std::string error_body(const api_error& e) {
  return dump(json{{"error",
                    {{"message", e.message},
                     {"type", e.type},
                     {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                     {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}});
}

}  // namespace mstar::serve
