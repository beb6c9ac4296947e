#pragma once

// Parsing of `mstar-tool sim` lines into pool configs and steps. Every
// function checks its whole input and names the field that is wrong; nothing
// here touches a pool.

#include <memory>
#include <string>

#include "launcher/tool/json_args.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/recurrent/pool.hpp"

namespace mstar::tool {

/// A string member, or an error naming `what.name`.
[[nodiscard]] result<std::string> get_string(const json& obj, std::string_view name,
                                             std::string_view what);
/// An integer member in [lo, hi], or an error naming `what.name`.
[[nodiscard]] result<std::int64_t> get_int(const json& obj, std::string_view name,
                                           std::string_view what, std::int64_t lo, std::int64_t hi);

/// `config.kv`: the KV pool's config and the model fingerprint (`model`).
[[nodiscard]] result<resources::kv_pool_config> parse_kv_config(const json& c, std::string& model);
/// `config.recurrent`: layers, slots and a Mamba-2 or delta-net geometry.
[[nodiscard]] result<resources::recurrent_state_config> parse_recurrent_config(const json& c);

/// A step's `kv` part.
[[nodiscard]] result<std::shared_ptr<resources::kv_step>> parse_kv_step(const json& k);
/// A step's `recurrent` part; `capture` is set when the part asks for a
/// capture step.
[[nodiscard]] result<std::shared_ptr<resources::recurrent_step>> parse_recurrent_step(
    const json& r, bool& capture);

}  // namespace mstar::tool
