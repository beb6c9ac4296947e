#include "launcher/serve/chat.hpp"

namespace mstar::launcher {

chat_setup load_chat(const std::string& /*model_dir*/, const models::tokenizer* /*tok*/) {
  return {{}, "none"};
}

}  // namespace mstar::launcher
