#pragma once

#include <gtest/gtest.h>
#include <string>
#include <string_view>

namespace mstar::test {

/// Whether `text` contains `part`, printing both when it does not.
inline ::testing::AssertionResult contains(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

}  // namespace mstar::test
