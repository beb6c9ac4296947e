#pragma once

// The preprocess stage's work, CAF-free: a text prompt becomes token ids,
// and a prompt's ids become the unrooted page keys each pool roots with its
// own fingerprint (resources/kv/layout.hpp), so prompts are keyed before
// they reach the scheduler.

#include <cstdint>
#include <span>

#include "core/result.hpp"
#include "engine/request.hpp"
#include "models/tokenizer.hpp"
#include "resources/kv/kv_pool.hpp"

namespace mstar::engine {

/// Tokenizes `spec.text` into `spec.prompt` (when set). invalid_argument
/// when the model has no tokenizer (token-id prompts only) or the text is
/// empty.
[[nodiscard]] result<void> tokenize(request_spec& spec, const models::tokenizer* tok);

/// The page keys of `tokens` at `page_size`. A non-empty `cache_salt`
/// starts the chain from a root of its own, so requests of different
/// tenants never share (or time) each other's pages.
[[nodiscard]] result<resources::kv_prefix_seed> page_keys(std::span<const token_id> tokens,
                                                          std::int64_t page_size,
                                                          std::string_view cache_salt = {});

}  // namespace mstar::engine
