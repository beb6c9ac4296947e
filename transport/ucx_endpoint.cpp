#include <cstring>
#include <spdlog/spdlog.h>
#include <ucp/api/ucp.h>

#include "transport/ucx.hpp"

namespace mstar::transport {

namespace {

// How long a destructor lets a graceful close flush before forcing it.
constexpr auto close_grace = std::chrono::milliseconds{1000};
// A forced close completes at once in practice; this bounds it regardless.
constexpr auto force_grace = std::chrono::milliseconds{200};

// Progresses `w` until `req` leaves UCS_INPROGRESS or `deadline` passes.
bool progress_until_done(worker& w, const request& req, clock::time_point deadline) {
  while (req.status() == UCS_INPROGRESS) {
    if (clock::now() > deadline)
      return false;
    w.progress();
  }
  return true;
}

struct rkey_buffer_deleter {
  void operator()(void* buffer) const noexcept { ucp_rkey_buffer_release(buffer); }
};

}  // namespace

caf::expected<std::shared_ptr<endpoint>> endpoint::make(
    std::shared_ptr<worker> w, std::span<const std::uint8_t> remote_address, std::string peer,
    bool detect_peer_failure) {
  if (remote_address.empty())
    return failure(mstar::errc::invalid_argument, "endpoint to '" + peer + "': empty address");
  std::shared_ptr<endpoint> ep{new endpoint{std::move(w), std::move(peer)}};
  ucs_status_t status = ep->create(remote_address, detect_peer_failure);
  if (status == UCS_ERR_UNREACHABLE && detect_peer_failure) {
    spdlog::info("transport: no transport to '{}' reports peer failure; deadlines will", ep->peer_);
    status = ep->create(remote_address, false);
  }
  if (status != UCS_OK)
    return ucx_error(status, "ucp_ep_create to '" + ep->peer_ + "'");
  return ep;
}

ucs_status_t endpoint::create(std::span<const std::uint8_t> remote_address,
                              bool peer_errors) noexcept {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(remote_address.data());
  params.err_mode = peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &endpoint::on_error;
  params.err_handler.arg = this;
  handle_ = nullptr;
  const ucs_status_t status = ucp_ep_create(worker_->native(), &params, &handle_);
  if (status != UCS_OK)
    handle_ = nullptr;
  detects_peer_failure_ = peer_errors;
  return status;
}

endpoint::~endpoint() {
  close(clock::now() + close_grace);
}

void endpoint::on_error(void* self, ucp_ep_h, ucs_status_t status) noexcept {
  auto* ep = static_cast<endpoint*>(self);
  int expected = 0;
  // The first status wins; it is what every later operation reports.
  ep->failure_status_.compare_exchange_strong(expected, static_cast<int>(status));
}

caf::error endpoint::error() const {
  const int status = failure_status_.load();
  if (status == 0)
    return {};
  // Whatever the status (reset, unreachable, keepalive timeout), a failed
  // endpoint means the peer is gone or cut off.
  return logged(failure(errc::peer_failed,
                        "endpoint to '" + peer_ +
                            "' failed: " + ucs_status_string(static_cast<ucs_status_t>(status))));
}

void endpoint::release_keys() noexcept {
  for (remote_key* key : keys_)
    key->release();
  keys_.clear();
}

void endpoint::close(clock::time_point deadline) noexcept {
  if (handle_ == nullptr)
    return;
  release_keys();
  if (failed()) {
    force_close();
    return;
  }
  ucp_request_param_t param{};
  auto closing = request::adopt(ucp_ep_close_nbx(handle_, &param), "ucp_ep_close_nbx");
  handle_ = nullptr;
  if (closing)
    progress_until_done(*worker_, *closing, deadline);
  // A close still pending at the deadline is released to UCX; the worker's
  // destruction reclaims the endpoint.
}

void endpoint::force_close() noexcept {
  if (handle_ == nullptr)
    return;
  release_keys();
  // UCX forbids a forced close without peer error handling; there a flush
  // close is started instead and abandoned after the grace period (its
  // operations stay with UCX until the worker is destroyed).
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = detects_peer_failure_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  auto closing = request::adopt(ucp_ep_close_nbx(handle_, &param), "ucp_ep_close_nbx(force)");
  handle_ = nullptr;
  if (closing)
    progress_until_done(*worker_, *closing, clock::now() + force_grace);
}

caf::expected<std::unique_ptr<memory_region>> memory_region::make(std::shared_ptr<context> ctx,
                                                                  void* base, std::size_t bytes,
                                                                  memory_kind kind) {
  if (base == nullptr || bytes == 0)
    return failure(mstar::errc::invalid_argument, "memory registration: empty region");
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = base;
  params.length = bytes;
  params.memory_type = kind == memory_kind::cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  ucp_mem_h handle = nullptr;
  if (const auto status = ucp_mem_map(ctx->native(), &params, &handle); status != UCS_OK)
    return ucx_error(status, "ucp_mem_map of " + std::to_string(bytes) + " bytes");
  return std::unique_ptr<memory_region>{
      new memory_region{std::move(ctx), handle, static_cast<std::byte*>(base)}};
}

caf::expected<std::unique_ptr<memory_region>> memory_region::allocate(std::shared_ptr<context> ctx,
                                                                      std::size_t bytes) {
  if (bytes == 0)
    return failure(mstar::errc::invalid_argument, "memory allocation: zero bytes");
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = bytes;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h handle = nullptr;
  if (const auto status = ucp_mem_map(ctx->native(), &params, &handle); status != UCS_OK)
    return ucx_error(status, "ucp_mem_map(allocate) of " + std::to_string(bytes) + " bytes");
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  if (const auto status = ucp_mem_query(handle, &attr); status != UCS_OK) {
    ucp_mem_unmap(ctx->native(), handle);
    return ucx_error(status, "ucp_mem_query");
  }
  auto* base = static_cast<std::byte*>(attr.address);
  std::memset(base, 0, bytes);  // zeroed like every arena, and faulted in now
  return std::unique_ptr<memory_region>{new memory_region{std::move(ctx), handle, base}};
}

memory_region::~memory_region() {
  ucp_mem_unmap(context_->native(), handle_);
}

caf::expected<byte_buffer> memory_region::packed_key() const {
  void* raw = nullptr;
  std::size_t length = 0;
  if (const auto status = ucp_rkey_pack(context_->native(), handle_, &raw, &length);
      status != UCS_OK) {
    return ucx_error(status, "ucp_rkey_pack");
  }
  const std::unique_ptr<void, rkey_buffer_deleter> buffer{raw};
  const auto* bytes = static_cast<const std::uint8_t*>(buffer.get());
  return byte_buffer(bytes, bytes + length);
}

caf::expected<std::unique_ptr<remote_key>> remote_key::make(std::shared_ptr<endpoint> ep,
                                                            std::span<const std::uint8_t> packed) {
  if (ep->closed())
    return failure(errc::closed, "remote key for '" + ep->peer() + "': endpoint closed");
  if (packed.empty())
    return failure(mstar::errc::invalid_argument, "remote key for '" + ep->peer() + "': empty");
  ucp_rkey_h handle = nullptr;
  if (const auto status = ucp_ep_rkey_unpack(ep->native(), packed.data(), &handle);
      status != UCS_OK) {
    return ucx_error(status, "ucp_ep_rkey_unpack for '" + ep->peer() + "'");
  }
  std::unique_ptr<remote_key> key{new remote_key{ep, handle}};
  ep->keys_.push_back(key.get());
  return key;
}

void remote_key::release() noexcept {
  if (handle_ != nullptr)
    ucp_rkey_destroy(std::exchange(handle_, nullptr));
}

remote_key::~remote_key() {
  if (handle_ == nullptr)
    return;  // the endpoint's close released it and forgot this key
  release();
  std::erase(endpoint_->keys_, this);
}

}  // namespace mstar::transport
