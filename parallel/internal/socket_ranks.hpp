#pragma once

// The two kinds of rank of a formed socket group (socket_group.hpp): rank 0,
// the hub every collective goes through, and the others, each with one
// connection to it. socket_group.cpp forms the group and hands the
// connections here.

#include <chrono>
#include <memory>
#include <vector>

#include "parallel/communicator.hpp"
#include "parallel/internal/socket_io.hpp"

namespace mstar::parallel::internal {

/// How long a rank other than 0 waits past the timeout for rank 0's verdict
/// before it blames rank 0: rank 0 started its own clock a little later.
[[nodiscard]] std::chrono::milliseconds verdict_grace(std::chrono::milliseconds timeout);

/// Rank 0 of a group of `links.size()` ranks: `links[q]` is the connection
/// to rank q (`links[0]` is empty).
[[nodiscard]] std::unique_ptr<communicator> make_hub(std::vector<unique_fd> links,
                                                     std::chrono::milliseconds timeout);

/// Rank `rank` (not 0) of `size`, connected to rank 0 by `to_root`.
[[nodiscard]] std::unique_ptr<communicator> make_spoke(unique_fd to_root, int rank, int size,
                                                       std::chrono::milliseconds timeout);

}  // namespace mstar::parallel::internal
