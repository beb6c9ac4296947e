#pragma once

// Owners of CUDA runtime handles (device and pinned host memory, streams,
// events, a cuBLAS handle) and the conversion of a `cudaError_t` into the project's error.
// Only `cuda_runtime_api.h` is needed to use them, so plain C++ files can.

#include <cstddef>
#include <cuda_runtime_api.h>
#include <string_view>
#include <utility>

#include "core/result.hpp"

struct cublasContext;  // cuBLAS's handle type, kept opaque here

namespace mstar::kernels::cuda {

/// The project error for `err`, its message "<what>: <name> (<description>)".
/// Codes: invalid value or configuration -> invalid_argument; no device,
/// driver too old, unsupported -> unsupported; out of memory ->
/// out_of_range (the request does not fit the device); anything else ->
/// io_error. Call it where the code is first seen; callers propagate.
[[nodiscard]] mstar::error cuda_error(cudaError_t err, std::string_view what);

/// Success for `cudaSuccess`, else `cuda_error(err, what)`.
[[nodiscard]] result<void> check(cudaError_t err, std::string_view what);

/// Memory the CUDA runtime handed out, given back with `Free` on
/// destruction. Move-only; an empty one holds nothing. The two kinds below
/// differ only in how they are made and freed.
template <cudaError_t (*Free)(void*)>
class cuda_memory {
 public:
  cuda_memory() = default;
  cuda_memory(cuda_memory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  cuda_memory& operator=(cuda_memory&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr)
        Free(data_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  cuda_memory(const cuda_memory&) = delete;
  cuda_memory& operator=(const cuda_memory&) = delete;
  ~cuda_memory() {
    if (data_ != nullptr)
      Free(data_);
  }

  /// The address, or null when empty.
  [[nodiscard]] void* data() const noexcept { return data_; }
  /// The same address as `T*` (for kernels' params, or host views).
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(data_);
  }
  /// Size in bytes.
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

 protected:
  cuda_memory(void* data, std::size_t bytes) noexcept : data_(data), bytes_(bytes) {}

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Device memory from `cudaMalloc` (never managed memory; 256-byte aligned),
/// freed on destruction.
class device_buffer : public cuda_memory<&cudaFree> {
 public:
  device_buffer() = default;
  /// `bytes` of uninitialised device memory on the current device; zero bytes
  /// gives an empty buffer without calling the runtime.
  [[nodiscard]] static result<device_buffer> make(std::size_t bytes);

 private:
  using cuda_memory::cuda_memory;
};

/// Page-locked host memory from `cudaHostAlloc`, freed on destruction: what
/// an asynchronous copy needs on its host side (a pageable one is staged or
/// waits for the stream). Freeing it while a copy that reads or writes it is
/// queued is the owner's bug.
class pinned_buffer : public cuda_memory<&cudaFreeHost> {
 public:
  pinned_buffer() = default;
  /// `bytes` of uninitialised pinned host memory; zero bytes gives an empty
  /// buffer without calling the runtime.
  [[nodiscard]] static result<pinned_buffer> make(std::size_t bytes);

 private:
  using cuda_memory::cuda_memory;
};

/// A CUDA stream (`cudaStreamNonBlocking`: it does not synchronise with the
/// legacy default stream), destroyed on destruction. Move-only.
class stream {
 public:
  stream() = default;
  /// A new stream on the current device.
  [[nodiscard]] static result<stream> make();

  stream(stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream();

  /// The handle launchers take; null (the legacy stream) when empty.
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  /// Blocks until all work queued on the stream finished; reports the first
  /// error any of it raised.
  [[nodiscard]] result<void> synchronize() const;

 private:
  explicit stream(cudaStream_t handle) noexcept : handle_(handle) {}
  cudaStream_t handle_ = nullptr;
};

/// A CUDA event, destroyed on destruction. Move-only.
class event {
 public:
  event() = default;
  /// A new event; `timing` false makes a cheaper event for ordering only.
  [[nodiscard]] static result<event> make(bool timing = true);

  event(event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  event& operator=(event&& other) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event();

  /// The handle.
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_; }
  /// Records the event on `s`.
  [[nodiscard]] result<void> record(cudaStream_t s) const;
  /// Blocks until the event completed.
  [[nodiscard]] result<void> synchronize() const;
  /// Milliseconds between two completed timing events.
  [[nodiscard]] static result<float> elapsed_ms(const event& start, const event& stop);

 private:
  explicit event(cudaEvent_t handle) noexcept : handle_(handle) {}
  cudaEvent_t handle_ = nullptr;
};

/// A cuBLAS handle and the device workspace it is given, so a GEMM never
/// allocates (and can be captured in a graph). Move-only. One handle per
/// host thread at a time: cuBLAS handles are not thread-safe.
class blas_handle {
 public:
  blas_handle() = default;
  /// A handle on the current device with `workspace_bytes` of workspace
  /// (32 MiB is cuBLAS's advice for Hopper).
  [[nodiscard]] static result<blas_handle> make(std::size_t workspace_bytes = 32U << 20U);

  blas_handle(blas_handle&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), workspace_(std::move(other.workspace_)) {}
  blas_handle& operator=(blas_handle&& other) noexcept;
  blas_handle(const blas_handle&) = delete;
  blas_handle& operator=(const blas_handle&) = delete;
  ~blas_handle();

  /// The `cublasHandle_t`.
  [[nodiscard]] cublasContext* get() const noexcept { return handle_; }

 private:
  cublasContext* handle_ = nullptr;
  device_buffer workspace_;  // destroyed after the handle that uses it
};

}  // namespace mstar::kernels::cuda
