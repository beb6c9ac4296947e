#include "parallel/communicator.hpp"

#include <fmt/format.h>

namespace mstar::parallel {

error peer_timeout(std::string_view op, int rank, int peer, std::chrono::milliseconds timeout) {
  return make_error(
      errc::internal,
      fmt::format("tensor parallel {} on rank {}: rank {} did not arrive within {} ms", op, rank,
                  peer, timeout.count()));
}

error peer_gone(std::string_view op, int rank, int peer, std::string_view reason) {
  return make_error(errc::internal, fmt::format("tensor parallel {} on rank {}: rank {} left the "
                                                "group ({})",
                                                op, rank, peer, reason));
}

}  // namespace mstar::parallel
