#include "core/host_memory.hpp"

#include <array>
#include <fmt/format.h>
#include <fstream>
#include <sys/resource.h>
#include <tuple>
#include <unistd.h>

namespace mstar {
namespace {

void keep_least(std::optional<host_memory_bound>& best, std::uint64_t bytes, std::string source) {
  if (!best || bytes < best->bytes)
    best = host_memory_bound{bytes, std::move(source)};
}

std::uint64_t less(std::uint64_t a, std::uint64_t b) {
  return a > b ? a - b : 0;
}

// /proc/meminfo's MemAvailable, in bytes.
std::optional<std::uint64_t> mem_available() {
  std::ifstream in{"/proc/meminfo"};
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:")
      return kib * 1024;
  }
  return std::nullopt;
}

// /proc/self/statm: total mapped and data (+ stack) sizes, in bytes.
std::optional<std::array<std::uint64_t, 2>> mapped_now() {
  std::ifstream in{"/proc/self/statm"};
  std::uint64_t size = 0, resident = 0, shared = 0, text = 0, lib = 0, data = 0;
  if (!(in >> size >> resident >> shared >> text >> lib >> data))
    return std::nullopt;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return std::array<std::uint64_t, 2>{size * page, data * page};
}

// A cgroup v2 file holding a number, or nullopt ("max", absent, unreadable).
std::optional<std::uint64_t> cgroup_number(const std::string& file) {
  std::ifstream in{file};
  std::uint64_t value = 0;
  if (in >> value)
    return value;
  return std::nullopt;
}

// This process's cgroup v2 folder, from /proc/self/cgroup's "0::/path" line.
std::optional<std::string> cgroup_dir() {
  std::ifstream in{"/proc/self/cgroup"};
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("0::"))
      return "/sys/fs/cgroup" + line.substr(3);
  }
  return std::nullopt;
}

}  // namespace

std::optional<host_memory_bound> host_memory_available() {
  std::optional<host_memory_bound> best;
  if (const auto available = mem_available())
    keep_least(best, *available, "the machine's available memory (MemAvailable)");
  const auto mapped = mapped_now();
  for (const auto& [resource, name, index] :
       {std::tuple{RLIMIT_AS, "the address-space limit (RLIMIT_AS)", 0},
        std::tuple{RLIMIT_DATA, "the data limit (RLIMIT_DATA)", 1}}) {
    rlimit limit{};
    if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
      continue;
    const std::uint64_t used = mapped ? (*mapped)[static_cast<std::size_t>(index)] : 0;
    keep_least(best, less(limit.rlim_cur, used), name);
  }
  if (const auto dir = cgroup_dir()) {
    const auto max = cgroup_number(*dir + "/memory.max");
    if (max) {
      const auto current = cgroup_number(*dir + "/memory.current").value_or(0);
      keep_least(best, less(*max, current), "the cgroup's memory.max");
    }
  }
  return best;
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1024)
    return fmt::format("{} bytes", bytes);
  constexpr std::array<const char*, 6> units{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < units.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace mstar
