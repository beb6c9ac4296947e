#include "actors/deployment_certs.hpp"

#include <arpa/inet.h>
#include <cstdio>
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/internal/openssl_handles.hpp"
#include "transport/error.hpp"

namespace mstar::actors {

namespace {

namespace fs = std::filesystem;
using namespace internal;
using transport::failure;

bool valid_name(const std::string& name) {
  if (name.empty() || name == "ca" || name.size() > 64)
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

bool is_ip(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
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

bool add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer, cert, nullptr, nullptr, 0);
  x509_ext_ptr ext{X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str())};
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

struct cert_spec {
  std::string common_name;
  std::string organization;
  bool ca = false;
  std::string san;  ///< empty for the CA
  std::chrono::hours validity;
};

// Signs `key`'s public half with `issuer_key`; `issuer` null makes it
// self-signed.
caf::expected<x509_ptr> make_cert(const cert_spec& spec, EVP_PKEY* key, X509* issuer,
                                  EVP_PKEY* issuer_key) {
  x509_ptr cert{X509_new()};
  bignum_ptr serial{BN_new()};
  bool ok = cert && serial && X509_set_version(cert.get(), 2) == 1 &&
            BN_rand(serial.get(), 64, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
            BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr &&
            X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(cert.get()),
                            std::chrono::seconds{spec.validity}.count()) != nullptr &&
            X509_set_pubkey(cert.get(), key) == 1;
  auto* name = X509_get_subject_name(cert.get());
  auto add_entry = [&](const char* field, const std::string& value) {
    return X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                      reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                      0) == 1;
  };
  ok = ok && add_entry("O", spec.organization) && add_entry("CN", spec.common_name);
  X509* signer = issuer ? issuer : cert.get();
  ok = ok && X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) == 1;
  if (spec.ca) {
    ok = ok && add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
         add_ext(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
         add_ext(cert.get(), signer, NID_subject_key_identifier, "hash");
  } else {
    ok = ok && add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
         add_ext(cert.get(), signer, NID_key_usage, "critical,digitalSignature") &&
         add_ext(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth") &&
         add_ext(cert.get(), signer, NID_subject_alt_name, spec.san) &&
         add_ext(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  }
  ok = ok && X509_sign(cert.get(), issuer_key, EVP_sha256()) > 0;
  if (!ok)
    return failure(errc::internal,
                   fmt::format("certificate for '{}': {}", spec.common_name, openssl_errors()));
  return cert;
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

caf::error write_pair(const fs::path& dir, const std::string& stem, X509* cert, EVP_PKEY* key) {
  if (auto err = write_private_file(dir / (stem + ".pem"),
                                    [&](FILE* f) { return PEM_write_X509(f, cert); }))
    return err;
  return write_private_file(dir / (stem + "-key.pem"), [&](FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

caf::error prepare_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return failure(errc::io_error, fmt::format("{}: {}", dir.string(), ec.message()));
  if (!fs::is_empty(dir, ec))
    return failure(errc::invalid_argument,
                   fmt::format("{}: not empty (a deployment's certificates are made once, into a "
                               "fresh folder)",
                               dir.string()));
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec)
    return failure(errc::io_error, fmt::format("{}: {}", dir.string(), ec.message()));
  return {};
}

std::string deployment_id() {
  unsigned char bytes[6];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1)
    return "unknown";
  return fmt::format("{:02x}", fmt::join(bytes, bytes + sizeof(bytes), ""));
}

template <class T, class Read>
caf::expected<T> read_pem(const fs::path& path, Read read) {
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr)
    return failure(errc::not_found, fmt::format("{}: {}", path.string(), std::strerror(errno)));
  T value{read(file)};
  std::fclose(file);
  if (!value)
    return failure(errc::parse_error, fmt::format("{}: not a PEM file of the expected kind: {}",
                                                  path.string(), openssl_errors()));
  return value;
}

caf::error verify_against(X509* ca, X509* cert, const fs::path& cert_path) {
  x509_store_ptr store{X509_STORE_new()};
  x509_store_ctx_ptr ctx{X509_STORE_CTX_new()};
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) != 1)
    return failure(errc::internal, "certificate store: " + openssl_errors());
  if (X509_verify_cert(ctx.get()) != 1)
    return failure(errc::invalid_argument,
                   fmt::format("{}: not issued by this deployment's CA: {}", cert_path.string(),
                               X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()))));
  return {};
}

}  // namespace

caf::error make_deployment_certs(const fs::path& dir, const std::vector<node_identity>& nodes,
                                 std::chrono::hours validity) {
  std::vector<std::string> sans;
  for (const auto& node : nodes) {
    if (!valid_name(node.name))
      return failure(
          errc::invalid_argument,
          fmt::format("node name '{}': use 1-64 of [A-Za-z0-9._-], not 'ca'", node.name));
    auto san = subject_alt_names(node);
    if (!san)
      return san.error();
    sans.push_back(std::move(*san));
  }
  if (auto err = prepare_dir(dir))
    return err;
  const auto organization = "mstar deployment " + deployment_id();
  auto ca_key = make_key();
  if (!ca_key)
    return ca_key.error();
  auto ca = make_cert({"mstar deployment CA", organization, true, "", validity}, ca_key->get(),
                      nullptr, ca_key->get());
  if (!ca)
    return ca.error();
  if (auto err = write_pair(dir, "ca", ca->get(), ca_key->get()))
    return err;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto key = make_key();
    if (!key)
      return key.error();
    auto cert = make_cert({nodes[i].name, organization, false, sans[i], validity}, key->get(),
                          ca->get(), ca_key->get());
    if (!cert)
      return cert.error();
    if (auto err = write_pair(dir, nodes[i].name, cert->get(), key->get()))
      return err;
  }
  return {};
}

caf::expected<node_credentials> load_node_credentials(const fs::path& dir,
                                                      const std::string& name) {
  if (!valid_name(name))
    return failure(errc::invalid_argument, fmt::format("node name '{}' is not valid", name));
  node_credentials creds{dir / "ca.pem", dir / (name + ".pem"), dir / (name + "-key.pem")};
  auto ca = read_pem<x509_ptr>(creds.ca_file,
                               [](FILE* f) { return PEM_read_X509(f, nullptr, nullptr, nullptr); });
  if (!ca)
    return ca.error();
  auto cert = read_pem<x509_ptr>(
      creds.certificate, [](FILE* f) { return PEM_read_X509(f, nullptr, nullptr, nullptr); });
  if (!cert)
    return cert.error();
  struct stat st {};
  if (::stat(creds.key.c_str(), &st) != 0)
    return failure(errc::not_found,
                   fmt::format("{}: {}", creds.key.string(), std::strerror(errno)));
  if ((st.st_mode & 077) != 0)
    return failure(errc::invalid_argument,
                   fmt::format("{}: mode {:o} lets group or others read the node's key; chmod 600",
                               creds.key.string(), st.st_mode & 0777));
  // An empty passphrase callback: an encrypted key fails instead of prompting.
  auto key = read_pem<pkey_ptr>(creds.key, [](FILE* f) {
    return PEM_read_PrivateKey(
        f, nullptr, [](char*, int, int, void*) { return 0; }, nullptr);
  });
  if (!key)
    return key.error();
  if (X509_check_private_key(cert->get(), key->get()) != 1)
    return failure(
        errc::invalid_argument,
        fmt::format("{} does not belong to {}", creds.key.string(), creds.certificate.string()));
  if (auto err = verify_against(ca->get(), cert->get(), creds.certificate))
    return err;
  return creds;
}

}  // namespace mstar::actors
