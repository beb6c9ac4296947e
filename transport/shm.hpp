#pragma once

// Same-host fast path: arenas in named POSIX shared-memory segments that a
// peer on the same host maps and copies from directly, bypassing the
// network stack. Names carry the deployment and the creating process, so
// two deployments on one host never collide, and a segment whose creator
// died can be recognised and removed at the next start-up.

#include <caf/expected.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/shm_arena.hpp"
#include "transport/descriptor.hpp"

namespace mstar::transport {

/// The segment name for arena `arena` of process `pid` in `deployment`:
/// "/mstar.<deployment>.<pid>.<arena>". Deployment and arena names hold 1 to
/// 64 characters of [A-Za-z0-9_-]; invalid_argument otherwise.
[[nodiscard]] caf::expected<std::string> segment_name(std::string_view deployment, std::int64_t pid,
                                                      std::string_view arena);

/// Creates (zeroed and pre-faulted) the segment of `bytes` for arena `arena`
/// of this process in `deployment`. The returned arena removes the name when
/// destroyed, so a clean exit leaves nothing behind.
[[nodiscard]] caf::expected<kernels::shm_arena> create_segment(std::string_view deployment,
                                                               std::string_view arena,
                                                               std::size_t bytes);

/// Removes the segments of `deployment` in `shm_dir` whose creating process
/// no longer exists (what a crash leaves), and returns their names. Only
/// this deployment's segments are touched: another deployment may live in
/// another pid namespace where our "dead" pid is alive.
[[nodiscard]] caf::expected<std::vector<std::string>> remove_stale_segments(
    std::string_view deployment, std::string_view shm_dir = "/dev/shm");

/// Maps the segment `d` names, checking that it holds `d.size` bytes; fails
/// with not_found when the segment is gone or invalid_argument when the
/// descriptor names none.
[[nodiscard]] caf::expected<kernels::shm_arena> open_segment(const arena_descriptor& d);

/// Who can map whose segments: the boot id and the mount namespace of
/// /dev/shm. Equal identities mean a segment name opens the same memory.
[[nodiscard]] const std::string& host_identity();

}  // namespace mstar::transport
