#include "launcher/common/chat.hpp"

#include <fmt/format.h>

#include "models/chat_template.hpp"

namespace mstar::launcher {

chat_setup load_chat(const std::string& model_dir, const models::tokenizer* tok) {
  if (tok == nullptr)
    return {{}, "none (the model has no tokenizer)"};
  auto loaded = models::chat_template::load(model_dir);
  if (!loaded)
    return {{}, fmt::format("none ({})", loaded.error().message())};
  auto tmpl = std::make_shared<const models::chat_template>(std::move(*loaded));
  auto render = [tmpl](const serve::generation_request& r) {
    models::chat_render_options o;
    o.add_generation_prompt = r.add_generation_prompt;
    o.tools = r.tools;
    o.extra = r.template_kwargs;
    return tmpl->render(r.messages, o);
  };
  return {render, "loaded"};
}

}  // namespace mstar::launcher
