#include "engine/preprocess.hpp"

#include <fmt/format.h>

#include "resources/kv/layout.hpp"

namespace mstar::engine {

result<void> tokenize(request_spec& spec, const models::tokenizer* tok) {
  if (!spec.text)
    return {};
  if (tok == nullptr) {
    return make_error(errc::invalid_argument,
                      fmt::format("request {}: this model has no tokenizer; send the prompt as "
                                  "token ids",
                                  spec.id));
  }
  spec.prompt = tok->encode(*spec.text);
  spec.text.reset();
  if (spec.prompt.empty()) {
    return make_error(errc::invalid_argument,
                      fmt::format("request {}: the prompt text encodes to no tokens", spec.id));
  }
  return {};
}

result<resources::kv_prefix_seed> page_keys(std::span<const token_id> tokens,
                                            std::int64_t page_size) {
  const resources::prompt_span spans[] = {resources::id_span{{tokens.begin(), tokens.end()}}};
  auto keyed = resources::key_prompt(spans, page_size);
  if (!keyed)
    return keyed.error();
  return resources::kv_prefix_seed{std::move(keyed->keys), std::move(keyed->tail)};
}

}  // namespace mstar::engine
