#include "serve/openai_request.hpp"

#include <fmt/format.h>
#include <random>

#include "core/untrusted_json.hpp"
#include "models/tokenizer.hpp"
#include "serve/internal/chat_content.hpp"
#include "serve/internal/json_fields.hpp"

namespace mstar::serve {
namespace {

using internal::fields;
using json = nlohmann::ordered_json;

constexpr std::size_t max_stop_strings = 64;
constexpr std::size_t max_prompts = 1024;
constexpr std::int32_t max_n = 128;
constexpr std::int32_t max_logprobs = 20;
constexpr std::int64_t max_windowed_tokens = std::int64_t{1} << 24;

// Fields that change what comes back and that mstar does not implement:
// refused rather than silently ignored (`allowed` says which values pass).
struct unsupported_field {
  const char* name;
  bool (*allowed)(const json& v);
};

bool null_or_empty(const json& v) {
  return v.is_null() || (v.is_object() && v.empty()) ||
         (v.is_string() && v.get_ref<const std::string&>().empty()) || (v.is_array() && v.empty());
}
bool null_or_false(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>());
}
bool null_or_zero(const json& v) {
  return v.is_null() || (v.is_number() && v.get<double>() == 0.0);
}
bool null_or_one(const json& v) {
  return v.is_null() || (v.is_number() && v.get<double>() == 1.0);
}
bool text_format(const json& v) {
  return v.is_null() || (v.is_object() && v.value("type", json{}) == "text");
}
bool text_modalities(const json& v) {
  return v.is_null() || v == json::array({"text"});
}
bool auto_or_none(const json& v) {
  return v.is_null() || v == "auto" || v == "none";
}

constexpr unsupported_field unsupported[] = {
    {"suffix", null_or_empty},
    {"logit_bias", null_or_empty},
    {"min_tokens", null_or_zero},
    {"min_p", null_or_zero},
    {"response_format", text_format},
    {"guided_json", null_or_empty},
    {"guided_regex", null_or_empty},
    {"guided_choice", null_or_empty},
    {"guided_grammar", null_or_empty},
    {"structured_outputs", null_or_empty},
    {"functions", null_or_empty},
    {"function_call", null_or_empty},
    {"prompt_logprobs", null_or_zero},
    {"use_beam_search", null_or_false},
    {"length_penalty", null_or_one},
    {"logits_processors", null_or_empty},
    {"bad_words", null_or_empty},
    {"allowed_token_ids", null_or_empty},
    {"truncate_prompt_tokens", null_or_empty},
    {"audio", null_or_empty},
    {"modalities", text_modalities},
    {"prediction", null_or_empty},
    {"tool_choice", auto_or_none},
};

api_result<bool> refuse_unsupported(const json& body) {
  for (const auto& f : unsupported) {
    const auto it = body.find(f.name);
    if (it != body.end() && !f.allowed(*it)) {
      return bad_request(fmt::format("'{}' is not supported by this server", f.name), f.name,
                         "unsupported_parameter");
    }
  }
  return true;
}

// `prompt`: a string, a list of strings, a list of token ids, or a list of
// lists of token ids.
api_result<bool> read_prompts(const json& body, const served_model& model, generation_request& r) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null())
    return bad_request("'prompt' is required", "prompt");
  auto ids_of = [&](const json& list) -> api_result<std::vector<engine::token_id>> {
    std::vector<engine::token_id> ids;
    ids.reserve(list.size());
    for (const auto& v : list) {
      if (!v.is_number_integer())
        return bad_request("'prompt' mixes token ids with other values", "prompt");
      const auto id = v.get<std::int64_t>();
      if (id < 0 || id >= model.vocab_size) {
        return bad_request(fmt::format("token id {} in 'prompt' is outside the vocabulary [0, {})",
                                       id, model.vocab_size),
                           "prompt");
      }
      ids.push_back(static_cast<engine::token_id>(id));
    }
    return ids;
  };
  if (it->is_string()) {
    r.prompts.push_back({it->get<std::string>(), {}});
  } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    auto ids = ids_of(*it);
    if (!ids)
      return ids.error();
    r.prompts.push_back({std::nullopt, std::move(*ids)});
  } else if (it->is_array()) {
    if (it->size() > max_prompts)
      return bad_request(fmt::format("'prompt' lists more than {} prompts", max_prompts), "prompt");
    for (const auto& p : *it) {
      if (p.is_string()) {
        r.prompts.push_back({p.get<std::string>(), {}});
      } else if (p.is_array()) {
        auto ids = ids_of(p);
        if (!ids)
          return ids.error();
        r.prompts.push_back({std::nullopt, std::move(*ids)});
      } else {
        return bad_request("'prompt' must be a string, a list of strings or token ids", "prompt");
      }
    }
  } else {
    return bad_request("'prompt' must be a string, a list of strings or token ids", "prompt");
  }
  for (const auto& p : r.prompts) {
    if ((p.text && p.text->empty()) || (!p.text && p.ids.empty()))
      return bad_request("'prompt' is empty", "prompt");
  }
  if (r.prompts.empty())
    return bad_request("'prompt' is empty", "prompt");
  return true;
}

// `messages`: objects with a role and content (a string, or parts: text
// parts are joined, image parts kept for the template, their images read);
// other keys pass to the template as they are.
api_result<bool> read_messages(const json& body, const served_model& model, generation_request& r) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array())
    return bad_request("'messages' must be a list of messages", "messages");
  if (it->empty())
    return bad_request("'messages' is empty", "messages");
  r.messages = json::array();
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& m = (*it)[i];
    const auto param = fmt::format("messages[{}]", i);
    if (!m.is_object())
      return bad_request(param + " must be an object", param);
    const auto role = m.find("role");
    static const std::vector<std::string> roles{"system", "developer", "user", "assistant", "tool"};
    if (role == m.end() || !role->is_string() ||
        std::find(roles.begin(), roles.end(), role->get<std::string>()) == roles.end()) {
      return bad_request(param + ".role must be one of system, developer, user, assistant, tool",
                         param + ".role");
    }
    json out = m;
    const auto content = m.find("content");
    if (content != m.end() && content->is_array()) {
      auto parts = internal::read_content_parts(*content, param, model.images.get(), r.image_parts);
      if (!parts)
        return parts.error();
      out["content"] = std::move(*parts);
    } else if (content != m.end() && !content->is_string() && !content->is_null()) {
      return bad_request(param + ".content must be a string or a list of content parts",
                         param + ".content");
    } else if ((content == m.end() || content->is_null()) &&
               role->get<std::string>() != "assistant") {
      return bad_request(param + ".content is required", param + ".content");
    }
    r.messages.push_back(std::move(out));
  }
  return true;
}

// `mstar_window`: {"window_units": W, "context_units": C, "overlap_units": O,
// "tokens_per_unit": T}, W required; the others default to 0, 0 and 1. The
// schedule's own rules (O < W...) are checked with the request's max_tokens.
api_result<std::optional<engine::window_params>> read_window(const json& doc) {
  const auto it = doc.find("mstar_window");
  if (it == doc.end() || it->is_null())
    return std::optional<engine::window_params>{};
  if (!it->is_object())
    return bad_request("'mstar_window' must be an object", "mstar_window");
  engine::window_params w;
  bool has_window = false;
  for (const auto& [key, value] : it->items()) {
    const std::string param = "mstar_window." + key;
    std::int64_t* out = nullptr;
    std::int64_t lo = 0;
    if (key == "window_units") {
      out = &w.window_units;
      lo = 1;
      has_window = true;
    } else if (key == "context_units") {
      out = &w.context_units;
    } else if (key == "overlap_units") {
      out = &w.overlap_units;
    } else if (key == "tokens_per_unit") {
      out = &w.tokens_per_unit;
      lo = 1;
    } else {
      return bad_request(fmt::format("'{}' is not a field of mstar_window (window_units, "
                                     "context_units, overlap_units, tokens_per_unit)",
                                     param),
                         param);
    }
    if (!value.is_number_integer() || value.get<std::int64_t>() < lo ||
        value.get<std::int64_t>() > (std::int64_t{1} << 24)) {
      return bad_request(
          fmt::format("'{}' must be a whole number in [{}, {}]", param, lo, std::int64_t{1} << 24),
          param);
    }
    *out = value.get<std::int64_t>();
  }
  if (!has_window)
    return bad_request("'mstar_window.window_units' is required", "mstar_window.window_units");
  if (w.overlap_units >= w.window_units) {
    return bad_request("'mstar_window.overlap_units' must be smaller than window_units",
                       "mstar_window.overlap_units");
  }
  return std::optional<engine::window_params>{w};
}

}  // namespace

api_result<generation_request> parse_request(std::string_view body, endpoint kind,
                                             const served_model& model) {
  auto parsed = parse_untrusted_json<json>(body, "the body");
  if (!parsed)
    return bad_request(parsed.error().message(), "", "invalid_json");
  const json& doc = *parsed;
  if (!doc.is_object())
    return bad_request("the body must be a JSON object", "", "invalid_json");
  if (auto ok = refuse_unsupported(doc); !ok)
    return ok.error();
  generation_request r;
  r.kind = kind;
  fields f{doc};
  auto& s = r.sampling;
  auto& st = r.stop;
  std::optional<std::int64_t> max_tokens, seed, logprobs_n, top_k;
  std::optional<std::int64_t> n, best_of;
  std::optional<double> temperature, top_p, presence, frequency, repetition;
  std::optional<bool> logprobs_flag;
  std::optional<std::string> model_name, salt;
  const bool chat = kind == endpoint::chat;
  auto window = read_window(doc);
  if (!window)
    return window.error();
  r.window = *window;
  f.string("model", model_name);
  // A windowed request keeps a bounded context: its output may outgrow the
  // model's (finish_prompts checks what it attends to).
  f.integer(chat && doc.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens",
            max_tokens, 0, r.window ? max_windowed_tokens : model.max_context);
  f.number("temperature", temperature, 0.0, 100.0);
  f.number("top_p", top_p, 1e-9, 1.0);
  f.integer("top_k", top_k, -1, 1 << 30);
  f.integer("seed", seed, std::numeric_limits<std::int64_t>::min(),
            std::numeric_limits<std::int64_t>::max());
  f.integer("n", n, 1, max_n);
  f.integer("best_of", best_of, 1, max_n);
  f.number("presence_penalty", presence, -2.0, 2.0);
  f.number("frequency_penalty", frequency, -2.0, 2.0);
  f.number("repetition_penalty", repetition, 1e-6, 100.0);
  f.boolean("stream", r.stream);
  f.boolean("return_token_ids", r.return_token_ids);
  f.boolean("ignore_eos", st.ignore_eos);
  f.boolean("skip_special_tokens", r.skip_special_tokens);
  f.string("cache_salt", salt);
  f.strings_or_string("stop", st.stop_strings, max_stop_strings);
  f.token_ids("stop_token_ids", st.stop_token_ids, model.vocab_size);
  f.stream_options(r.include_usage);
  if (chat) {
    f.boolean("logprobs", logprobs_flag);
    f.integer("top_logprobs", logprobs_n, 0, max_logprobs);
    f.boolean("add_generation_prompt", r.add_generation_prompt);
    f.boolean("echo", r.echo);
    f.object("chat_template_kwargs", r.template_kwargs);
    f.array("tools", r.tools);
  } else {
    f.integer("logprobs", logprobs_n, 0, max_logprobs);
    f.boolean("echo", r.echo);
  }
  if (f.failed())
    return *f.failed();
  if (model_name && *model_name != model.name) {
    return bad_request(fmt::format("the model '{}' does not exist; this server serves '{}'",
                                   *model_name, model.name),
                       "model", "model_not_found");
  }
  r.model = model.name;
  if (chat && r.echo)
    return bad_request("'echo' is not supported on chat completions", "echo",
                       "unsupported_parameter");
  if (best_of && *best_of != n.value_or(1))
    return bad_request("'best_of' other than 'n' is not supported", "best_of",
                       "unsupported_parameter");
  for (const auto& stop : st.stop_strings) {
    if (stop.empty())
      return bad_request("'stop' holds an empty string", "stop");
  }
  if (!st.stop_strings.empty() && model.tok == nullptr)
    return bad_request("'stop' strings need a tokenizer; this model has none", "stop");
  if (max_tokens) {
    st.max_tokens = static_cast<std::int32_t>(*max_tokens);
    r.max_tokens_given = true;
  }
  s.temperature = static_cast<float>(temperature.value_or(1.0));
  s.top_p = static_cast<float>(top_p.value_or(1.0));
  s.top_k = static_cast<std::int32_t>(std::max<std::int64_t>(top_k.value_or(0), 0));
  s.presence_penalty = static_cast<float>(presence.value_or(0.0));
  s.frequency_penalty = static_cast<float>(frequency.value_or(0.0));
  s.repetition_penalty = static_cast<float>(repetition.value_or(1.0));
  s.n = static_cast<std::int32_t>(n.value_or(1));
  r.seed_given = seed.has_value();
  s.seed = seed ? static_cast<std::uint64_t>(*seed) : std::random_device{}() * 0x100000001ULL;
  r.cache_salt = salt.value_or("");
  if (chat) {
    r.logprobs = logprobs_flag.value_or(false);
    if (logprobs_n && *logprobs_n > 0 && !r.logprobs)
      return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    r.top_logprobs = static_cast<std::int32_t>(logprobs_n.value_or(0));
    if (auto ok = read_messages(doc, model, r); !ok)
      return ok.error();
    if (model.tok == nullptr || !model.has_chat_template) {
      return bad_request("this model has no chat template; use /v1/completions", "messages",
                         "no_chat_template");
    }
  } else {
    r.logprobs = logprobs_n.has_value();
    r.top_logprobs = static_cast<std::int32_t>(logprobs_n.value_or(0));
    if (auto ok = read_prompts(doc, model, r); !ok)
      return ok.error();
    if (r.echo && r.logprobs) {
      return bad_request("'echo' with 'logprobs' is not supported (no prompt log-probabilities)",
                         "echo", "unsupported_parameter");
    }
  }
  if (r.logprobs)
    s.logprobs = std::max(r.top_logprobs, 1);
  return r;
}

namespace {

// The tokens a chat prompt's images add once each placeholder run is
// expanded to its image's count; a 400 when the rendered prompt does not
// hold one placeholder run per image part (the template printed no markers).
api_result<std::size_t> image_tokens(const generation_request& req, const served_model& model) {
  if (!model.images)
    return bad_request("this model takes no images (it has no vision tower)", "messages");
  const auto& ids = req.prompts.at(0).ids;
  const auto placeholder = model.images->placeholder;
  std::size_t runs = 0, marked = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    marked += ids[i] == placeholder ? 1 : 0;
    runs += ids[i] == placeholder && (i == 0 || ids[i - 1] != placeholder) ? 1 : 0;
  }
  if (runs != req.images.size()) {
    return bad_request(fmt::format("the chat template rendered {} image placeholder run(s) for "
                                   "{} image part(s); it must mark each image part",
                                   runs, req.images.size()),
                       "messages", "chat_template_error");
  }
  std::size_t need = 0;
  const auto merge = std::max<std::int64_t>(model.images->merge_size, 1);
  for (const auto& im : req.images)
    need +=
        static_cast<std::size_t>(std::max<std::int64_t>(im.t * im.h * im.w / (merge * merge), 1));
  return need > marked ? need - marked : 0;
}

}  // namespace

api_result<bool> read_images(generation_request& req, const served_model& model) {
  if (req.image_parts.empty())
    return true;
  if (!model.images)
    return bad_request("this model takes no images (it has no vision tower)", "messages");
  std::vector<models::image_input> images;
  images.reserve(req.image_parts.size());
  for (const auto& part : req.image_parts) {
    auto im = internal::read_image(part, *model.images);
    if (!im)
      return im.error();
    images.push_back(std::move(*im));
  }
  req.images = std::move(images);
  req.image_parts.clear();
  return true;
}

api_result<bool> finish_prompts(generation_request& req, const served_model& model) {
  if (auto ok = read_images(req, model); !ok)
    return ok.error();
  std::size_t longest = 0;
  for (auto& p : req.prompts) {
    if (p.ids.empty() && p.text) {
      if (model.tok == nullptr) {
        return bad_request("this model has no tokenizer; send the prompt as token ids", "prompt");
      }
      p.ids = model.tok->encode(*p.text);
      if (p.ids.empty())
        return bad_request("the prompt encodes to no tokens", "prompt");
    }
    longest = std::max(longest, p.ids.size());
  }
  if (!req.images.empty()) {
    auto grown = image_tokens(req, model);
    if (!grown)
      return grown.error();
    longest += *grown;
    req.image_tokens = static_cast<std::int64_t>(*grown);
  }
  const auto ctx = model.max_context;
  const auto prompt_len = static_cast<std::int64_t>(longest);
  const char* field = req.kind == endpoint::chat ? "messages" : "prompt";
  if (prompt_len >= ctx) {
    return bad_request(fmt::format("this model's maximum context length is {} tokens; the prompt "
                                   "has {} tokens",
                                   ctx, prompt_len),
                       field, "context_length_exceeded");
  }
  if (req.window && req.window->context_units > 0) {
    // What a windowed sequence attends to: its prompt, the retained
    // context, the window being generated (and a page's rounding).
    const auto& w = *req.window;
    const auto attended = prompt_len + (w.context_units + w.window_units) * w.tokens_per_unit;
    if (attended > ctx) {
      return bad_request(
          fmt::format("this model's maximum context length is {} tokens; a windowed request "
                      "attends to {} ({} in the prompt, (context_units {} + window_units {}) x "
                      "tokens_per_unit {})",
                      ctx, attended, prompt_len, w.context_units, w.window_units,
                      w.tokens_per_unit),
          "mstar_window", "context_length_exceeded");
    }
    if (!req.max_tokens_given)
      req.stop.max_tokens = static_cast<std::int32_t>(ctx - prompt_len);
  } else if (!req.max_tokens_given) {
    req.stop.max_tokens = static_cast<std::int32_t>(ctx - prompt_len);
  } else if (prompt_len + req.stop.max_tokens > ctx) {
    return bad_request(
        fmt::format("this model's maximum context length is {} tokens; you asked "
                    "for {} ({} in the prompt, {} in the completion)",
                    ctx, prompt_len + req.stop.max_tokens, prompt_len, req.stop.max_tokens),
        "max_tokens", "context_length_exceeded");
  }
  return true;
}

std::vector<engine::request_spec> to_specs(const generation_request& req, const std::string& base) {
  std::vector<engine::request_spec> specs;
  specs.reserve(req.prompts.size());
  for (std::size_t i = 0; i < req.prompts.size(); ++i) {
    engine::request_spec s;
    s.id = req.prompts.size() == 1 ? base : fmt::format("{}-{}", base, i);
    s.prompt = req.prompts[i].ids;
    s.sampling = req.sampling;
    s.sampling.seed += 0x9E3779B97F4A7C15ULL * i;
    s.stop = req.stop;
    s.cache_salt = req.cache_salt;
    s.window = req.window;
    s.images = req.images;
    specs.push_back(std::move(s));
  }
  return specs;
}

}  // namespace mstar::serve
