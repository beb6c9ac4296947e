#pragma once

// The NCCL group: one rank per GPU (a process or a thread each), the
// collectives of communicator.hpp over NCCL on a CUDA stream. Built only
// with CUDA and NCCL (MSTAR_HAVE_NCCL); nothing here includes nccl.h or the
// CUDA headers, so a model's CUDA backend can name it from plain C++.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "parallel/communicator.hpp"
#include "parallel/nccl_unique_id.hpp"

struct ncclComm;     // NCCL's communicator: ncclComm_t is ncclComm*
struct CUstream_st;  // CUDA's stream: cudaStream_t is CUstream_st*

namespace mstar::parallel {

/// The NCCL group as a tensor_parallel_lm's group maker: when every device
/// is "cuda:N" and no two ranks share one, a fresh unique id (this process
/// hosts NCCL's bootstrap root) and a joiner that makes rank r a
/// nccl_group on its device, on its thread; otherwise nullopt (ranks sharing
/// a GPU, or on the CPU, use the in-process group: NCCL refuses two ranks
/// on one device). The error of ncclGetUniqueId when it fails.
[[nodiscard]] group_maker nccl_group_maker();

/// NCCL groups for ranks in separate processes: rank 0 makes the id (its
/// process hosts NCCL's bootstrap root) and the others join with it as hex;
/// rank r runs on CUDA device `cuda_device_of(r, ranks)`.
[[nodiscard]] process_group_factory nccl_process_groups(
    std::function<result<int>(int rank, int ranks)> cuda_device_of,
    std::chrono::milliseconds timeout);

/// One rank of a NCCL communicator, bound to one CUDA device.
///
/// Every span passed to a collective is DEVICE memory on that device (the
/// model's CUDA backend passes its device buffers); host memory is refused
/// by NCCL as an invalid argument. A collective is enqueued on the group's
/// stream and the call returns once the stream has finished it, or fails
/// when the timeout passes first: the communicator is non-blocking, and the
/// call polls NCCL's asynchronous error and the stream until done or the
/// deadline. On a timeout or any NCCL or CUDA error the NCCL communicator is
/// aborted (its kernels stop), the group is broken, and this and every later
/// call on this rank fail with that cause.
///
/// What NCCL cannot give, unlike the in-process group: a peer's abort is not
/// announced (its partners see a NCCL error or, on NVLink, their timeout),
/// the error cannot always name the missing rank (it does in a group of
/// two), and calls out of step across ranks (another op or count) are not
/// detected: they end in the timeout at best, or in wrong data.
///
/// Thread-confined: one thread calls everything on a rank, abort included.
class nccl_group final : public communicator {
 public:
  /// How long a collective, or `create`, waits unless told otherwise.
  static constexpr std::chrono::milliseconds default_timeout{60'000};

  /// A fresh id from ncclGetUniqueId: starts NCCL's bootstrap root in this
  /// process (see nccl_unique_id). internal naming the NCCL error, e.g. when
  /// no network interface can host the root.
  [[nodiscard]] static result<nccl_unique_id> make_unique_id();

  /// Joins the group `id` names as `rank` of `size` on CUDA device
  /// `cuda_device`, waiting for all `size` ranks to join, at most `timeout`.
  /// Collectives run on `stream` when given (borrowed: a stream of
  /// `cuda_device` that outlives the group; the wait for a collective then
  /// includes the work queued on it before, so it counts against the
  /// timeout), else on a stream the group makes and owns, one that orders
  /// after the legacy default stream (a caller using its own non-blocking
  /// stream synchronises it, or passes it here). Sets NCCL_NVLS_ENABLE=0 in the process
  /// environment unless it is set (nccl_group.cpp says why).
  /// invalid_argument for a rank outside [0, size), size < 1 or a timeout
  /// that is not positive; internal naming the rank and the NCCL or CUDA
  /// error, or the timeout, when the group cannot be formed.
  [[nodiscard]] static result<std::unique_ptr<nccl_group>> create(
      int rank, int size, const nccl_unique_id& id, int cuda_device,
      std::chrono::milliseconds timeout = default_timeout, CUstream_st* stream = nullptr);

  /// Finalises the communicator (bounded by the timeout, aborting past it),
  /// then destroys it and an owned stream. Peers are not told.
  ~nccl_group() override;
  nccl_group(const nccl_group&) = delete;
  nccl_group& operator=(const nccl_group&) = delete;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept override { return timeout_; }
  /// The spans are this rank's GPU memory.
  [[nodiscard]] bool takes_device_memory() const noexcept override { return true; }
  /// The CUDA device every span must live on.
  [[nodiscard]] int cuda_device() const noexcept { return device_; }
  /// The stream collectives run on (owned or borrowed).
  [[nodiscard]] CUstream_st* stream() const noexcept { return stream_; }
  /// The cause, once the group is broken.
  [[nodiscard]] const std::optional<error>& broken() const noexcept { return broken_; }

  /// ncclAllReduce, float sum. NCCL's ring and tree reduce each element once
  /// and copy the result to every rank, so every rank ends with the same
  /// bits; the order of the sum is NCCL's, not rank order, so the bits may
  /// differ from the in-process group's (and with NCCL's algorithm choice).
  [[nodiscard]] result<void> all_reduce_sum(std::span<float> data) override;
  /// ncclAllGather: `out` holds size() * in.size() floats, rank after rank.
  [[nodiscard]] result<void> all_gather(std::span<const float> in, std::span<float> out) override;
  /// ncclBroadcast of bytes from `root`.
  [[nodiscard]] result<void> broadcast(std::span<std::byte> data, int root) override;
  /// Aborts the NCCL communicator: this rank's later calls fail naming
  /// `reason`; peers' collectives fail on their side (a NCCL error, or their
  /// timeout) instead of waiting on this rank forever.
  void abort(const std::string& reason) override;

 private:
  nccl_group(int rank, int size, int device, std::chrono::milliseconds timeout, ncclComm* comm,
             CUstream_st* stream, bool owns_stream) noexcept;

  /// Waits for the collective `op` whose enqueueing call returned
  /// `enqueued` (an ncclResult_t), until done or the timeout.
  [[nodiscard]] result<void> complete(std::string_view op, int enqueued);
  /// The error a call meets before it starts: the device cannot be made
  /// current, or the group is already broken.
  [[nodiscard]] std::optional<error> refuse(std::string_view op);
  /// invalid_argument when the `bytes` at `data` (the span called `what`)
  /// are not device memory of this group's device (managed memory passes).
  [[nodiscard]] std::optional<error> check_device_memory(std::string_view op, std::string_view what,
                                                         const void* data, std::size_t bytes) const;
  /// Breaks the group with `cause` (the first cause stays): aborts the
  /// communicator; returns the cause kept.
  error fail(error cause);
  void abort_comm() noexcept;

  int rank_;
  int size_;
  int device_;
  std::chrono::milliseconds timeout_;
  ncclComm* comm_;  ///< null once aborted or destroyed
  CUstream_st* stream_;
  bool owns_stream_;
  std::optional<error> broken_;
};

}  // namespace mstar::parallel
