#include "transport/error.hpp"

#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <spdlog/spdlog.h>

namespace mstar::transport {

namespace {

errc classify(ucs_status_t status) {
  switch (status) {
    case UCS_ERR_CANCELED:
      return errc::cancelled;
    case UCS_ERR_TIMED_OUT:
      return errc::timed_out;
    case UCS_ERR_ENDPOINT_TIMEOUT:  // keepalive or connection timeout: the peer
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:
      return errc::peer_failed;
    default:
      return errc::ucx_failure;
  }
}

std::string code_name(const caf::error& err) {
  if (err.category() != error_category)
    return caf::to_string(err.category());
  const auto code = err.code();
  if (code >= static_cast<std::uint8_t>(errc::timed_out))
    return std::string{to_string(static_cast<errc>(code))};
  return std::string{mstar::to_string(static_cast<mstar::errc>(code))};
}

}  // namespace

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::timed_out:
      return "timed_out";
    case errc::cancelled:
      return "cancelled";
    case errc::peer_failed:
      return "peer_failed";
    case errc::integrity:
      return "integrity";
    case errc::ucx_failure:
      return "ucx_failure";
    case errc::closed:
      return "closed";
    case errc::cuda_failure:
      return "cuda_failure";
  }
  return "unknown";
}

caf::error failure(errc code, std::string message) {
  return caf::error{static_cast<std::uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

caf::error failure(mstar::errc code, std::string message) {
  return caf::error{static_cast<std::uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

caf::error from_core(const mstar::error& err) {
  return failure(err.code(), err.message());
}

caf::error ucx_error(ucs_status_t status, std::string_view what) {
  std::string message{what};
  message.append(": ").append(ucs_status_string(status));
  return logged(failure(classify(status), std::move(message)));
}

caf::error logged(caf::error err) {
  spdlog::warn("transport: {}", describe(err));
  return err;
}

bool is(const caf::error& err, errc code) noexcept {
  return err && err.category() == error_category && err.code() == static_cast<std::uint8_t>(code);
}

bool is(const caf::error& err, mstar::errc code) noexcept {
  return err && err.category() == error_category && err.code() == static_cast<std::uint8_t>(code);
}

std::string message_of(const caf::error& err) {
  if (!err)
    return {};
  const auto& context = err.context();
  if (context.size() > 0 && context.match_element<std::string>(0))
    return context.get_as<std::string>(0);
  return caf::to_string(context);
}

std::string describe(const caf::error& err) {
  if (!err)
    return "no error";
  return code_name(err) + ": " + message_of(err);
}

}  // namespace mstar::transport
