#include <ucp/api/ucp.h>

#include "transport/ucx.hpp"

namespace mstar::transport {

namespace {

// Owner of a ucp_config_t, for the few lines between read and init.
struct config_deleter {
  void operator()(ucp_config_t* config) const noexcept { ucp_config_release(config); }
};
using config_ptr = std::unique_ptr<ucp_config_t, config_deleter>;

// Owner of an address from ucp_worker_get_address.
struct address_deleter {
  ucp_worker_h worker;
  void operator()(ucp_address_t* address) const noexcept {
    ucp_worker_release_address(worker, address);
  }
};

}  // namespace

caf::expected<std::shared_ptr<context>> context::make(const context_options& options) {
  ucp_config_t* raw_config = nullptr;
  if (const auto status = ucp_config_read(nullptr, nullptr, &raw_config); status != UCS_OK)
    return ucx_error(status, "ucp_config_read");
  const config_ptr config{raw_config};
  for (const auto& [name, value] : options.config) {
    if (const auto status = ucp_config_modify(config.get(), name.c_str(), value.c_str());
        status != UCS_OK) {
      return ucx_error(status, "UCX setting " + name + "=" + value);
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | (options.wakeup ? UCP_FEATURE_WAKEUP : 0);
  params.mt_workers_shared = 1;  // registrations may happen beside a progress thread
  ucp_context_h handle = nullptr;
  if (const auto status = ucp_init(&params, config.get(), &handle); status != UCS_OK)
    return ucx_error(status, "ucp_init");
  return std::shared_ptr<context>{new context{handle, options.wakeup}};
}

context::~context() {
  ucp_cleanup(handle_);
}

caf::expected<std::shared_ptr<worker>> worker::make(std::shared_ptr<context> ctx) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h handle = nullptr;
  if (const auto status = ucp_worker_create(ctx->native(), &params, &handle); status != UCS_OK)
    return ucx_error(status, "ucp_worker_create");
  int fd = -1;
  if (ctx->has_wakeup() && ucp_worker_get_efd(handle, &fd) != UCS_OK)
    fd = -1;  // some transport cannot wake us: the progress thread spins instead
  return std::shared_ptr<worker>{new worker{std::move(ctx), handle, fd}};
}

worker::~worker() {
  ucp_worker_destroy(handle_);
}

caf::expected<byte_buffer> worker::address() const {
  ucp_address_t* raw = nullptr;
  std::size_t length = 0;
  if (const auto status = ucp_worker_get_address(handle_, &raw, &length); status != UCS_OK)
    return ucx_error(status, "ucp_worker_get_address");
  const std::unique_ptr<ucp_address_t, address_deleter> address{raw, address_deleter{handle_}};
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(address.get());
  return byte_buffer(bytes, bytes + length);
}

unsigned worker::progress() noexcept {
  return ucp_worker_progress(handle_);
}

bool worker::arm() noexcept {
  return event_fd_ >= 0 && ucp_worker_arm(handle_) == UCS_OK;
}

void worker::signal() noexcept {
  if (event_fd_ >= 0)
    static_cast<void>(ucp_worker_signal(handle_));
}

caf::expected<request> request::adopt(void* status_ptr, std::string_view what) {
  if (status_ptr == nullptr)
    return request{};
  if (UCS_PTR_IS_ERR(status_ptr))
    return ucx_error(UCS_PTR_STATUS(status_ptr), what);
  return request{status_ptr};
}

request& request::operator=(request&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr)
      ucp_request_free(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
  }
  return *this;
}

request::~request() {
  if (ptr_ != nullptr)
    ucp_request_free(ptr_);
}

ucs_status_t request::status() const noexcept {
  return ptr_ == nullptr ? UCS_OK : ucp_request_check_status(ptr_);
}

}  // namespace mstar::transport
