// derive_node_credentials (deployment_certs.hpp): mutual TLS whose CA key
// every holder of the deployment's shared secret derives alike.

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <unistd.h>
#include <utility>

#include "actors/deployment_certs.hpp"
#include "actors/internal/certificates.hpp"
#include "transport/error.hpp"

namespace mstar::actors {

namespace {

namespace fs = std::filesystem;
using namespace internal;
using transport::failure;

// Changing any of these changes every derived CA: a deployment's nodes must
// agree on them, so they are part of the format (hence the version).
constexpr std::string_view hkdf_info = "mstar deployment CA key v1: EC P-256";
// Serial 1, valid from 2024-01-01T00:00:00Z to 9999-12-31T23:59:59Z (RFC
// 5280's "no expiry"): the CA certificate's content is the same on every node.
constexpr fixed_fields ca_fields{1, 1704067200, 253402300799};
// A node's certificate lives as long as its process (a restart issues a new one).
constexpr std::chrono::hours node_validity{24 * 365 * 10};
// 48 bytes for a 32-byte order: the reduction's bias is below 2^-128 (FIPS
// 186-4 B.4.1, "extra random bits").
constexpr std::size_t scalar_seed_bytes = 48;

// The CA's CN is "mstar deployment <name> CA": at most 64 characters.
bool valid_deployment(std::string_view name) {
  if (name.empty() || name.size() > 44)
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

caf::error hkdf_sha256(std::string_view secret, std::string_view salt, unsigned char* out,
                       std::size_t size) {
  kdf_ptr kdf{EVP_KDF_fetch(nullptr, OSSL_KDF_NAME_HKDF, nullptr)};
  kdf_ctx_ptr ctx{kdf ? EVP_KDF_CTX_new(kdf.get()) : nullptr};
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(secret.data()),
                                        secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<char*>(salt.data()),
                                        salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(hkdf_info.data()),
                                        hkdf_info.size()),
      OSSL_PARAM_construct_end()};
  if (!ctx || EVP_KDF_derive(ctx.get(), out, size, params) != 1)
    return failure(errc::internal, "HKDF-SHA256: " + openssl_errors());
  return {};
}

// The scalar k = seed mod (n - 1) + 1, in [1, n-1], and its public point kG.
caf::expected<pkey_ptr> key_from_seed(const unsigned char* seed, std::size_t size) {
  ec_group_ptr group{EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1)};
  bn_ctx_ptr bn_ctx{BN_CTX_secure_new()};
  secret_bignum_ptr k{BN_secure_new()};
  bignum_ptr order_minus_1{BN_new()};
  ec_point_ptr point{group ? EC_POINT_new(group.get()) : nullptr};
  unsigned char pub[65];
  bool ok = group && bn_ctx && k && order_minus_1 && point &&
            BN_copy(order_minus_1.get(), EC_GROUP_get0_order(group.get())) != nullptr &&
            BN_sub_word(order_minus_1.get(), 1) == 1 &&
            BN_bin2bn(seed, static_cast<int>(size), k.get()) != nullptr &&
            BN_nnmod(k.get(), k.get(), order_minus_1.get(), bn_ctx.get()) == 1 &&
            BN_add_word(k.get(), 1) == 1 &&
            EC_POINT_mul(group.get(), point.get(), k.get(), nullptr, nullptr, bn_ctx.get()) == 1 &&
            EC_POINT_point2oct(group.get(), point.get(), POINT_CONVERSION_UNCOMPRESSED, pub,
                               sizeof(pub), bn_ctx.get()) == sizeof(pub);
  param_bld_ptr bld{ok ? OSSL_PARAM_BLD_new() : nullptr};
  ok = bld &&
       OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
       OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_PRIV_KEY, k.get()) &&
       OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, pub, sizeof(pub));
  params_ptr params{ok ? OSSL_PARAM_BLD_to_param(bld.get()) : nullptr};
  pkey_ctx_ptr ctx{params ? EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr) : nullptr};
  EVP_PKEY* key = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_KEYPAIR, params.get()) != 1)
    return failure(errc::internal, "deriving the deployment CA key: " + openssl_errors());
  return pkey_ptr{key};
}

caf::expected<pkey_ptr> derive_ca_key(std::string_view secret, std::string_view deployment) {
  unsigned char seed[scalar_seed_bytes];
  auto key = [&]() -> caf::expected<pkey_ptr> {
    if (auto err = hkdf_sha256(secret, deployment, seed, sizeof(seed)))
      return err;
    return key_from_seed(seed, sizeof(seed));
  }();
  OPENSSL_cleanse(seed, sizeof(seed));
  return key;
}

// A fresh folder, mode 0700 (mkdtemp's), under $XDG_RUNTIME_DIR (per user,
// in memory) when it is set, else the temporary directory.
caf::expected<fs::path> make_private_dir() {
  std::error_code ec;
  fs::path base;
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
      runtime != nullptr && fs::path{runtime}.is_absolute() && fs::is_directory(runtime, ec))
    base = runtime;
  else
    base = fs::temp_directory_path(ec);
  if (base.empty())
    return failure(errc::io_error,
                   "no temporary directory for the node credential: " + ec.message());
  std::string path = (base / "mstar-node-XXXXXX").string();
  if (::mkdtemp(path.data()) == nullptr)
    return failure(errc::io_error, fmt::format("{}: {}", path, std::strerror(errno)));
  return fs::path{path};
}

// The node's subjectAltName once the inputs are usable. Errors give the
// secret's length, never the secret.
caf::expected<std::string> check_inputs(std::string_view secret, std::string_view deployment,
                                        const node_identity& node) {
  if (secret.size() < min_secret_chars)
    return failure(errc::invalid_argument,
                   fmt::format("shared secret: {} characters, at least {} are required",
                               secret.size(), min_secret_chars));
  if (!valid_deployment(deployment))
    return failure(errc::invalid_argument,
                   fmt::format("deployment name '{}': use 1-44 of [A-Za-z0-9._-]", deployment));
  if (!valid_node_name(node.name))
    return failure(errc::invalid_argument,
                   fmt::format("node name '{}': use 1-64 of [A-Za-z0-9._-], not 'ca'", node.name));
  return subject_alt_names(node);
}

}  // namespace

derived_credentials::derived_credentials(fs::path dir, node_credentials creds) noexcept
    : dir_{std::move(dir)}, creds_{std::move(creds)} {}

derived_credentials::derived_credentials(derived_credentials&& other) noexcept
    : dir_{std::exchange(other.dir_, {})}, creds_{std::move(other.creds_)} {}

derived_credentials& derived_credentials::operator=(derived_credentials&& other) noexcept {
  if (this != &other) {
    remove();
    dir_ = std::exchange(other.dir_, {});
    creds_ = std::move(other.creds_);
  }
  return *this;
}

derived_credentials::~derived_credentials() {
  remove();
}

void derived_credentials::remove() noexcept {
  if (dir_.empty())
    return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
  dir_.clear();
}

caf::expected<derived_credentials> derive_node_credentials(std::string_view secret,
                                                           std::string_view deployment,
                                                           const node_identity& node) {
  auto san = check_inputs(secret, deployment, node);
  if (!san)
    return san.error();
  auto ca_key = derive_ca_key(secret, deployment);
  if (!ca_key)
    return ca_key.error();
  const std::string name{deployment};
  auto ca = make_cert({"mstar deployment " + name + " CA", "", true, "", {}, ca_fields},
                      ca_key->get(), nullptr, ca_key->get());
  if (!ca)
    return ca.error();
  auto key = make_key();
  if (!key)
    return key.error();
  auto cert = make_cert({node.name, "mstar deployment " + name, false, *san, node_validity, {}},
                        key->get(), ca->get(), ca_key->get());
  if (!cert)
    return cert.error();
  auto dir = make_private_dir();
  if (!dir)
    return dir.error();
  // Owned from here, so every failure below removes the folder.
  derived_credentials owned{*dir, {}};
  if (auto err = write_certificate(*dir / "ca.pem", ca->get()))
    return err;
  if (auto err = write_certificate(*dir / (node.name + ".pem"), cert->get()))
    return err;
  if (auto err = write_private_key(*dir / (node.name + "-key.pem"), key->get()))
    return err;
  // The checks tls mode makes on a folder it was given.
  auto creds = load_node_credentials(*dir, node.name);
  if (!creds)
    return creds.error();
  owned.creds_ = std::move(*creds);
  return owned;
}

}  // namespace mstar::actors
