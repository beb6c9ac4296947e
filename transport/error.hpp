#pragma once

// Errors of the transport layer: `caf::error` values in the project's error
// category, so the actor layer forwards them unchanged. Generic failures keep
// their `mstar::errc` code; failures only transport can have (a deadline, a
// dead peer, a bad checksum, a UCX status) use `transport::errc`, numbered
// from 64 so the two enums never collide and can later merge into one.

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <ucs/type/status.h>

#include "core/error.hpp"

namespace mstar::transport {

/// Failure codes that only the transport layer produces.
enum class errc : std::uint8_t {
  timed_out = 64,  ///< a deadline passed before the operation finished
  cancelled,       ///< the caller cancelled the operation
  peer_failed,     ///< the peer died, closed, or its endpoint failed
  integrity,       ///< a checksum did not match: the message names the unit
  ucx_failure,     ///< UCX returned a status with no more specific meaning
  closed,          ///< the object was already closed or stopped
  cuda_failure,    ///< the CUDA runtime failed (CUDA IPC path): the message names the call
};

/// The category atom every transport error carries (shared with core's codes).
inline constexpr caf::atom_value error_category = caf::atom("mstar");

/// The stable lowercase name of `code`.
[[nodiscard]] std::string_view to_string(errc code) noexcept;

/// An error with a transport code and a message naming what failed and why.
/// Does not log: see `logged`.
[[nodiscard]] caf::error failure(errc code, std::string message);

/// An error with a core code (invalid_argument, not_found...).
[[nodiscard]] caf::error failure(mstar::errc code, std::string message);

/// `err` converted to a `caf::error` with the same code and message.
[[nodiscard]] caf::error from_core(const mstar::error& err);

/// Converts a UCX status where it is first seen: `what` names the operation
/// and its object ("ucp_ep_create to peer 'prefill-0'"). Connection-level
/// statuses become `peer_failed`, `UCS_ERR_CANCELED` becomes `cancelled`,
/// `UCS_ERR_TIMED_OUT` `timed_out`, the rest `ucx_failure`. Logs once.
[[nodiscard]] caf::error ucx_error(ucs_status_t status, std::string_view what);

/// Logs `err` once at warning level and returns it: for the place that first
/// detects a failure not coming from UCX (a deadline, a checksum).
[[nodiscard]] caf::error logged(caf::error err);

/// Whether `err` carries transport code `code`.
[[nodiscard]] bool is(const caf::error& err, errc code) noexcept;

/// Whether `err` carries core code `code`.
[[nodiscard]] bool is(const caf::error& err, mstar::errc code) noexcept;

/// The message of `err` (empty when it has none).
[[nodiscard]] std::string message_of(const caf::error& err);

/// "<code>: <message>" for logs, test output and CLI text.
[[nodiscard]] std::string describe(const caf::error& err);

}  // namespace mstar::transport
