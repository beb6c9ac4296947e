#pragma once

// The chat template of a model folder, as the server's renderer.

#include <string>

#include "models/tokenizer.hpp"
#include "serve/service.hpp"

namespace mstar::launcher {

struct chat_setup {
  serve::chat_renderer render;  ///< empty: the folder has no usable template
  std::string describe;         ///< for the start-up log
};

/// Loads the folder's chat template (chat_template.jinja or
/// tokenizer_config.json); none when absent or unreadable (said in `describe`).
[[nodiscard]] chat_setup load_chat(const std::string& model_dir, const models::tokenizer* tok);

}  // namespace mstar::launcher
