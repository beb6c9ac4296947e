#pragma once

// The preprocess stage's work, CAF-free: a text prompt becomes token ids,
// and a prompt's ids become the unrooted page keys each pool roots with its
// own fingerprint (resources/kv/layout.hpp), so prompts are keyed before
// they reach the scheduler.

#include <cstdint>
#include <span>

#include "core/result.hpp"
#include "engine/request.hpp"
#include "models/causal_lm.hpp"
#include "models/tokenizer.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/kv/layout.hpp"

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

/// The page keys of a prompt laid out as `spans` (ids and items, reference
/// §1.4: item slots carry no ids; each page names the items it touches) at
/// `page_size`, rooted by `cache_salt` as `page_keys` of ids is. The seed
/// carries the items on a final partial page, which generated ids then join.
[[nodiscard]] result<resources::kv_prefix_seed> page_keys(
    std::span<const resources::prompt_span> spans, std::int64_t page_size,
    std::string_view cache_salt = {});

/// The keys a pool set keying prompts at `page_size` registers a sequence
/// with: `given` (a front end's, checked at submit) when set, else `tokens`
/// keyed under `cache_salt`; nullopt when `page_size` is 0 (no pool keys
/// prompts) or the tokens cannot be keyed.
[[nodiscard]] std::optional<resources::kv_prefix_seed> sequence_keys(
    std::int64_t page_size, std::span<const token_id> tokens, std::string_view cache_salt,
    const resources::kv_prefix_seed* given);

/// As above for a sequence laid out as `spans` (a prompt with images,
/// engine/prompt_layout.hpp); nullopt also when `spans` is empty.
[[nodiscard]] std::optional<resources::kv_prefix_seed> sequence_keys(
    std::int64_t page_size, std::span<const resources::prompt_span> spans,
    std::string_view cache_salt, const resources::kv_prefix_seed* given);

/// The seed `spec.prefix` (a trusted front end's keys) gives at
/// `page_size`, checked against the prompt and against `images`, the
/// placeholder runs of the prompt's images (the model's `image_spans` of
/// the fitted prompt; `check_layout_rows`); nullopt without one or when no
/// pool keys prompts (`page_size` 0). The error names the request and field.
/// A refusal leaves nothing behind: it comes before the request is queued.
[[nodiscard]] result<std::optional<resources::kv_prefix_seed>> front_end_seed(
    const request_spec& spec, std::int64_t page_size, std::span<const models::image_span> images);

/// Checks a front end's `prefix_layout` rows against a prompt of
/// `prompt_slots` slots whose images take the placeholder runs `images` (in
/// order): every item row (a row with a digest) lies exactly on the next
/// image's run (same first slot, same length), no ids row covers any image
/// slot (an image keyed as ids would share pages with every other image),
/// and the rows cover the prompt. No rows stand for one ids row over the
/// whole prompt. invalid_argument naming the row (`prefix_layout[2]`) and
/// what differed.
[[nodiscard]] result<void> check_layout_rows(const prefix_wire& wire, std::uint64_t prompt_slots,
                                             std::span<const models::image_span> images);

/// The seed a trusted front end's `prefix_wire` describes for `prompt` at
/// `page_size`; invalid_argument naming the field (`prefix_keys[3]`,
/// `prefix_layout[1].digest`...) when a key is not 64 hex digits, the rows
/// (ids and items: an image's placeholder slots are an item row) do not
/// cover the prompt, the tail is not the ids on its last partial page, or
/// keys, tail and rows disagree.
[[nodiscard]] result<resources::kv_prefix_seed> seed_from_wire(const prefix_wire& wire,
                                                               std::span<const token_id> prompt,
                                                               std::int64_t page_size);

}  // namespace mstar::engine
