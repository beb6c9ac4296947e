#include "kernels/cuda/runtime.hpp"

#include <cublas_v2.h>
#include <string>

#include "kernels/device_memory.hpp"

namespace mstar::kernels::cuda {
namespace {

mstar::errc code_of(cudaError_t err) {
  switch (err) {
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
      return errc::invalid_argument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNotSupported:
    case cudaErrorNoKernelImageForDevice:
      return errc::unsupported;
    case cudaErrorMemoryAllocation:
      return errc::out_of_range;
    default:
      return errc::io_error;
  }
}

mstar::error blas_error(cublasStatus_t status, std::string_view what) {
  errc code = errc::io_error;
  if (status == CUBLAS_STATUS_INVALID_VALUE)
    code = errc::invalid_argument;
  else if (status == CUBLAS_STATUS_ALLOC_FAILED)
    code = errc::out_of_range;
  else if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH ||
           status == CUBLAS_STATUS_NOT_INITIALIZED)
    code = errc::unsupported;
  return make_error(code, std::string{what} + ": " + cublasGetStatusName(status) + " (" +
                              cublasGetStatusString(status) + ")");
}

}  // namespace

mstar::error cuda_error(cudaError_t err, std::string_view what) {
  return make_error(code_of(err), std::string{what} + ": " + cudaGetErrorName(err) + " (" +
                                      cudaGetErrorString(err) + ")");
}

result<void> check(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess)
    return {};
  return cuda_error(err, what);
}

result<device_buffer> device_buffer::make(std::size_t bytes) {
  if (bytes == 0)
    return device_buffer{};
  void* data = nullptr;
  if (const cudaError_t err = cudaMalloc(&data, bytes); err != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky; leave the runtime clean
    return cuda_error(err, "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  }
  return device_buffer{data, bytes};
}

result<pinned_buffer> pinned_buffer::make(std::size_t bytes) {
  if (bytes == 0)
    return pinned_buffer{};
  void* data = nullptr;
  if (const cudaError_t err = cudaHostAlloc(&data, bytes, cudaHostAllocDefault);
      err != cudaSuccess) {
    cudaGetLastError();  // as cudaMalloc: not sticky
    return cuda_error(err, "cudaHostAlloc(" + std::to_string(bytes) + " bytes)");
  }
  return pinned_buffer{data, bytes};
}

result<stream> stream::make() {
  cudaStream_t handle = nullptr;
  if (const cudaError_t err = cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking);
      err != cudaSuccess) {
    return cuda_error(err, "cudaStreamCreateWithFlags");
  }
  return stream{handle};
}

stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr)
      cudaStreamDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

stream::~stream() {
  if (handle_ != nullptr)
    cudaStreamDestroy(handle_);
}

result<void> stream::synchronize() const {
  return check(cudaStreamSynchronize(handle_), "cudaStreamSynchronize");
}

result<event> event::make(bool timing) {
  cudaEvent_t handle = nullptr;
  const unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
  if (const cudaError_t err = cudaEventCreateWithFlags(&handle, flags); err != cudaSuccess)
    return cuda_error(err, "cudaEventCreateWithFlags");
  return event{handle};
}

event& event::operator=(event&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr)
      cudaEventDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

event::~event() {
  if (handle_ != nullptr)
    cudaEventDestroy(handle_);
}

result<void> event::record(cudaStream_t s) const {
  return check(cudaEventRecord(handle_, s), "cudaEventRecord");
}

result<void> event::synchronize() const {
  return check(cudaEventSynchronize(handle_), "cudaEventSynchronize");
}

result<float> event::elapsed_ms(const event& start, const event& stop) {
  float ms = 0.0F;
  if (const cudaError_t err = cudaEventElapsedTime(&ms, start.handle_, stop.handle_);
      err != cudaSuccess) {
    return cuda_error(err, "cudaEventElapsedTime");
  }
  return ms;
}

result<blas_handle> blas_handle::make(std::size_t workspace_bytes) {
  auto workspace = device_buffer::make(workspace_bytes);
  if (!workspace)
    return workspace.error().with_context("cuBLAS workspace: ");
  blas_handle out;
  if (const cublasStatus_t s = cublasCreate(&out.handle_); s != CUBLAS_STATUS_SUCCESS)
    return blas_error(s, "cublasCreate");
  out.workspace_ = std::move(workspace).value();
  if (out.workspace_.size() != 0) {
    if (const cublasStatus_t s =
            cublasSetWorkspace(out.handle_, out.workspace_.data(), out.workspace_.size());
        s != CUBLAS_STATUS_SUCCESS) {
      return blas_error(s, "cublasSetWorkspace");
    }
  }
  return out;
}

blas_handle& blas_handle::operator=(blas_handle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr)
      cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    workspace_ = std::move(other.workspace_);
  }
  return *this;
}

blas_handle::~blas_handle() {
  // The handle first: it may still reference the workspace.
  if (handle_ != nullptr)
    cublasDestroy(handle_);
}

}  // namespace mstar::kernels::cuda

namespace mstar::kernels {

result<device_memory_info> query_device_memory(int index) {
  const auto failed = [index](cudaError_t err, const char* call) {
    const errc code = err == cudaErrorInvalidDevice ? errc::invalid_argument : errc::unsupported;
    cudaGetLastError();  // clear it so later runtime calls start clean
    return make_error(code, "device " + std::to_string(index) + ": " + call + " failed: " +
                                cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  };
  int previous = 0;
  if (const cudaError_t err = cudaGetDevice(&previous); err != cudaSuccess)
    return failed(err, "cudaGetDevice");
  if (const cudaError_t err = cudaSetDevice(index); err != cudaSuccess)
    return failed(err, "cudaSetDevice");
  std::size_t free = 0, total = 0;
  const cudaError_t err = cudaMemGetInfo(&free, &total);
  cudaSetDevice(previous);
  if (err != cudaSuccess)
    return failed(err, "cudaMemGetInfo");
  return device_memory_info{static_cast<std::uint64_t>(total), static_cast<std::uint64_t>(free)};
}

}  // namespace mstar::kernels
