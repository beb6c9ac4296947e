#include "launcher/common/served.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>

#include "launcher/common/images.hpp"

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

image_setup load_images(const std::string& model_dir, const models::causal_lm& model) {
  const auto facts = model.vision();
  if (!facts)
    return {nullptr, "none (the model has no vision tower)"};
  auto reader = image_reader::load(model_dir, model);
  if (!reader)
    return {nullptr, fmt::format("none ({})", reader.error().message())};
  auto shared = std::make_shared<const image_reader>(std::move(*reader));
  auto support = std::make_shared<serve::image_support>();
  support->read = [shared](std::span<const std::byte> bytes) { return shared->read(bytes); };
  support->placeholder = facts->image_token;
  support->merge_size = facts->merge_size;
  return {std::move(support), "PNG and JPEG data URLs"};
}

}  // namespace mstar::launcher
