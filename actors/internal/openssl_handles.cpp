#include "actors/internal/openssl_handles.hpp"

#include <openssl/err.h>

namespace mstar::actors::internal {

std::string openssl_errors() {
  std::string text;
  while (auto code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    if (!text.empty())
      text += "; ";
    text += buf;
  }
  return text.empty() ? "unknown" : text;
}

}  // namespace mstar::actors::internal
