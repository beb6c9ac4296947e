#include "core/error.hpp"

namespace mstar {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::out_of_range:
      return "out_of_range";
    case errc::parse_error:
      return "parse_error";
    case errc::not_found:
      return "not_found";
    case errc::io_error:
      return "io_error";
    case errc::unsupported:
      return "unsupported";
    case errc::internal:
      return "internal";
    case errc::cancelled:
      return "cancelled";
  }
  return "unknown";
}

error error::with_context(std::string_view context) const {
  std::string message;
  message.reserve(context.size() + 2 + message_.size());
  message.append(context).append(": ").append(message_);
  return error{code_, std::move(message)};
}

std::string error::to_string() const {
  std::string out{mstar::to_string(code_)};
  out.append(": ").append(message_);
  return out;
}

}  // namespace mstar
