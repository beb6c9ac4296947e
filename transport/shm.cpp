#include "transport/shm.hpp"

#include <cerrno>
#include <charconv>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace mstar::transport {

namespace {

constexpr std::size_t max_part_chars = 64;
constexpr std::string_view prefix = "mstar.";

bool valid_part(std::string_view part) {
  if (part.empty() || part.size() > max_part_chars)
    return false;
  for (const char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

bool process_alive(std::int64_t pid) {
  if (pid <= 0)
    return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// The pid in "mstar.<deployment>.<pid>.<arena>" when `file` belongs to
// `deployment`, else -1.
std::int64_t owner_pid(std::string_view file, std::string_view deployment) {
  if (!file.starts_with(prefix))
    return -1;
  file.remove_prefix(prefix.size());
  if (!file.starts_with(deployment) || file.size() <= deployment.size() ||
      file[deployment.size()] != '.') {
    return -1;
  }
  file.remove_prefix(deployment.size() + 1);
  std::int64_t pid = -1;
  const auto [end, ec] = std::from_chars(file.data(), file.data() + file.size(), pid);
  if (ec != std::errc{} || end == file.data() + file.size() || *end != '.')
    return -1;
  return pid;
}

std::string read_line(const char* path) {
  std::ifstream in{path};
  std::string line;
  std::getline(in, line);
  return line;
}

std::string compute_host_identity() {
  std::string boot = read_line("/proc/sys/kernel/random/boot_id");
  std::error_code ec;
  const auto mnt = std::filesystem::read_symlink("/proc/self/ns/mnt", ec);
  if (boot.empty()) {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    boot = name;
  }
  return boot + "/" + (ec ? std::string{"mnt:?"} : mnt.string());
}

}  // namespace

caf::expected<std::string> segment_name(std::string_view deployment, std::int64_t pid,
                                        std::string_view arena) {
  if (!valid_part(deployment))
    return failure(mstar::errc::invalid_argument, "deployment name '" + std::string{deployment} +
                                                      "': 1 to 64 characters of [A-Za-z0-9_-]");
  if (!valid_part(arena))
    return failure(mstar::errc::invalid_argument,
                   "arena name '" + std::string{arena} + "': 1 to 64 characters of [A-Za-z0-9_-]");
  // '/', not "/": GCC 12 under -O3 flags a one-character literal + std::string&&
  // (bogus -Wrestrict, GCC PR 105329).
  return '/' + std::string{prefix} + std::string{deployment} + "." + std::to_string(pid) + "." +
         std::string{arena};
}

caf::expected<kernels::shm_arena> create_segment(std::string_view deployment,
                                                 std::string_view arena, std::size_t bytes) {
  auto name = segment_name(deployment, ::getpid(), arena);
  if (!name)
    return name.error();
  auto segment = kernels::shm_arena::create(*name, bytes);
  if (!segment)
    return logged(from_core(segment.error()));
  return std::move(*segment);
}

caf::expected<std::vector<std::string>> remove_stale_segments(std::string_view deployment,
                                                              std::string_view shm_dir) {
  if (!valid_part(deployment))
    return failure(mstar::errc::invalid_argument,
                   "deployment name '" + std::string{deployment} + "' is not valid");
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator{shm_dir, ec}) {
    const std::string file = entry.path().filename().string();
    const std::int64_t pid = owner_pid(file, deployment);
    if (pid < 0 || process_alive(pid))
      continue;
    if (kernels::shm_arena::remove(file))
      removed.push_back("/" + file);
  }
  if (ec)
    return logged(
        failure(mstar::errc::io_error, "listing " + std::string{shm_dir} + ": " + ec.message()));
  return removed;
}

caf::expected<kernels::shm_arena> open_segment(const arena_descriptor& d) {
  if (d.shm_name.empty())
    return failure(mstar::errc::invalid_argument,
                   "arena of '" + d.owner + "' is not in a shared-memory segment");
  auto segment = kernels::shm_arena::open(d.shm_name);
  if (!segment)
    return logged(from_core(segment.error()));
  if (segment->size() < d.size)
    return logged(failure(mstar::errc::invalid_argument,
                          "segment '" + d.shm_name + "' holds " + std::to_string(segment->size()) +
                              " bytes, the descriptor says " + std::to_string(d.size)));
  return std::move(*segment);
}

const std::string& host_identity() {
  static const std::string identity = compute_host_identity();
  return identity;
}

}  // namespace mstar::transport
