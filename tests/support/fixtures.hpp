#pragma once

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace mstar::test {

/// The fixtures folder: $MSTAR_FIXTURES_DIR when set (a binary copied to
/// another machine with the tree), else the build's tests/fixtures.
inline std::string fixtures_dir() {
  const char* env = std::getenv("MSTAR_FIXTURES_DIR");
  return env != nullptr && *env != '\0' ? std::string{env} : std::string{MSTAR_FIXTURES_DIR};
}

/// Parses tests/fixtures/<relative> as JSON; throws (failing the test) when
/// the file is missing or malformed.
inline nlohmann::json load_fixture_json(const std::string& relative) {
  const std::string path = fixtures_dir() + "/" + relative;
  std::ifstream in{path};
  if (!in)
    throw std::runtime_error("cannot open fixture " + path);
  return nlohmann::json::parse(in);
}

}  // namespace mstar::test
