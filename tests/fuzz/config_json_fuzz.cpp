// libFuzzer target over config.json: nemotron_h_config::parse either refuses
// the text or returns a config whose derived sizes (d_inner, conv_dim, the
// in_proj width, the gated-norm groups) compute without overflow (UBSan
// traps one) and are positive where the layers need them.
//
//   build-fuzz/tests/fuzz/mstar-fuzz-config-json -max_total_time=60 CORPUS
//   tests/fuzz/corpus/config_json
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "models/nemotron_h_config.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using mstar::models::layer_kind;
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  auto config = mstar::models::nemotron_h_config::parse(text);
  if (!config) {
    if (config.error().message().empty())
      mstar::fuzz::fail("config: a refusal without a message");
    return 0;
  }
  if (config->pattern().size() != static_cast<std::size_t>(config->num_layers()))
    mstar::fuzz::fail("config: the pattern disagrees with the layers");
  if (config->vocab_size <= 0 || config->hidden_size <= 0)
    mstar::fuzz::fail("config: accepted a non-positive vocab_size or hidden_size");
  if (config->count(layer_kind::mamba2) > 0) {
    if (config->d_inner() <= 0 || config->conv_dim() <= 0 || config->in_proj_size() <= 0 ||
        config->gated_norm_group_size() <= 0) {
      mstar::fuzz::fail("config: accepted Mamba sizes that are not positive");
    }
  }
  return 0;
}
