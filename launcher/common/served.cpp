#include "launcher/common/served.hpp"

#include <algorithm>
#include <filesystem>

namespace mstar::launcher {

serve::served_model served_model_of(const models::causal_lm& model, const std::string& model_dir,
                                    std::string served_name, std::int64_t max_model_len,
                                    std::int64_t kv_tokens, bool has_chat_template) {
  serve::served_model served;
  served.name = std::move(served_name);
  if (served.name.empty() && model_dir == MSTAR_EMBEDDED_MODEL_DIR)
    served.name = "mstar-embedded";
  if (served.name.empty()) {
    auto folder = std::filesystem::path(model_dir).lexically_normal();
    served.name =
        (folder.has_filename() ? folder.filename() : folder.parent_path().filename()).string();
  }
  served.vocab_size = model.vocab_size();
  served.tok = model.tok();
  served.has_chat_template = has_chat_template;
  std::int64_t ctx = model.max_context() > 0 ? model.max_context() : std::int64_t{1} << 20;
  if (max_model_len > 0)
    ctx = std::min(ctx, max_model_len);
  if (kv_tokens > 0)
    ctx = std::min(ctx, kv_tokens);
  served.max_context = ctx;
  return served;
}

}  // namespace mstar::launcher
