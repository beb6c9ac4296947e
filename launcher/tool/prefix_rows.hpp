#pragma once

// The Python preprocess stage's wire format in JSON (reference §1.8), for
// `mstar-tool keys`: `prefix_layout` rows `[length, advance, walk, digest,
// end_key]` (bytes as lowercase hex, null when absent) and a stream's
// `prefix_keys`, `prefix_tail`, `prefix_layout` and `prefix_decode`.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "launcher/tool/json_args.hpp"
#include "resources/kv/kv_pool.hpp"

namespace mstar::tool {

/// Rows as the Python stage sends them: lists, not objects.
[[nodiscard]] json prefix_rows_json(std::span<const resources::prefix_span> rows);

/// Rows from their JSON lists; the error names the row and the column.
[[nodiscard]] result<std::vector<resources::prefix_span>> to_prefix_rows(const json& v,
                                                                         std::string_view what);

/// One stream as a Python front end sends it, turned into this engine's seed.
struct python_stream {
  resources::kv_prefix_seed seed;
  /// The output tensor whose sampled ids extend the chain; absent when the
  /// stream declares no decode walk (its generated pages stay unkeyed).
  std::optional<std::string> decode;
};

/// Reads `prefix_keys` (required), `prefix_tail`, `prefix_layout` and
/// `prefix_decode` (optional) from `req`, paged at `page_size`.
[[nodiscard]] result<python_stream> to_python_stream(const json& req, std::int64_t page_size);

}  // namespace mstar::tool
