#pragma once

// The digest that names a non-token input (an image, an audio clip) in page
// keys, by the Python preprocess stage's recipe (reference §1.8):
// fingerprint(sha256(file bytes), modality, preprocess fingerprint, advance,
// repr(p) for each processor parameter). A C++ front end that digests an
// image this way keys it exactly as a Python front end does.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.hpp"
#include "resources/kv/keys.hpp"

namespace mstar::resources {

/// One processor parameter, a plain value as the Python stage allows them.
using preprocess_param = std::variant<std::nullptr_t, bool, std::int64_t, double, std::string,
                                      std::vector<std::uint8_t>>;

/// Python's `repr()` of a parameter: `None`, `True`, `128`, `0.5`,
/// `'text'`, `b'\x00'`. `repr`, not `str`, so `True` and `"True"` differ.
/// Fails on text with characters outside printable ASCII (Python keeps
/// printable non-ASCII as is; its printability table is not reproduced).
[[nodiscard]] result<std::string> python_repr(const preprocess_param& value);

/// Plain SHA-256 of a file's bytes (not a `fingerprint` of them).
[[nodiscard]] digest256 sha256_of(byte_view bytes);

/// The digest of one item span: `fingerprint(file_sha256, modality,
/// preprocess_fingerprint, advance, repr(params)...)`, `advance` the slots
/// the item moves the position counter by. Fails naming a parameter whose
/// repr cannot be written.
[[nodiscard]] result<digest256> item_digest(const digest256& file_sha256, std::string_view modality,
                                            std::string_view preprocess_fingerprint,
                                            std::uint64_t advance,
                                            std::span<const preprocess_param> params);

}  // namespace mstar::resources
