#pragma once

// Which nodes one mstar-launch runs when it is one rank of a Slurm or
// torchrun-style job: rank i runs nodes[i] of the deployment file.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace mstar::launch {

/// Where the rank comes from (`--rank-env`).
enum class rank_source : std::uint8_t {
  automatic,  ///< Slurm when SLURM_PROCID is set, else torchrun-style when NODE_RANK is set
  none,       ///< not a job rank: run every node from here
  slurm,      ///< SLURM_PROCID, checked against SLURM_NTASKS and SLURM_NODELIST
  torchrun,   ///< NODE_RANK, checked against WORLD_SIZE; MASTER_ADDR reported
};

/// The rank_source named `text` ("auto", "none", "slurm", "torchrun").
[[nodiscard]] std::optional<rank_source> parse_rank_source(std::string_view text) noexcept;

/// This process's place in a job.
struct job_rank {
  std::string scheduler;  ///< "slurm" or "torchrun"
  std::size_t rank = 0;   ///< the index of the node this process runs
  std::string detail;     ///< what else the environment said, for the start-up log
};

/// Reads one environment variable; nothing when unset. Tests pass a map.
using env_lookup = std::function<std::optional<std::string>(std::string_view name)>;

/// The process environment, as an env_lookup.
[[nodiscard]] env_lookup process_env();

/// This process's rank, or nothing when it is not a job rank. Fails, naming
/// the variable, when a variable is missing or not a number, when the job's
/// size differs from `node_count`, or when the rank is out of range.
[[nodiscard]] result<std::optional<job_rank>> detect_rank(rank_source source,
                                                          std::size_t node_count,
                                                          const env_lookup& env);

/// The hosts of a Slurm host list ("gpu[01-03,07],login1" is four hosts).
[[nodiscard]] result<std::vector<std::string>> expand_hostlist(std::string_view list);

}  // namespace mstar::launch
