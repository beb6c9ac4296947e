#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

namespace mstar::kernels {

/// A zero-initialised, 64-byte aligned block of host memory that never moves:
/// what a pool stores pages or slots in until the CUDA issue adds device
/// arenas. Plans may hold pointers into it for the arena's lifetime.
class host_arena {
 public:
  host_arena() = default;
  explicit host_arena(std::size_t bytes)
      : bytes_(bytes),
        data_(bytes == 0 ? nullptr
                         : static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64}))) {
    if (data_ != nullptr)
      std::memset(data_.get(), 0, bytes);
  }

  [[nodiscard]] std::byte* data() noexcept { return data_.get(); }
  [[nodiscard]] const std::byte* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

 private:
  struct aligned_delete {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::size_t bytes_ = 0;
  std::unique_ptr<std::byte[], aligned_delete> data_;
};

}  // namespace mstar::kernels
