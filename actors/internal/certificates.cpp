#include "actors/internal/certificates.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/error.hpp"

namespace mstar::actors::internal {

namespace {

namespace fs = std::filesystem;
using transport::failure;

bool is_ip(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer, cert, nullptr, nullptr, 0);
  x509_ext_ptr ext{X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str())};
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

bool set_serial_and_validity(X509* cert, const cert_spec& spec) {
  if (spec.fixed) {
    return ASN1_INTEGER_set(X509_get_serialNumber(cert), spec.fixed->serial) == 1 &&
           ASN1_TIME_set(X509_getm_notBefore(cert), spec.fixed->not_before) != nullptr &&
           ASN1_TIME_set(X509_getm_notAfter(cert), spec.fixed->not_after) != nullptr;
  }
  bignum_ptr serial{BN_new()};
  return serial && BN_rand(serial.get(), 64, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
         BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert)) != nullptr &&
         X509_gmtime_adj(X509_getm_notBefore(cert), -300) != nullptr &&
         X509_gmtime_adj(X509_getm_notAfter(cert), std::chrono::seconds{spec.validity}.count()) !=
             nullptr;
}

bool set_subject(X509* cert, const cert_spec& spec) {
  auto* name = X509_get_subject_name(cert);
  auto add_entry = [&](const char* field, const std::string& value) {
    return X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                      reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                      0) == 1;
  };
  return (spec.organization.empty() || add_entry("O", spec.organization)) &&
         add_entry("CN", spec.common_name);
}

bool add_extensions(X509* cert, X509* signer, const cert_spec& spec) {
  if (spec.ca)
    return add_ext(cert, signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
           add_ext(cert, signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
           add_ext(cert, signer, NID_subject_key_identifier, "hash");
  return add_ext(cert, signer, NID_basic_constraints, "critical,CA:FALSE") &&
         add_ext(cert, signer, NID_key_usage, "critical,digitalSignature") &&
         add_ext(cert, signer, NID_ext_key_usage, "serverAuth,clientAuth") &&
         add_ext(cert, signer, NID_subject_alt_name, spec.san) &&
         add_ext(cert, signer, NID_authority_key_identifier, "keyid:always");
}

// Creates `path` with mode 0600 (never follows or replaces an existing file)
// and lets `write` fill it.
template <class Write>
caf::error write_private_file(const fs::path& path, Write write) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return failure(errc::io_error, fmt::format("{}: {}", path.string(), std::strerror(errno)));
  FILE* file = ::fdopen(fd, "w");
  if (file == nullptr) {
    ::close(fd);
    return failure(errc::io_error, fmt::format("{}: {}", path.string(), std::strerror(errno)));
  }
  bool ok = ::fchmod(fd, 0600) == 0 && write(file) == 1;
  ok = (std::fclose(file) == 0) && ok;
  if (!ok)
    return failure(errc::io_error,
                   fmt::format("{}: writing PEM: {}", path.string(), openssl_errors()));
  return {};
}

}  // namespace

bool valid_node_name(const std::string& name) {
  if (name.empty() || name == "ca" || name.size() > 64)
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

// Hosts go into an OpenSSL config string: only characters of names and
// addresses, so a host cannot add SAN entries of its own.
caf::expected<std::string> subject_alt_names(const node_identity& node) {
  std::string san;
  for (const auto& host : node.hosts) {
    bool ok = !host.empty() && host.size() <= 253;
    for (char c : host)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':');
    if (!ok)
      return failure(
          errc::invalid_argument,
          fmt::format("node '{}': host '{}' is not a DNS name or IP address", node.name, host));
    san += fmt::format("{}{}:{}", san.empty() ? "" : ",", is_ip(host) ? "IP" : "DNS", host);
  }
  if (san.empty())
    return failure(
        errc::invalid_argument,
        fmt::format("node '{}': needs at least one host for its certificate", node.name));
  return san;
}

caf::expected<pkey_ptr> make_key() {
  pkey_ptr key{EVP_EC_gen("P-256")};
  if (!key)
    return failure(errc::internal, "EC P-256 key generation: " + openssl_errors());
  return key;
}

caf::expected<x509_ptr> make_cert(const cert_spec& spec, EVP_PKEY* key, X509* issuer,
                                  EVP_PKEY* issuer_key) {
  x509_ptr cert{X509_new()};
  bool ok = cert && X509_set_version(cert.get(), 2) == 1 &&
            set_serial_and_validity(cert.get(), spec) && X509_set_pubkey(cert.get(), key) == 1 &&
            set_subject(cert.get(), spec);
  X509* signer = issuer ? issuer : cert.get();
  ok = ok && X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) == 1 &&
       add_extensions(cert.get(), signer, spec) &&
       X509_sign(cert.get(), issuer_key, EVP_sha256()) > 0;
  if (!ok)
    return failure(errc::internal,
                   fmt::format("certificate for '{}': {}", spec.common_name, openssl_errors()));
  return cert;
}

caf::error write_certificate(const fs::path& path, X509* cert) {
  return write_private_file(path, [&](FILE* f) { return PEM_write_X509(f, cert); });
}

caf::error write_private_key(const fs::path& path, EVP_PKEY* key) {
  return write_private_file(path, [&](FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

}  // namespace mstar::actors::internal
