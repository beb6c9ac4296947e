// The NCCL group. Every collective is one NCCL call on a non-blocking
// communicator, then a poll of the communicator's asynchronous error and of
// the stream until the collective finished or the deadline passed; past it,
// or on any error, the communicator is aborted so its kernels stop and the
// stream drains, and the group keeps the cause.
#include "parallel/nccl_group.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <mutex>
#include <nccl.h>
#include <thread>
#include <type_traits>
#include <vector>

namespace mstar::parallel {
namespace {

using steady = std::chrono::steady_clock;

static_assert(nccl_unique_id::size == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(ncclUniqueId) == nccl_unique_id::size);
static_assert(std::is_same_v<ncclComm_t, ncclComm*>);
static_assert(std::is_same_v<cudaStream_t, CUstream_st*>);

// NVLink SHARP (NVLS) reductions use the NVSwitch's multicast objects. On a
// host whose GPUs are lent out one at a time, a job that dies holding a
// multicast object can leave the fabric state of GPUs it shares with others
// unusable until the host is reset, and the small tensor-parallel
// all-reduces of decoding gain little from it. So multicast stays off unless
// the operator asks for it by setting the variable; NCCL reads it at init,
// and setting it once, before any of our NCCL calls, keeps setenv from
// racing NCCL's getenv in another rank's thread.
void keep_multicast_off() {
  static std::once_flag once;
  std::call_once(once, [] { ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); });
}

std::string nccl_detail(ncclResult_t status, ncclComm_t comm) {
  std::string out = fmt::format("NCCL {}", ncclGetErrorString(status));
  // ncclGetLastError is process-wide and may describe another call; give it
  // as context, not as the cause.
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0')
    out += fmt::format(" (last NCCL error: {})", last);
  if (status == ncclRemoteError)
    out += "; a peer failed or left the group";
  return out;
}

error nccl_failure(std::string_view op, int rank, std::string_view call, ncclResult_t status,
                   ncclComm_t comm) {
  return make_error(errc::internal, fmt::format("tensor parallel {} on rank {}: {} failed: {}", op,
                                                rank, call, nccl_detail(status, comm)));
}

error cuda_failure(std::string_view op, int rank, std::string_view call, cudaError_t err) {
  return make_error(errc::internal,
                    fmt::format("tensor parallel {} on rank {}: {} failed: {} ({})", op, rank, call,
                                cudaGetErrorName(err), cudaGetErrorString(err)));
}

// NCCL cannot say which rank is missing; in a group of two it can only be
// the other one.
error timed_out(std::string_view op, int rank, int size, std::chrono::milliseconds timeout) {
  if (size == 2)
    return peer_timeout(op, rank, 1 - rank, timeout);
  return make_error(errc::internal,
                    fmt::format("tensor parallel {} on rank {}: the group of {} did not finish it "
                                "within {} ms (a rank did not arrive, or left)",
                                op, rank, size, timeout.count()));
}

// Waits until NCCL's asynchronous state of `comm` leaves ncclInProgress.
// ncclSuccess when it did, the error it reached, or ncclInProgress when the
// deadline passed first. Init and finalize take milliseconds, so the wait
// sleeps between polls instead of spinning.
ncclResult_t settle(ncclComm_t comm, steady::time_point deadline) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (const ncclResult_t got = ncclCommGetAsyncError(comm, &state); got != ncclSuccess)
      return got;
    if (state != ncclInProgress || steady::now() >= deadline)
      return state;
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
}

}  // namespace

result<nccl_unique_id> nccl_group::make_unique_id() {
  keep_multicast_off();
  ncclUniqueId raw{};
  if (const ncclResult_t st = ncclGetUniqueId(&raw); st != ncclSuccess) {
    return make_error(errc::internal, fmt::format("tensor parallel NCCL id: ncclGetUniqueId "
                                                  "failed: {}",
                                                  nccl_detail(st, nullptr)));
  }
  nccl_unique_id id;
  std::memcpy(id.bytes.data(), raw.internal, nccl_unique_id::size);
  return id;
}

result<std::unique_ptr<nccl_group>> nccl_group::create(int rank, int size, const nccl_unique_id& id,
                                                       int cuda_device,
                                                       std::chrono::milliseconds timeout,
                                                       CUstream_st* stream) {
  constexpr std::string_view op = "create";
  if (size < 1 || rank < 0 || rank >= size) {
    return make_error(errc::invalid_argument,
                      fmt::format("tensor parallel NCCL group: rank {} is not a rank of a group "
                                  "of {}",
                                  rank, size));
  }
  if (timeout.count() <= 0) {
    return make_error(
        errc::invalid_argument,
        fmt::format("tensor parallel NCCL group: timeout {} ms is not positive", timeout.count()));
  }
  keep_multicast_off();
  // NCCL binds the communicator to the current device.
  if (const cudaError_t err = cudaSetDevice(cuda_device); err != cudaSuccess)
    return cuda_failure(op, rank, fmt::format("cudaSetDevice({})", cuda_device), err);
  const bool owns_stream = stream == nullptr;
  // The default flag, not cudaStreamNonBlocking: an owned stream orders
  // after work the caller queued on the legacy default stream (cudaMemcpy).
  if (owns_stream) {
    if (const cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamDefault);
        err != cudaSuccess) {
      return cuda_failure(op, rank, "cudaStreamCreateWithFlags", err);
    }
  }
  auto give_up = [&](ncclComm_t comm, error e) -> error {
    if (comm != nullptr)
      ncclCommAbort(comm);
    if (owns_stream)
      cudaStreamDestroy(stream);
    return e;
  };

  ncclUniqueId raw{};
  std::memcpy(raw.internal, id.bytes.data(), nccl_unique_id::size);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; we bound the waits
  ncclComm_t comm = nullptr;
  const auto deadline = steady::now() + timeout;
  const ncclResult_t st = ncclCommInitRankConfig(&comm, size, raw, rank, &config);
  if (st != ncclSuccess && st != ncclInProgress)
    return give_up(comm, nccl_failure(op, rank, "ncclCommInitRankConfig", st, comm));
  if (comm == nullptr) {
    return give_up(nullptr,
                   make_error(errc::internal, fmt::format("tensor parallel {} on rank {}: "
                                                          "ncclCommInitRankConfig returned no "
                                                          "communicator",
                                                          op, rank)));
  }
  if (const ncclResult_t state = settle(comm, deadline); state == ncclInProgress) {
    return give_up(comm, make_error(errc::internal,
                                    fmt::format("tensor parallel {} on rank {}: the group of {} "
                                                "did not form within {} ms (a rank did not "
                                                "join, or the id is not this group's)",
                                                op, rank, size, timeout.count())));
  } else if (state != ncclSuccess) {
    return give_up(comm, nccl_failure(op, rank, "ncclCommInitRankConfig", state, comm));
  }
  return std::unique_ptr<nccl_group>(
      new nccl_group(rank, size, cuda_device, timeout, comm, stream, owns_stream));
}

nccl_group::nccl_group(int rank, int size, int device, std::chrono::milliseconds timeout,
                       ncclComm* comm, CUstream_st* stream, bool owns_stream) noexcept
    : rank_(rank),
      size_(size),
      device_(device),
      timeout_(timeout),
      comm_(comm),
      stream_(stream),
      owns_stream_(owns_stream) {}

nccl_group::~nccl_group() {
  cudaSetDevice(device_);
  if (comm_ != nullptr) {
    // Finalize flushes this rank's operations (none: every call waited for
    // its own) and frees what peers share; bounded like a collective, and
    // abandoned for an abort past the deadline or on an error.
    const ncclResult_t st = ncclCommFinalize(comm_);
    if ((st == ncclSuccess || st == ncclInProgress) &&
        settle(comm_, steady::now() + timeout_) == ncclSuccess) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    } else {
      abort_comm();
    }
  }
  if (owns_stream_)
    cudaStreamDestroy(stream_);
}

result<void> nccl_group::all_reduce_sum(std::span<float> data) {
  constexpr std::string_view op = "all_reduce_sum";
  if (auto e = refuse(op))
    return *e;
  if (auto e = check_device_memory(op, "data", data.data(), data.size_bytes()))
    return fail(*e);
  if (data.empty())
    return {};
  return complete(op, ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum,
                                    comm_, stream_));
}

result<void> nccl_group::all_gather(std::span<const float> in, std::span<float> out) {
  constexpr std::string_view op = "all_gather";
  if (auto e = refuse(op))
    return *e;
  if (out.size() != in.size() * static_cast<std::size_t>(size_)) {
    return fail(make_error(errc::invalid_argument,
                           fmt::format("tensor parallel {} on rank {}: output holds {} floats, "
                                       "not {} ranks x {}",
                                       op, rank_, out.size(), size_, in.size())));
  }
  if (auto e = check_device_memory(op, "input", in.data(), in.size_bytes()))
    return fail(*e);
  if (auto e = check_device_memory(op, "output", out.data(), out.size_bytes()))
    return fail(*e);
  if (in.empty())
    return {};
  return complete(op, ncclAllGather(in.data(), out.data(), in.size(), ncclFloat32, comm_, stream_));
}

result<void> nccl_group::broadcast(std::span<std::byte> data, int root) {
  constexpr std::string_view op = "broadcast";
  if (auto e = refuse(op))
    return *e;
  if (root < 0 || root >= size_) {
    return fail(make_error(errc::invalid_argument,
                           fmt::format("tensor parallel {} on rank {}: root {} is not a rank of {}",
                                       op, rank_, root, size_)));
  }
  if (auto e = check_device_memory(op, "data", data.data(), data.size_bytes()))
    return fail(*e);
  if (data.empty())
    return {};
  return complete(
      op, ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm_, stream_));
}

void nccl_group::abort(const std::string& reason) {
  if (!broken_) {
    broken_ = make_error(errc::internal,
                         fmt::format("tensor parallel group: rank {} aborted ({})", rank_, reason));
  }
  abort_comm();
}

std::optional<error> nccl_group::refuse(std::string_view op) {
  if (broken_)
    return broken_;
  // Collectives bind to the communicator's device; a rank's thread may have
  // made another current since create.
  if (const cudaError_t err = cudaSetDevice(device_); err != cudaSuccess)
    return fail(cuda_failure(op, rank_, fmt::format("cudaSetDevice({})", device_), err));
  return std::nullopt;
}

std::optional<error> nccl_group::check_device_memory(std::string_view op, std::string_view what,
                                                     const void* data, std::size_t bytes) const {
  // NCCL checks pointers only under NCCL_CHECK_POINTERS=1; a host pointer
  // would otherwise fault in its kernel and leave the CUDA context unusable.
  if (bytes == 0)
    return std::nullopt;
  cudaPointerAttributes attr{};
  if (const cudaError_t err = cudaPointerGetAttributes(&attr, data); err != cudaSuccess) {
    cudaGetLastError();  // not sticky; leave the runtime clean
    return cuda_failure(op, rank_, fmt::format("cudaPointerGetAttributes({})", what), err);
  }
  const bool on_device = attr.type == cudaMemoryTypeDevice && attr.device == device_;
  if (on_device || attr.type == cudaMemoryTypeManaged)
    return std::nullopt;
  return make_error(
      errc::invalid_argument,
      fmt::format("tensor parallel {} on rank {}: {} ({} bytes) is not device "
                  "memory of CUDA device {} (memory type {}, device {})",
                  op, rank_, what, bytes, device_, static_cast<int>(attr.type), attr.device));
}

result<void> nccl_group::complete(std::string_view op, int enqueued) {
  const auto status = static_cast<ncclResult_t>(enqueued);
  if (status != ncclSuccess && status != ncclInProgress)
    return fail(nccl_failure(op, rank_, "enqueueing", status, comm_));
  const auto deadline = steady::now() + timeout_;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (const ncclResult_t got = ncclCommGetAsyncError(comm_, &state); got != ncclSuccess)
      return fail(nccl_failure(op, rank_, "ncclCommGetAsyncError", got, comm_));
    if (state != ncclSuccess && state != ncclInProgress)
      return fail(nccl_failure(op, rank_, "the collective", state, comm_));
    // Until the state is ncclSuccess the collective may not be on the stream
    // yet, and an idle stream would read as done.
    if (state == ncclSuccess) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess)
        return {};
      if (q != cudaErrorNotReady)
        return fail(cuda_failure(op, rank_, "cudaStreamQuery", q));
    }
    if (steady::now() >= deadline)
      return fail(timed_out(op, rank_, size_, timeout_));
    // A decode step's all-reduce takes tens of microseconds: yield, do not
    // sleep.
    std::this_thread::yield();
  }
}

error nccl_group::fail(error cause) {
  if (!broken_)
    broken_ = std::move(cause);
  abort_comm();
  return *broken_;
}

void nccl_group::abort_comm() noexcept {
  if (comm_ == nullptr)
    return;
  cudaSetDevice(device_);
  // Blocks until NCCL stopped the communicator's kernels and freed it.
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

group_maker nccl_group_maker() {
  return [](int ranks, std::span<const std::string> devices,
            std::chrono::milliseconds timeout) -> result<std::optional<rank_joiner>> {
    std::vector<int> cuda(devices.size(), -1);
    for (std::size_t r = 0; r < devices.size(); ++r) {
      const std::string& d = devices[r];
      int n = -1;
      if (d.starts_with("cuda:") && d.size() > 5 &&
          d.find_first_not_of("0123456789", 5) == std::string::npos) {
        n = std::atoi(d.c_str() + 5);
      }
      if (n < 0 || std::find(cuda.begin(), cuda.end(), n) != cuda.end())
        return std::optional<rank_joiner>{};  // the CPU, "cuda", or a GPU shared
      cuda[r] = n;
    }
    if (static_cast<int>(cuda.size()) != ranks || ranks < 2)
      return std::optional<rank_joiner>{};
    auto id = nccl_group::make_unique_id();
    if (!id)
      return id.error();
    return std::optional<rank_joiner>{[id = *id, cuda, ranks,
                                       timeout](int rank) -> result<std::shared_ptr<communicator>> {
      if (rank < 0 || rank >= ranks) {
        return make_error(errc::invalid_argument,
                          fmt::format("NCCL group maker: rank {} of {}", rank, ranks));
      }
      auto g = nccl_group::create(rank, ranks, id, cuda[static_cast<std::size_t>(rank)], timeout);
      if (!g)
        return g.error();
      return std::shared_ptr<communicator>(std::move(*g));
    }};
  };
}

process_group_factory nccl_process_groups(
    std::function<result<int>(int rank, int ranks)> cuda_device_of,
    std::chrono::milliseconds timeout) {
  process_group_factory f;
  f.host = [cuda_device_of, timeout](int ranks) -> result<process_group_factory::hosted> {
    auto id = nccl_group::make_unique_id();
    if (!id)
      return id.error();
    auto gpu = cuda_device_of(0, ranks);
    if (!gpu)
      return gpu.error();
    process_group_factory::hosted h;
    h.join_text = id->to_hex();
    h.complete = [id = *id, gpu = *gpu, ranks,
                  timeout]() -> result<process_group_factory::communicator_ptr> {
      auto comm = nccl_group::create(0, ranks, id, gpu, timeout);
      if (!comm)
        return comm.error();
      return process_group_factory::communicator_ptr(std::move(*comm));
    };
    return h;
  };
  f.join = [cuda_device_of, timeout](const std::string& text, int rank,
                                     int ranks) -> result<process_group_factory::communicator_ptr> {
    auto id = nccl_unique_id::from_hex(text);
    if (!id)
      return id.error();
    auto gpu = cuda_device_of(rank, ranks);
    if (!gpu)
      return gpu.error();
    auto comm = nccl_group::create(rank, ranks, *id, *gpu, timeout);
    if (!comm)
      return comm.error();
    return process_group_factory::communicator_ptr(std::move(*comm));
  };
  return f;
}

}  // namespace mstar::parallel
