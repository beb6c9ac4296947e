#pragma once

// The pieces both kinds of deployment credential are made of: names and
// hosts checked, EC P-256 keys, X.509 certificates (a CA or a node's) and
// PEM files private to their owner. deployment_certs.cpp makes a deployment
// folder from them; secret_credentials.cpp a node's credential derived from
// a shared secret.

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>

#include "actors/deployment_certs.hpp"
#include "actors/internal/openssl_handles.hpp"

namespace mstar::actors::internal {

/// True for a node name usable as a subject and a file stem: 1-64 of
/// [A-Za-z0-9._-], not "ca".
[[nodiscard]] bool valid_node_name(const std::string& name);

/// `node`'s hosts as an OpenSSL subjectAltName value ("IP:..,DNS:.."); fails
/// on an empty list or a host with characters no name or address has.
[[nodiscard]] caf::expected<std::string> subject_alt_names(const node_identity& node);

/// A fresh EC P-256 key pair.
[[nodiscard]] caf::expected<pkey_ptr> make_key();

/// Serial and validity fixed by the caller instead of drawn at random and
/// counted from now: a certificate every holder of a secret makes alike.
struct fixed_fields {
  long serial = 1;
  std::time_t not_before = 0;
  std::time_t not_after = 0;
};

/// What to put in a certificate.
struct cert_spec {
  std::string common_name;
  std::string organization;  ///< empty: the subject has no O
  bool ca = false;
  std::string san;  ///< empty for the CA
  std::chrono::hours validity{24 * 365};
  std::optional<fixed_fields> fixed;  ///< unset: random serial, valid from now
};

/// Signs `key`'s public half with `issuer_key`; `issuer` null makes it
/// self-signed.
[[nodiscard]] caf::expected<x509_ptr> make_cert(const cert_spec& spec, EVP_PKEY* key, X509* issuer,
                                                EVP_PKEY* issuer_key);

/// Writes `cert` as PEM to a new file `path` (mode 0600; an existing file is
/// never followed or replaced).
[[nodiscard]] caf::error write_certificate(const std::filesystem::path& path, X509* cert);

/// Writes `key` as unencrypted PEM to a new file `path`, as write_certificate.
[[nodiscard]] caf::error write_private_key(const std::filesystem::path& path, EVP_PKEY* key);

}  // namespace mstar::actors::internal
