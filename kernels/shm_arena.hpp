#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace mstar::kernels {

/// A named POSIX shared-memory segment mapped read-write into this process:
/// the host arena a same-host peer process can map to read pages and slots
/// without a copy through the network stack. Move-only; the process that
/// created the segment removes its name when its `shm_arena` is destroyed
/// (mappings already open elsewhere stay valid until they are unmapped).
///
/// Names follow POSIX `shm_open`: an optional leading '/', then 1 to 200
/// characters from `[A-Za-z0-9._-]`, not "." or "..". `name()` returns the
/// canonical form with the leading '/'.
class shm_arena {
 public:
  /// Creates the segment `name` with `bytes` bytes (> 0), maps it, zero-fills
  /// it and touches every page so the first access on the hot path does not
  /// fault. Fails, naming the segment, when the name is invalid or already
  /// exists; on failure nothing is left behind.
  [[nodiscard]] static result<shm_arena> create(std::string_view name, std::size_t bytes);

  /// Maps the existing segment `name`, whole. Fails with `not_found` when no
  /// such segment exists (or it was created empty and not yet sized).
  [[nodiscard]] static result<shm_arena> open(std::string_view name);

  /// Removes the name `name` (not mappings already made); true when a segment
  /// of that name existed and was removed.
  static bool remove(std::string_view name);

  /// The canonical form of `name` ("/x" for "x" or "/x"), or an error naming
  /// the rule it broke.
  [[nodiscard]] static result<std::string> canonical_name(std::string_view name);

  shm_arena(shm_arena&& other) noexcept;
  shm_arena& operator=(shm_arena&& other) noexcept;
  shm_arena(const shm_arena&) = delete;
  shm_arena& operator=(const shm_arena&) = delete;
  /// Unmaps, then removes the name when this arena created it.
  ~shm_arena();

  /// Start of the mapping; 64-byte aligned (page aligned, in fact). Null only
  /// in a moved-from arena.
  [[nodiscard]] std::byte* data() noexcept { return data_; }
  /// Start of the mapping, read-only.
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  /// Size of the segment in bytes.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Canonical name of the segment, with the leading '/'.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Whether this arena created the segment (and so removes it).
  [[nodiscard]] bool owns_name() const noexcept { return owner_; }

 private:
  struct mapping;  // the Boost.Interprocess region, kept out of this header
  shm_arena(std::unique_ptr<mapping> region, std::string name, bool owner) noexcept;
  void release() noexcept;

  std::unique_ptr<mapping> region_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
};

}  // namespace mstar::kernels
