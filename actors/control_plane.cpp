#include "actors/control_plane.hpp"

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/scoped_actor.hpp>
#include <fmt/format.h>
#include <set>
#include <spdlog/spdlog.h>

#include "actors/internal/ssl_error_queue.hpp"
#include "actors/internal/tls_refusal_log.hpp"
#include "transport/error.hpp"

namespace mstar::actors {

namespace {

using transport::failure;

bool authenticated(const caf::actor_system& sys) {
  const auto& cfg = sys.config();
  return sys.has_openssl_manager() && !cfg.openssl_cafile.empty() &&
         !cfg.openssl_certificate.empty() && !cfg.openssl_key.empty();
}

}  // namespace

caf::error configure_node(caf::actor_system_config& cfg, const node_credentials& creds) {
  if (creds.ca_file.empty() || creds.certificate.empty() || creds.key.empty())
    return failure(errc::invalid_argument,
                   "node credentials: the CA file, certificate and key are all required");
  if (!internal::enable_tls_refusal_log() || !internal::tls_refusal_log_is_bound())
    return failure(errc::unsupported,
                   "control plane: cannot observe TLS handshakes (SSL_CTX_set_verify is not "
                   "interposed in this binary), so refusals would go unlogged");
  if (!internal::ssl_error_queue_guard_is_bound())
    return failure(errc::unsupported,
                   "control plane: SSL_read/SSL_write/SSL_connect/SSL_accept are not interposed "
                   "in this binary (internal/ssl_error_queue.hpp): one failed connection would "
                   "close healthy ones");
  cfg.load<caf::io::middleman>();
  cfg.load<caf::openssl::manager>();
  // Any of these set turns on CAF's authenticated mode: certificates are
  // required and verified on both ends, and anonymous ciphers are excluded.
  cfg.openssl_cafile = creds.ca_file.string();
  cfg.openssl_certificate = creds.certificate.string();
  cfg.openssl_key = creds.key.string();
  // Automatic connections open a second, plain-TCP BASP port.
  cfg.set("middleman.enable-automatic-connections", false);
  return {};
}

caf::expected<std::uint16_t> publish_node(caf::actor_system& sys, const caf::actor& whom,
                                          const std::string& host, std::uint16_t port) {
  if (host.empty())
    return failure(errc::invalid_argument,
                   "publish_node: host is empty (that would bind every interface)");
  if (!authenticated(sys))
    return failure(errc::invalid_argument,
                   "publish_node: the actor system has no node credential (configure_node)");
  if (!whom)
    return failure(errc::invalid_argument, "publish_node: invalid actor");
  auto bound = caf::openssl::publish(whom, port, host.c_str());
  if (!bound) {
    return transport::logged(
        failure(transport::errc::peer_failed,
                fmt::format("publish on {}:{}: {}", host, port, sys.render(bound.error()))));
  }
  spdlog::info("control plane: node actor published on {}:{} (mutual TLS)", host, *bound);
  return *bound;
}

caf::expected<caf::actor> connect_node(caf::actor_system& sys, const std::string& host,
                                       std::uint16_t port, std::chrono::milliseconds timeout) {
  if (!authenticated(sys))
    return failure(errc::invalid_argument,
                   "connect_node: the actor system has no node credential (configure_node)");
  // A fresh scoped actor per call, so an expired request leaves no stale
  // timeout in a mailbox that lives on.
  caf::scoped_actor self{sys};
  caf::expected<caf::actor> result{caf::error{}};
  self->request(sys.openssl_manager().actor_handle(), timeout, caf::connect_atom_v, host, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            if (ptr)
              result = caf::actor_cast<caf::actor>(std::move(ptr));
            else
              result =
                  failure(errc::not_found,
                          fmt::format("connect to {}:{}: no actor published there", host, port));
          },
          [&](caf::error& err) {
            if (err == caf::sec::request_timeout)
              result = failure(transport::errc::timed_out,
                               fmt::format("connect to {}:{}: no authenticated node answered "
                                           "within {} ms",
                                           host, port, timeout.count()));
            else
              result = failure(transport::errc::peer_failed,
                               fmt::format("connect to {}:{}: {} (refused TLS handshake or "
                                           "closed connection)",
                                           host, port, sys.render(err)));
          });
  if (!result)
    return transport::logged(std::move(result.error()));
  return result;
}

}  // namespace mstar::actors
