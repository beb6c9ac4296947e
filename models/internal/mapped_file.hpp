#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "core/result.hpp"

namespace mstar::models::internal {

/// A whole file mapped read-only into memory; the one owner of the mapping.
///
/// Move-only; the bytes stay valid, at the same address, for the object's
/// life, so views into them can be handed out freely. An empty file maps to an
/// empty span without a mapping.
class mapped_file {
 public:
  /// Maps `path`; an io_error names the path and the system's reason.
  [[nodiscard]] static result<mapped_file> open(const std::filesystem::path& path);

  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file();

  /// The file's bytes.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

 private:
  mapped_file(const std::byte* data, std::size_t size) noexcept : data_(data), size_(size) {}
  void release() noexcept;

  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace mstar::models::internal
