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
                                            std::int64_t page_size, std::string_view cache_salt) {
  const resources::prompt_span spans[] = {resources::id_span{{tokens.begin(), tokens.end()}}};
  // Unsalted keys stay unrooted (the pools root them); a salt roots the
  // chain first, so no salted key can equal an unsalted or other-salt one.
  resources::digest256 salted{};
  resources::byte_view root;
  if (!cache_salt.empty()) {
    salted = resources::fingerprint(std::string_view{"mstar-cache-salt/1"}, cache_salt);
    root = salted;
  }
  auto keyed = resources::key_prompt(spans, page_size, root);
  if (!keyed)
    return keyed.error();
  // The root travels too: generated ids that fill a salted prompt's first
  // page fold the salt like the prompt's own keys.
  return resources::make_prefix_seed(std::move(*keyed), page_size, root);
}

}  // namespace mstar::engine
