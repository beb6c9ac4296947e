#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace mstar::models::internal {

/// The whole of a regular file of at most core's default_max_text_file_bytes;
/// errors name the path once and say what is wrong (core/input_file.hpp).
[[nodiscard]] result<std::string> read_text_file(const std::filesystem::path& path);

/// `text` with the bare tokens Python's json module writes for non-finite floats
/// (`NaN`, `Infinity`, `-Infinity`), outside strings, turned into strings so a
/// strict JSON parser accepts the document; everything else is unchanged.
[[nodiscard]] std::string quote_non_finite_tokens(std::string_view text);

/// Parses `text` (after quote_non_finite_tokens) as JSON within core's depth
/// limit (core/untrusted_json.hpp); a parse_error reads "<label> is not valid
/// JSON: <reason>" or "<label> nests deeper than 64 levels". Duplicate keys
/// keep the last, as Python does.
[[nodiscard]] result<nlohmann::json> parse_json(std::string_view text, std::string_view label);

/// read_text_file then parse_json, the label being the path.
[[nodiscard]] result<nlohmann::json> load_json_file(const std::filesystem::path& path);

}  // namespace mstar::models::internal
