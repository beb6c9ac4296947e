// The device arena: cudaMalloc'd storage, page-op kernels on a borrowed
// stream, a sticky first error, an event after the last launch (what
// `synchronize` waits for, from any thread).
#include "kernels/cuda/device_arena.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/cuda/page_ops.hpp"
#include "kernels/cuda/runtime.hpp"

namespace mstar::kernels::cuda {
namespace {

class device_memory_arena final : public arena {
 public:
  device_memory_arena(device_buffer memory, cudaStream_t stream, int device, event done)
      : memory_(std::move(memory)), stream_(stream), device_(device), done_(std::move(done)) {}

  ~device_memory_arena() override {
    // Queued kernels may still read the list buffer or write the block.
    (void)cudaSetDevice(device_);
    (void)cudaStreamSynchronize(stream_);
  }

  [[nodiscard]] memory_kind kind() const noexcept override { return memory_kind::device; }
  [[nodiscard]] std::byte* data() noexcept override { return memory_.as<std::byte>(); }
  [[nodiscard]] const std::byte* data() const noexcept override { return memory_.as<std::byte>(); }
  [[nodiscard]] std::size_t size() const noexcept override { return memory_.size(); }

  void copy_pages(const kv_geometry& geometry, std::span<const std::int32_t> src,
                  std::span<const std::int32_t> dst) override {
    const std::size_t n = std::min(src.size(), dst.size());
    if (n == 0 || !ready())
      return;
    // The kernel copies without staging: a destination that is another
    // entry's source must wait for that read, so such lists go through
    // staging (the host arena's rule: sources are read first).
    const std::unordered_set<std::int32_t> sources(src.begin(), src.begin() + static_cast<long>(n));
    bool overlap = false;
    for (std::size_t i = 0; i < n && !overlap; ++i)
      overlap = dst[i] != src[i] && sources.contains(dst[i]);
    auto lists = upload({src.first(n), dst.first(n)});
    if (!lists)
      return;
    const std::span<const std::int32_t> s{*lists, n}, d{*lists + n, n};
    if (!overlap) {
      enqueued(cuda::copy_pages(data(), geometry, s, d, stream_), "copy_pages");
      return;
    }
    if (!reserve(staging_, n * geometry.page_bytes(), "copy_pages staging"))
      return;
    enqueued(cuda::copy_pages(data(), geometry, s, d, staging_.as<std::byte>(), stream_),
             "copy_pages");
  }
  void copy_slots(const kv_geometry& geometry, std::int32_t src, std::int32_t dst,
                  std::size_t slots) override {
    if (ready())
      enqueued(cuda::copy_slots(data(), geometry, src, dst, slots, stream_), "copy_slots");
  }
  void zero_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages) override {
    if (auto lists = pages.empty() || !ready() ? std::nullopt : upload({pages}); lists) {
      enqueued(cuda::zero_pages(data(), geometry, {*lists, pages.size()}, stream_), "zero_pages");
    }
  }
  void pack_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages,
                  std::byte* staging) override {
    if (auto lists = pages.empty() || !ready() ? std::nullopt : upload({pages}); lists) {
      enqueued(cuda::pack_pages(data(), geometry, {*lists, pages.size()}, staging, stream_),
               "pack_pages");
    }
  }
  void unpack_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages,
                    const std::byte* staging) override {
    if (auto lists = pages.empty() || !ready() ? std::nullopt : upload({pages}); lists) {
      enqueued(cuda::unpack_pages(data(), geometry, {*lists, pages.size()}, staging, stream_),
               "unpack_pages");
    }
  }

  void copy_slot(const slot_block& b, std::int32_t src, std::int32_t dst) override {
    if (src != dst && ready()) {
      enqueued(cuda::copy_slot(data() + b.offset, b.num_layers, b.max_slots, b.slot_bytes, src, dst,
                               stream_),
               "copy_slot");
    }
  }
  void zero_slot(const slot_block& b, std::int32_t slot) override {
    if (ready()) {
      enqueued(cuda::zero_slot(data() + b.offset, b.num_layers, b.max_slots, b.slot_bytes, slot,
                               stream_),
               "zero_slot");
    }
  }
  void pack_slot(const slot_block& b, std::int32_t slot, std::byte* staging) override {
    if (ready()) {
      enqueued(cuda::pack_slot(data() + b.offset, b.num_layers, b.max_slots, b.slot_bytes, slot,
                               staging, stream_),
               "pack_slot");
    }
  }
  void unpack_slot(const slot_block& b, std::int32_t slot, const std::byte* staging) override {
    if (ready()) {
      enqueued(cuda::unpack_slot(data() + b.offset, b.num_layers, b.max_slots, b.slot_bytes, slot,
                                 staging, stream_),
               "unpack_slot");
    }
  }

  [[nodiscard]] result<void> read(std::size_t offset, std::span<std::byte> out) const override {
    if (auto ok = in_bounds(offset, out.size()); !ok)
      return ok;
    if (out.empty())
      return status();
    if (auto ok = check(cudaSetDevice(device_), "device arena read"); !ok)
      return ok;
    if (auto ok = check(cudaMemcpyAsync(out.data(), data() + offset, out.size(),
                                        cudaMemcpyDeviceToHost, stream_),
                        "device arena read");
        !ok)
      return ok;
    if (auto ok = check(cudaStreamSynchronize(stream_), "device arena read"); !ok)
      return ok;
    return status();
  }
  [[nodiscard]] result<void> write(std::size_t offset, std::span<const std::byte> in) override {
    if (auto ok = in_bounds(offset, in.size()); !ok)
      return ok;
    if (in.empty())
      return status();
    if (auto ok = check(cudaSetDevice(device_), "device arena write"); !ok)
      return ok;
    if (auto ok = check(
            cudaMemcpyAsync(data() + offset, in.data(), in.size(), cudaMemcpyHostToDevice, stream_),
            "device arena write");
        !ok)
      return ok;
    // `in` may be pinned memory, which the copy reads until it completes.
    if (auto ok = check(cudaStreamSynchronize(stream_), "device arena write"); !ok)
      return ok;
    return status();
  }
  [[nodiscard]] result<void> status() const override {
    const std::lock_guard lock{error_mutex_};
    if (first_error_)
      return *first_error_;
    return {};
  }
  // From any thread: the transfer actor settles a decode node's pools (freed
  // pages are zeroed on the model's stream) before copying into them. It
  // waits for the event recorded after this arena's last launch, never on
  // the stream itself, where the pool's thread may be capturing a decode
  // graph (a wait on a capturing stream ends the capture with an error).
  [[nodiscard]] result<void> synchronize() override {
    if (auto ok = check(cudaSetDevice(device_), "device arena synchronize"); !ok)
      return ok;
    if (auto ok = done_.synchronize(); !ok)
      return ok.error().with_context("device arena synchronize");
    return status();
  }

 private:
  [[nodiscard]] bool failed() const {
    const std::lock_guard lock{error_mutex_};
    return first_error_.has_value();
  }
  // Before an operation: no error so far, and the arena's device current.
  // The pools call from whichever thread owns them (a pool actor's), where
  // another device, or none, may be current.
  [[nodiscard]] bool ready() {
    if (failed())
      return false;
    note(cudaSetDevice(device_), "cudaSetDevice");
    return !failed();
  }
  void note(cudaError_t err, const char* what) {
    if (err == cudaSuccess)
      return;
    const std::lock_guard lock{error_mutex_};
    if (!first_error_)
      first_error_ = cuda_error(err, std::string{"device arena "} + what);
  }
  // A launch on the stream, then the event `synchronize` waits for.
  void enqueued(cudaError_t err, const char* what) {
    note(err, what);
    if (err == cudaSuccess)
      note(cudaEventRecord(done_.get(), stream_), what);
  }
  void keep_first(const mstar::error& e) {
    const std::lock_guard lock{error_mutex_};
    if (!first_error_)
      first_error_ = e;
  }
  [[nodiscard]] result<void> in_bounds(std::size_t offset, std::size_t n) const {
    return check_range("device arena", size(), offset, n);
  }
  // Grows `buffer` to at least `bytes`, after the queued work that may use it.
  [[nodiscard]] bool reserve(device_buffer& buffer, std::size_t bytes, const char* what) {
    if (buffer.size() >= bytes)
      return true;
    note(cudaStreamSynchronize(stream_), what);
    auto grown = device_buffer::make(std::max(bytes, 2 * buffer.size()));
    if (!grown) {
      keep_first(grown.error().with_context(std::string{"device arena "} + what));
      return false;
    }
    buffer = std::move(*grown);
    return !failed();
  }
  // The host lists, one after another, in the device list buffer (ordered
  // on the stream after the work that read the previous lists).
  [[nodiscard]] std::optional<const std::int32_t*> upload(
      std::initializer_list<std::span<const std::int32_t>> lists) {
    std::size_t total = 0;
    for (const auto& l : lists)
      total += l.size();
    host_lists_.clear();
    host_lists_.reserve(total);
    for (const auto& l : lists)
      host_lists_.insert(host_lists_.end(), l.begin(), l.end());
    if (!reserve(lists_, total * sizeof(std::int32_t), "page list"))
      return std::nullopt;
    note(cudaMemcpyAsync(lists_.data(), host_lists_.data(), total * sizeof(std::int32_t),
                         cudaMemcpyHostToDevice, stream_),
         "page list upload");
    if (failed())
      return std::nullopt;
    return lists_.as<const std::int32_t>();
  }

  device_buffer memory_;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
  device_buffer lists_;
  device_buffer staging_;
  std::vector<std::int32_t> host_lists_;
  event done_;  // recorded after each launch
  // Written by the pool's thread, read by `synchronize`'s (any).
  mutable std::mutex error_mutex_;
  std::optional<mstar::error> first_error_;
};

}  // namespace

result<std::unique_ptr<arena>> make_device_arena(std::size_t bytes, cudaStream_t stream) {
  int device = 0;
  if (auto ok = check(cudaGetDevice(&device), "device arena"); !ok)
    return ok.error();
  auto memory = device_buffer::make(bytes);
  if (!memory)
    return memory.error().with_context("device arena of " + std::to_string(bytes) + " bytes");
  if (bytes > 0) {
    if (auto ok = check(cudaMemsetAsync(memory->data(), 0, bytes, stream), "device arena zero");
        !ok)
      return ok.error();
    if (auto ok = check(cudaStreamSynchronize(stream), "device arena zero"); !ok)
      return ok.error();
  }
  auto done = event::make(/*timing=*/false);
  if (!done)
    return done.error().with_context("device arena");
  return std::unique_ptr<arena>(
      std::make_unique<device_memory_arena>(std::move(*memory), stream, device, std::move(*done)));
}

arena_factory device_arena_factory(cudaStream_t stream) {
  return [stream](std::size_t bytes) { return make_device_arena(bytes, stream); };
}

arena_factory device_arena_factory(cudaStream_t stream, int device) {
  return [stream, device](std::size_t bytes) -> result<std::unique_ptr<arena>> {
    if (auto ok = check(cudaSetDevice(device), "device arena"); !ok)
      return ok.error();
    return make_device_arena(bytes, stream);
  };
}

}  // namespace mstar::kernels::cuda
