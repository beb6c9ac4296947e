#include "models/chat_template.hpp"

#include <fmt/format.h>

#include "models/internal/json_text.hpp"
#include "models/jinja/internal/text.hpp"

namespace mstar::models {
namespace {

// A special token from tokenizer_config.json: a string, an AddedToken object
// ({"content": ...}) or null.
result<std::optional<std::string>> config_token(const nlohmann::json& config,
                                                std::string_view key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null())
    return std::optional<std::string>{};
  if (it->is_string())
    return std::optional<std::string>{it->get<std::string>()};
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string())
      return std::optional<std::string>{content->get<std::string>()};
  }
  return make_error(errc::invalid_argument,
                    fmt::format("tokenizer_config.json: '{}' must be a string or an object with a "
                                "string 'content'",
                                key));
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template}.
result<std::map<std::string, std::string>> config_templates(const nlohmann::json& config) {
  std::map<std::string, std::string> out;
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null())
    return out;
  if (it->is_string()) {
    out.emplace("default", it->get<std::string>());
    return out;
  }
  if (!it->is_array()) {
    return make_error(errc::invalid_argument,
                      "tokenizer_config.json: 'chat_template' must be a "
                      "string or a list of {name, template}");
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& entry = (*it)[i];
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string()) {
      return make_error(errc::invalid_argument,
                        fmt::format("tokenizer_config.json: chat_template[{}] must be an object "
                                    "with string 'name' and 'template'",
                                    i));
    }
    out.insert_or_assign(entry["name"].get<std::string>(), entry["template"].get<std::string>());
  }
  return out;
}

constexpr std::string_view special_token_names[] = {
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
};

constexpr std::string_view continue_tag = "CONTINUE_FINAL_MESSAGE_TAG ";

// Names a message's reasoning comes under; templates read the first.
constexpr std::string_view reasoning_fields[] = {"reasoning_content", "thinking", "reasoning"};

template <class Template>
result<std::map<std::string, Template>> compile_all(
    const std::map<std::string, std::string>& sources, std::string_view origin) {
  std::map<std::string, Template> out;
  for (const auto& [name, source] : sources) {
    auto compiled = jinja::compiled_template::parse(source);
    if (!compiled) {
      const std::string where =
          sources.size() == 1 ? std::string{origin} : fmt::format("{} ('{}')", origin, name);
      return compiled.error().with_context(where);
    }
    out.emplace(name, Template{source, std::move(compiled).value()});
  }
  return out;
}

// transformers' _normalize_chat_messages and _alias_reasoning_fields: drop
// null-valued keys; put reasoning under "thinking" (first) and
// "reasoning_content" too.
result<nlohmann::ordered_json> normalise(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& message = messages[i];
    if (!message.is_object())
      return make_error(errc::invalid_argument, fmt::format("messages[{}] must be an object", i));
    nlohmann::ordered_json kept = nlohmann::ordered_json::object();
    for (const auto& [key, v] : message.items()) {
      if (!v.is_null())
        kept[key] = v;
    }
    const nlohmann::ordered_json* reasoning = nullptr;
    for (std::string_view field : reasoning_fields) {
      const auto it = kept.find(field);
      if (it != kept.end() && reasoning == nullptr)
        reasoning = &*it;
    }
    if (reasoning != nullptr) {
      nlohmann::ordered_json aliased = nlohmann::ordered_json::object();
      aliased["thinking"] = *reasoning;
      for (const auto& [key, v] : kept.items())
        aliased[key] = v;
      aliased["reasoning_content"] = *reasoning;
      kept = std::move(aliased);
    }
    out.push_back(std::move(kept));
  }
  return out;
}

// The text continue_final_message continues, after tagging it in `messages`.
result<std::string> tag_final_message(nlohmann::ordered_json& messages) {
  auto& last = messages.back();
  const auto content = last.find("content");
  if (content == last.end()) {
    return make_error(errc::invalid_argument,
                      "continue_final_message: the final message has no "
                      "content to continue");
  }
  if (content->is_string()) {
    std::string text = content->get<std::string>();
    *content = text + std::string{continue_tag};
    return text;
  }
  if (content->is_array()) {
    for (auto block = content->rbegin(); block != content->rend(); ++block) {
      if (!block->is_object() || !block->contains("text"))
        continue;
      auto& text = (*block)["text"];
      if (!text.is_string())
        break;
      std::string original = text.get<std::string>();
      text = original + std::string{continue_tag};
      return original;
    }
  }
  return make_error(errc::invalid_argument,
                    "continue_final_message: the final message has no "
                    "text to continue");
}

// transformers' cut: drop everything from the tag on.
result<std::string> cut_at_tag(std::string rendered, const std::string& final_text) {
  using jinja::internal::strip;
  using jinja::internal::strip_side;
  const std::string_view bare_tag = continue_tag.substr(0, continue_tag.size() - 1);
  if (rendered.find(strip(final_text, strip_side::both)) == std::string::npos ||
      rendered.find(bare_tag) == std::string::npos) {
    return make_error(errc::invalid_argument,
                      "continue_final_message: the final message does "
                      "not appear in the rendered chat (the template "
                      "changes it)");
  }
  const std::size_t at = rendered.rfind(bare_tag);
  const bool spaced = rendered.compare(at, continue_tag.size(), continue_tag) == 0;
  rendered.resize(at);
  if (!spaced)
    rendered = strip(rendered, strip_side::right);
  return rendered;
}

}  // namespace

result<chat_template> chat_template::load(const std::filesystem::path& model_dir) {
  nlohmann::json config = nlohmann::json::object();
  const auto config_path = model_dir / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    auto parsed = internal::load_json_file(config_path);
    if (!parsed)
      return parsed.error();
    if (!parsed->is_object())
      return make_error(errc::invalid_argument, "tokenizer_config.json: not a JSON object");
    config = std::move(parsed).value();
  }
  token_map tokens;
  for (std::string_view name : special_token_names) {
    auto token = config_token(config, name);
    if (!token)
      return token.error();
    if (*token)
      tokens.emplace(name, std::move(**token));
  }

  std::map<std::string, std::string> sources;
  std::string origin = "chat_template.jinja";
  const auto file = model_dir / "chat_template.jinja";
  if (std::filesystem::exists(file, ec)) {
    auto text = internal::read_text_file(file);
    if (!text)
      return text.error();
    sources.emplace("default", std::move(text).value());
  } else {
    auto from_config = config_templates(config);
    if (!from_config)
      return from_config.error();
    sources = std::move(from_config).value();
    origin = "tokenizer_config.json chat_template";
  }
  if (sources.empty()) {
    return make_error(errc::not_found,
                      fmt::format("{}: no chat template (neither chat_template.jinja nor a "
                                  "'chat_template' in tokenizer_config.json)",
                                  model_dir.string()));
  }
  if (sources.count("default") == 0) {
    return make_error(errc::invalid_argument,
                      "tokenizer_config.json: the chat templates have no "
                      "'default' entry");
  }
  auto compiled = compile_all<named_template>(sources, origin);
  if (!compiled)
    return compiled.error();
  return chat_template{std::move(compiled).value(), std::move(tokens)};
}

result<chat_template> chat_template::from_source(std::string_view source,
                                                 token_map special_tokens) {
  auto compiled = compile_all<named_template>({{"default", std::string{source}}}, "chat template");
  if (!compiled)
    return compiled.error();
  return chat_template{std::move(compiled).value(), std::move(special_tokens)};
}

std::optional<std::string> chat_template::special_token(const std::string& name) const {
  const auto it = special_tokens_.find(name);
  return it == special_tokens_.end() ? std::nullopt : std::optional<std::string>{it->second};
}

result<std::string> chat_template::render(const nlohmann::ordered_json& messages,
                                          const chat_render_options& options) const {
  if (!messages.is_array())
    return make_error(errc::invalid_argument, "messages must be a JSON list");
  if (messages.empty())
    return make_error(errc::invalid_argument,
                      "messages: a conversation needs at least one message");
  if (options.add_generation_prompt && options.continue_final_message) {
    return make_error(errc::invalid_argument,
                      "add_generation_prompt and continue_final_message "
                      "cannot both be set");
  }
  if (!options.extra.is_null() && !options.extra.is_object())
    return make_error(errc::invalid_argument, "extra template variables must be a JSON object");
  if (!options.tools.is_null() && !options.tools.is_array())
    return make_error(errc::invalid_argument, "tools must be a JSON list");
  if (!options.documents.is_null()) {
    if (!options.documents.is_array())
      return make_error(errc::invalid_argument, "documents must be a JSON list");
    for (std::size_t i = 0; i < options.documents.size(); ++i) {
      if (!options.documents[i].is_object())
        return make_error(errc::invalid_argument,
                          fmt::format("documents[{}] must be an object", i));
    }
  }
  auto chat = normalise(messages);
  if (!chat)
    return chat.error();

  const bool use_tools = !options.tools.is_null() && templates_.count("tool_use") != 0;
  const named_template& tmpl = templates_.at(use_tools ? "tool_use" : "default");
  std::string final_text;
  if (options.continue_final_message) {
    if (tmpl.source.find("content") == std::string::npos) {
      return make_error(errc::invalid_argument,
                        "continue_final_message: the chat template never "
                        "reads 'content'");
    }
    auto text = tag_final_message(*chat);
    if (!text)
      return text.error();
    final_text = std::move(text).value();
  }

  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  for (const auto& [name, text] : special_tokens_)
    variables[name] = text;
  if (options.extra.is_object()) {
    for (const auto& [key, v] : options.extra.items()) {
      if (key == "messages" || key == "tools" || key == "documents" ||
          key == "add_generation_prompt") {
        return make_error(
            errc::invalid_argument,
            fmt::format("extra template variable '{}' would replace a fixed one", key));
      }
      variables[key] = v;
    }
  }
  variables["messages"] = std::move(chat).value();
  variables["tools"] = options.tools;
  variables["documents"] = options.documents;
  variables["add_generation_prompt"] = options.add_generation_prompt;

  auto rendered =
      tmpl.compiled.render(variables, jinja::render_options{options.limits, options.now});
  if (!rendered)
    return rendered.error().with_context("chat template");
  if (!options.continue_final_message)
    return rendered;
  return cut_at_tag(std::move(rendered).value(), final_text);
}

}  // namespace mstar::models
