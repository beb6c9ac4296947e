#include "core/input_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace mstar {
namespace {

error open_error(const std::filesystem::path& path, int err) {
  if (err == ENOENT || err == ENOTDIR)
    return make_error(errc::not_found, fmt::format("{}: no such file", path.string()));
  return make_error(errc::io_error,
                    fmt::format("{}: cannot open: {}", path.string(), std::strerror(err)));
}

// What a path that is not a regular file is, for the message.
std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "is a directory, not a file";
  if (S_ISFIFO(mode))
    return "is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(mode))
    return "is a character device, not a regular file";
  if (S_ISBLK(mode))
    return "is a block device, not a regular file";
  if (S_ISSOCK(mode))
    return "is a socket, not a regular file";
  return "is not a regular file";
}

error too_large(const std::filesystem::path& path, std::uint64_t size, std::uint64_t max_bytes) {
  return make_error(errc::out_of_range,
                    fmt::format("{}: is {} bytes, more than the {} bytes this reader accepts",
                                path.string(), size, max_bytes));
}

error grew(const std::filesystem::path& path, std::uint64_t max_bytes) {
  return make_error(errc::out_of_range,
                    fmt::format("{}: grew past the {} bytes this reader accepts while read",
                                path.string(), max_bytes));
}

}  // namespace

result<input_file> input_file::open(const std::filesystem::path& path) {
  // stat first: opening a device can have effects, opening a FIFO waits for a
  // writer. O_NONBLOCK covers a path swapped for a FIFO between the two.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    return open_error(path, errno);
  if (!S_ISREG(info.st_mode))
    return make_error(errc::io_error, fmt::format("{}: {}", path.string(), kind_of(info.st_mode)));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return open_error(path, errno);
  input_file file{fd, 0, path};
  if (::fstat(fd, &info) != 0) {
    return make_error(errc::io_error,
                      fmt::format("{}: cannot stat: {}", path.string(), std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode))
    return make_error(errc::io_error, fmt::format("{}: {}", path.string(), kind_of(info.st_mode)));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  file.size_ = static_cast<std::uint64_t>(info.st_size);
  return file;
}

input_file::input_file(input_file&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

input_file& input_file::operator=(input_file&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

input_file::~input_file() {
  if (fd_ >= 0)
    ::close(fd_);
}

result<std::string> input_file::read_all(std::uint64_t max_bytes) const {
  if (size_ > max_bytes)
    return too_large(path_, size_, max_bytes);
  std::string out;
  out.resize(static_cast<std::size_t>(size_));
  std::size_t at = 0;
  for (;;) {
    if (at == out.size()) {
      if (out.size() > max_bytes)
        return grew(path_, max_bytes);
      // The file may have grown since fstat: look for more, one block at a time.
      out.resize(out.size() + 4096);
    }
    const ssize_t n = ::read(fd_, out.data() + at, out.size() - at);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      return make_error(errc::io_error,
                        fmt::format("{}: cannot read: {}", path_.string(), std::strerror(errno)));
    }
    if (n == 0)
      break;
    at += static_cast<std::size_t>(n);
  }
  out.resize(at);
  if (out.size() > max_bytes)
    return grew(path_, max_bytes);
  return out;
}

result<std::string> read_input_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  auto file = input_file::open(path);
  if (!file)
    return file.error();
  return file->read_all(max_bytes);
}

}  // namespace mstar
