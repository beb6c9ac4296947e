#include "actors/deployment_certs.hpp"

#include <cstdio>
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/internal/certificates.hpp"
#include "transport/error.hpp"

namespace mstar::actors {

namespace {

namespace fs = std::filesystem;
using namespace internal;
using transport::failure;

caf::error write_pair(const fs::path& dir, const std::string& stem, X509* cert, EVP_PKEY* key) {
  if (auto err = write_certificate(dir / (stem + ".pem"), cert))
    return err;
  return write_private_key(dir / (stem + "-key.pem"), key);
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
    if (!valid_node_name(node.name))
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
  auto ca = make_cert({"mstar deployment CA", organization, true, "", validity, {}}, ca_key->get(),
                      nullptr, ca_key->get());
  if (!ca)
    return ca.error();
  if (auto err = write_pair(dir, "ca", ca->get(), ca_key->get()))
    return err;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto key = make_key();
    if (!key)
      return key.error();
    auto cert = make_cert({nodes[i].name, organization, false, sans[i], validity, {}}, key->get(),
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
  if (!valid_node_name(name))
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
