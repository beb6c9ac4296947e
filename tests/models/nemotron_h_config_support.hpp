#pragma once

// What the Nemotron-H config tests share: the smallest config that parses,
// and the message a config's parse fails with.

#include <nlohmann/json.hpp>
#include <string>

#include "models/nemotron_h_config.hpp"

namespace mstar::models::test_config {

/// Vocabulary, width and a three-layer pattern: every other field defaults.
inline nlohmann::json minimal() {
  return {{"vocab_size", 512}, {"hidden_size", 64}, {"hybrid_override_pattern", "M*-"}};
}

/// The error message of parsing `config`, or "<parsed>".
inline std::string error_of(const nlohmann::json& config) {
  const auto parsed = nemotron_h_config::parse(config.dump());
  return parsed ? std::string{"<parsed>"} : parsed.error().message();
}

}  // namespace mstar::models::test_config
