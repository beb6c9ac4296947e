#pragma once

// How much host memory this process can still take, so sizes from flags and
// files are refused with a message before an allocation would abort.

#include <cstdint>
#include <optional>
#include <string>

namespace mstar {

/// The tightest bound the system puts on further host allocations.
struct host_memory_bound {
  std::uint64_t bytes = 0;  ///< what may still be allocated
  std::string source;       ///< which bound: "available memory (MemAvailable)", "RLIMIT_AS", ...
};

/// The least of: the machine's available memory (/proc/meminfo MemAvailable),
/// the address-space limit (RLIMIT_AS) less what is mapped now, the data
/// limit (RLIMIT_DATA) less the data mapped now, and the cgroup's memory.max
/// less its memory.current. nullopt when none can be read.
[[nodiscard]] std::optional<host_memory_bound> host_memory_available();

/// `bytes` for people: "512 bytes", "16.0 KiB", "1.5 GiB", "256.0 GiB".
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);

}  // namespace mstar
