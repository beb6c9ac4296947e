#pragma once

#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/result.hpp"
#include "models/jinja/template.hpp"

namespace mstar::models {

/// What one chat render takes besides the messages, as the OpenAI endpoint
/// and transformers' apply_chat_template pass them.
struct chat_render_options {
  bool add_generation_prompt = false;
  /// Cut the output right after the last message's text, so the model
  /// continues it (transformers' continue_final_message); excludes
  /// add_generation_prompt.
  bool continue_final_message = false;
  nlohmann::ordered_json tools;      ///< a list of tool schemas, or null for none
  nlohmann::ordered_json documents;  ///< a list of documents, or null for none
  /// More template variables (an object or null), such as enable_thinking;
  /// they override bos_token and eos_token.
  nlohmann::ordered_json extra;
  /// What strftime_now formats; empty: the local time now.
  std::optional<std::tm> now;
  jinja::limits limits;
};

/// A model's chat template, loaded and rendered as transformers 5.24's
/// apply_chat_template(tokenize=False) does: each message loses its
/// null-valued keys, reasoning given as `reasoning_content`, `thinking` or
/// `reasoning` is visible under the first two names, and the template sees
/// `messages`, `tools`, `documents` (None when not given),
/// `add_generation_prompt`, the special tokens the tokenizer config names
/// (`bos_token`, `eos_token`, `unk_token`, `sep_token`, `pad_token`,
/// `cls_token`, `mask_token`) and the extra variables. Immutable: renders may
/// run on several threads at once.
class chat_template {
 public:
  /// Special token names and their text ("bos_token" -> "<s>").
  using token_map = std::map<std::string, std::string>;

  /// Loads `model_dir`'s template in Hugging Face's order: the file
  /// chat_template.jinja, else tokenizer_config.json's `chat_template` (a
  /// string, or a list of {name, template}). Special tokens come from
  /// tokenizer_config.json (each a string or an {"content": ...} object).
  /// Fails with not_found when the folder has no template, parse_error
  /// (naming the file and line) when a template does not parse.
  [[nodiscard]] static result<chat_template> load(const std::filesystem::path& model_dir);

  /// A template from its source, with the special tokens it may print.
  [[nodiscard]] static result<chat_template> from_source(std::string_view source,
                                                         token_map special_tokens = {});

  /// Renders `messages` (a JSON list of {role, content, ...}). With tools and
  /// a template named "tool_use" that one is used, else "default" (Hugging
  /// Face's choice among named templates).
  [[nodiscard]] result<std::string> render(const nlohmann::ordered_json& messages,
                                           const chat_render_options& options = {}) const;

  /// The special token called `name` ("bos_token"), if the config names it.
  [[nodiscard]] std::optional<std::string> special_token(const std::string& name) const;

 private:
  struct named_template {
    std::string source;
    jinja::compiled_template compiled;
  };

  chat_template(std::map<std::string, named_template> templates, token_map special_tokens)
      : templates_(std::move(templates)), special_tokens_(std::move(special_tokens)) {}

  std::map<std::string, named_template> templates_;  // "default" always present
  token_map special_tokens_;
};

}  // namespace mstar::models
