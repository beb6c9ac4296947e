#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace mstar::test {

/// Parses tests/fixtures/<relative> as JSON; throws (failing the test) when
/// the file is missing or malformed.
inline nlohmann::json load_fixture_json(const std::string& relative) {
  const std::string path = std::string{MSTAR_FIXTURES_DIR} + "/" + relative;
  std::ifstream in{path};
  if (!in)
    throw std::runtime_error("cannot open fixture " + path);
  return nlohmann::json::parse(in);
}

}  // namespace mstar::test
