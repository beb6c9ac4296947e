#pragma once

// The OpenAI request bodies as mstar understands them: parsed and checked
// before anything reaches the engine, so a bad body is one 400 naming the
// field and the engine only ever sees requests it can run. No I/O and no
// engine here: the fuzz target drives these functions directly.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "engine/request.hpp"
#include "serve/api_error.hpp"

namespace mstar::models {
class tokenizer;
}

namespace mstar::serve {

/// How the server takes images, for a model with a vision tower.
struct image_support {
  /// Encoded bytes (PNG or JPEG) to the model's input; the error says why
  /// the bytes are no image it takes. Called on the HTTP threads.
  std::function<result<models::image_input>(std::span<const std::byte>)> read;
  /// The model's image placeholder: a rendered chat prompt holds one run of
  /// it per image (the chat template's marker block), expanded by the engine.
  engine::token_id placeholder = 0;
  std::int64_t merge_size = 1;  ///< an image takes t * h * w / merge_size^2 tokens
};

/// What the server knows about the model it serves.
struct served_model {
  std::string name;                        ///< the one accepted `model` value
  std::int64_t max_context = 4096;         ///< prompt + completion tokens
  std::int64_t vocab_size = 0;             ///< token-id prompts must stay below
  const models::tokenizer* tok = nullptr;  ///< null: token-id prompts only
  bool has_chat_template = false;
  /// Null: the model takes no images (chat image parts are refused).
  std::shared_ptr<const image_support> images;
};

enum class endpoint : std::uint8_t { completions, chat };

/// An image part as sent: its bytes (the data URL's base64 decoded), not
/// yet decoded as an image. Decoding (PNG / JPEG, resizing) is the costly
/// part, so it waits for `read_images`, after admission.
struct image_part {
  std::string param;  ///< "messages[0].content[1]", for errors
  std::vector<std::byte> bytes;
};

/// One prompt of a request: text, or token ids (after `tokenize_prompts`,
/// always ids; `text` stays for `echo`).
struct prompt_input {
  std::optional<std::string> text;
  std::vector<engine::token_id> ids;
};

/// A checked `/v1/completions` or `/v1/chat/completions` body.
struct generation_request {
  endpoint kind = endpoint::completions;
  std::string model;
  std::vector<prompt_input> prompts;  ///< chat: one, the rendered conversation
  /// chat: as sent, text parts joined into one string; a message with image
  /// parts keeps its list, each image as {"type": "image"} (the template
  /// renders the model's marker block for it), the data left out.
  nlohmann::ordered_json messages;
  /// chat: the messages' image parts, in order, until `read_images` decodes
  /// them into `images`.
  std::vector<image_part> image_parts;
  /// chat: the images of the messages' image parts, in order.
  std::vector<models::image_input> images;
  /// chat: the prompt tokens the images add once each placeholder is
  /// expanded to its image's count (`finish_prompts`; counted in `usage`).
  std::int64_t image_tokens = 0;
  nlohmann::ordered_json tools;  ///< chat: for the template (null when absent)
  nlohmann::ordered_json template_kwargs =
      nlohmann::ordered_json::object();  ///< chat_template_kwargs
  bool add_generation_prompt = true;
  engine::sampling_params sampling;
  engine::stop_rules stop;
  bool max_tokens_given = false;  ///< else: what the context leaves
  bool seed_given = false;
  bool stream = false;
  bool include_usage = false;
  bool return_token_ids = false;
  bool echo = false;
  bool skip_special_tokens = true;
  bool logprobs = false;          ///< report the chosen tokens' log-probabilities
  std::int32_t top_logprobs = 0;  ///< alternatives per token to report
  std::string cache_salt;
  /// `mstar_window` (an extension): windowed generation with a bounded KV
  /// cache, as `request_spec::window`.
  std::optional<engine::window_params> window;
};

/// Parses and checks a request body for `kind`. Errors name the field.
[[nodiscard]] api_result<generation_request> parse_request(std::string_view body, endpoint kind,
                                                           const served_model& model);

/// Decodes the image parts `parse_request` kept into `images` with the
/// model's image reader (the costly part of an image request: the service
/// calls it only once the request is admitted). An image that cannot be
/// read is a 400 naming its part; `images` is then left empty.
[[nodiscard]] api_result<bool> read_images(generation_request& req, const served_model& model);

/// Tokenizes text prompts and checks every prompt against the context and
/// the vocabulary; sets `stop.max_tokens` when the body left it out (what
/// the context leaves). Chat prompts are rendered before this; image parts
/// not read yet are read first (`read_images`).
[[nodiscard]] api_result<bool> finish_prompts(generation_request& req, const served_model& model);

/// The engine requests of `req` (one per prompt), ids `<base>-<i>`.
[[nodiscard]] std::vector<engine::request_spec> to_specs(const generation_request& req,
                                                         const std::string& base);

}  // namespace mstar::serve
