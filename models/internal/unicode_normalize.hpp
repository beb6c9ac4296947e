#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace mstar::models::internal {

/// A Unicode normalization form (a tokenizer.json normalizer of that name).
enum class normal_form : std::uint8_t { nfc, nfd, nfkc, nfkd };

/// The form a normalizer type names ("NFC", "NFD", "NFKC", "NFKD"), or nullopt.
[[nodiscard]] std::optional<normal_form> normal_form_named(std::string_view type) noexcept;

/// `text` in `form` (utf8proc's tables). Bytes that are not UTF-8 are kept as
/// they are and the UTF-8 between them is normalized run by run.
[[nodiscard]] std::string normalize(std::string_view text, normal_form form);

/// `text` through each of `forms` in turn.
[[nodiscard]] std::string normalize(std::string_view text, std::span<const normal_form> forms);

}  // namespace mstar::models::internal
