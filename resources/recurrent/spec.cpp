#include "resources/recurrent/spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.hpp"

namespace mstar::resources {
namespace {

// The block a state_dtype override replaces; geometries name the delta-net
// state matrix this way, and a Mamba-2 pool's "ssm" is deliberately not it.
constexpr std::string_view state_block = "state";

result<void> override_state_dtype(recurrent_state_config& config, const std::string& name) {
  auto parsed = parse_dtype(name);
  if (!parsed) {
    // parse_dtype's message starts with the quoted text: "'float33' is not ...".
    return make_error(parsed.error().code(),
                      fmt::format("state_dtype {}", parsed.error().message()));
  }
  const auto it = config.blocks.find(std::string{state_block});
  if (it == config.blocks.end()) {
    std::vector<std::string_view> names;
    for (const auto& entry : config.blocks)
      names.emplace_back(entry.first);
    return make_error(errc::not_found,
                      fmt::format("state_dtype '{}' needs a '{}' block to apply to, but this pool "
                                  "has [{}]",
                                  name, state_block, fmt::join(names, ", ")));
  }
  it->second = it->second.with_dtype(*parsed);
  return {};
}

}  // namespace

result<void> recurrent_state_spec::apply_yaml_overrides(std::optional<std::int64_t> max_slots,
                                                        std::optional<std::string> state_dtype) {
  if (!max_slots && !state_dtype)
    return {};
  // Everything is applied to a copy that replaces the live config only once
  // it has passed every check, so an error leaves nothing half-applied.
  recurrent_state_config candidate = config;
  if (max_slots)
    candidate.max_slots = *max_slots;
  if (state_dtype) {
    if (auto ok = override_state_dtype(candidate, *state_dtype); !ok) {
      return ok.error().with_context(resource_key);
    }
  }
  // The Python reference checks max_slots only when the config is built, so
  // an override of max_slots=1 (with the sink on) slips through there and
  // fails later in the pool. We re-run the construction checks instead.
  if (auto ok = candidate.validate(); !ok) {
    return ok.error().with_context(resource_key);
  }
  config = std::move(candidate);
  return {};
}

}  // namespace mstar::resources
