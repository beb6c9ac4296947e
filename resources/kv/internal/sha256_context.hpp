#pragma once

// The per-thread SHA-256 machinery behind page keys: one OpenSSL digest
// context and one growing preimage buffer per thread, the SHA-256 method
// fetched once per process. Keying a page then allocates nothing.

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "resources/kv/keys.hpp"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace mstar::resources::internal {

/// Builds one preimage in a reusable buffer and hashes it.
class preimage_writer {
 public:
  preimage_writer();
  ~preimage_writer();
  preimage_writer(const preimage_writer&) = delete;
  preimage_writer& operator=(const preimage_writer&) = delete;

  /// Starts a new preimage of at most `bytes` bytes.
  void reserve(std::size_t bytes) {
    if (buf_.size() < bytes)
      buf_.resize(bytes);
    at_ = 0;
  }

  void u32(std::uint32_t v) noexcept {
    if constexpr (std::endian::native != std::endian::little)
      v = byteswap32(v);
    std::memcpy(buf_.data() + at_, &v, 4);
    at_ += 4;
  }

  void bytes(std::span<const std::uint8_t> b) noexcept {
    if (!b.empty())
      std::memcpy(buf_.data() + at_, b.data(), b.size());
    at_ += b.size();
  }

  /// `u32le(len(b)) || b`; the caller checked that the length fits.
  void field(std::span<const std::uint8_t> b) noexcept {
    u32(static_cast<std::uint32_t>(b.size()));
    bytes(b);
  }

  /// Token ids as u32 little-endian, one copy on little-endian hosts.
  void u32_array(std::span<const std::uint32_t> values) noexcept {
    if constexpr (std::endian::native == std::endian::little) {
      if (!values.empty())
        std::memcpy(buf_.data() + at_, values.data(), values.size() * 4);
      at_ += values.size() * 4;
    } else {
      for (auto v : values)
        u32(v);
    }
  }

  /// SHA-256 of what was written since `reserve`.
  [[nodiscard]] digest256 digest();

 private:
  static std::uint32_t byteswap32(std::uint32_t v) noexcept {
    return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
  }

  std::vector<std::uint8_t> buf_;
  std::size_t at_ = 0;
  ::evp_md_ctx_st* ctx_;
};

/// This thread's writer.
[[nodiscard]] preimage_writer& thread_preimage();

}  // namespace mstar::resources::internal
