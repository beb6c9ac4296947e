#pragma once

// An in-process communicator group: n ranks on n threads of one process,
// meeting at a barrier over shared memory. What tests and CPU runs of a
// tensor-parallel model (`mstar-run --tensor-parallel N`) use; one process
// per GPU with NCCL is the other implementation of the same interface.

#include <chrono>
#include <memory>
#include <vector>

#include "core/result.hpp"
#include "parallel/communicator.hpp"

namespace mstar::parallel {

/// Makes the ranks of an in-process group.
class local_group {
 public:
  /// How long a collective waits for its peers unless told otherwise.
  static constexpr std::chrono::milliseconds default_timeout{60'000};

  /// `size` communicators, rank i at index i, sharing one group: hand each
  /// to its own thread. A communicator destroyed while its peers still call
  /// collectives counts as a rank that left (they fail, naming it).
  /// invalid_argument for size < 1 or a timeout that is not positive.
  [[nodiscard]] static result<std::vector<std::unique_ptr<communicator>>> make(
      int size, std::chrono::milliseconds timeout = default_timeout);
};

}  // namespace mstar::parallel
