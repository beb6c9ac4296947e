#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "core/result.hpp"
#include "models/internal/bpe_state.hpp"
#include "models/internal/tokenizer_json.hpp"

namespace mstar::models::internal {

/// Reads tokenizer.json's `normalizer`: null, NFC, NFD, NFKC, NFKD or a
/// Sequence of them (nested Sequences flattened), in the order they apply.
[[nodiscard]] result<void> read_normalizer(const tokenizer_json_reporter& r,
                                           const nlohmann::json& doc,
                                           std::vector<normal_form>& out);

/// Reads `pre_tokenizer`: ByteLevel, or a Sequence (nested ones flattened)
/// of Split steps ending with ByteLevel. Each Split pattern is compiled here,
/// once; one that does not compile is an error naming its field
/// (`pre_tokenizer.pretokenizers[0].pattern.Regex`) with Oniguruma's message.
[[nodiscard]] result<void> read_pre_tokenizer(
    const tokenizer_json_reporter& r, const nlohmann::json& doc,
    std::vector<bpe_tokenizer::state::pre_tokenize_step>& out);

/// Checks `decoder`: null or ByteLevel.
[[nodiscard]] result<void> read_decoder(const tokenizer_json_reporter& r,
                                        const nlohmann::json& doc);

}  // namespace mstar::models::internal
