#include "models/internal/mapped_file.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <sys/mman.h>
#include <utility>

#include "core/input_file.hpp"

namespace mstar::models::internal {
namespace {

error system_error(const std::filesystem::path& path, const char* what, int err) {
  return make_error(errc::io_error,
                    fmt::format("{}: cannot {}: {}", path.string(), what, std::strerror(err)));
}

}  // namespace

result<mapped_file> mapped_file::open(const std::filesystem::path& path) {
  auto file = input_file::open(path);
  if (!file)  // every failure to reach the bytes is an io_error here, a missing file too
    return make_error(errc::io_error, file.error().message());
  const auto size = static_cast<std::size_t>(file->size());
  if (size == 0)
    return mapped_file{nullptr, 0};
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file->fd(), 0);
  if (data == MAP_FAILED)
    return system_error(path, "map", errno);
  return mapped_file{static_cast<const std::byte*>(data), size};
}

mapped_file::mapped_file(mapped_file&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

mapped_file& mapped_file::operator=(mapped_file&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

mapped_file::~mapped_file() {
  release();
}

void mapped_file::release() noexcept {
  if (data_ != nullptr) {
    // NOLINTNEXTLINE: munmap takes a non-const pointer to memory we only read.
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}

}  // namespace mstar::models::internal
