#include "actors/deployment_certs.hpp"

#include <algorithm>
#include <caf/sec.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/internal/openssl_handles.hpp"
#include "launcher/deploy/credentials.hpp"
#include "transport/error.hpp"

namespace mstar::actors {
namespace {

namespace fs = std::filesystem;
using internal::x509_ptr;

static_assert(min_secret_chars == deploy::min_secret_chars,
              "the deployment file and the control plane must agree on a secret's length");

class deployment_certs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("mstar-certs-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    ASSERT_FALSE(make_deployment_certs(
        root_ / "ours", {{"prefill-0", {"127.0.0.1", "node-a.local"}}, {"decode-0", {"::1"}}}));
  }
  void TearDown() override { fs::remove_all(root_); }

  static unsigned mode_of(const fs::path& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 0777;
  }

  fs::path root_;
};

TEST_F(deployment_certs, writes_every_file_readable_by_its_owner_only) {
  EXPECT_EQ(mode_of(root_ / "ours"), 0700u);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(root_ / "ours")) {
    EXPECT_EQ(mode_of(entry.path()), 0600u) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 6);  // the CA's pair and two nodes' pairs
}

TEST_F(deployment_certs, node_certificate_names_its_hosts_and_verifies_against_its_ca) {
  auto creds = load_node_credentials(root_ / "ours", "prefill-0");
  ASSERT_TRUE(creds) << caf::to_string(creds.error());
  FILE* file = std::fopen(creds->certificate.c_str(), "r");
  ASSERT_NE(file, nullptr);
  X509* cert = PEM_read_X509(file, nullptr, nullptr, nullptr);
  std::fclose(file);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_ip_asc(cert, "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_host(cert, "node-a.local", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(cert, "10.0.0.1", 0), 0);
  EXPECT_EQ(X509_check_purpose(cert, X509_PURPOSE_SSL_CLIENT, 0), 1);
  EXPECT_EQ(X509_check_purpose(cert, X509_PURPOSE_SSL_SERVER, 0), 1);
  X509_free(cert);
  EXPECT_TRUE(load_node_credentials(root_ / "ours", "decode-0"));
}

TEST_F(deployment_certs, refuses_a_certificate_of_another_deployment) {
  ASSERT_FALSE(make_deployment_certs(root_ / "theirs", {{"prefill-0", {"127.0.0.1"}}}));
  fs::create_directory(root_ / "mixed");
  fs::copy_file(root_ / "ours" / "ca.pem", root_ / "mixed" / "ca.pem");
  fs::copy_file(root_ / "theirs" / "prefill-0.pem", root_ / "mixed" / "prefill-0.pem");
  fs::copy_file(root_ / "theirs" / "prefill-0-key.pem", root_ / "mixed" / "prefill-0-key.pem");
  auto creds = load_node_credentials(root_ / "mixed", "prefill-0");
  ASSERT_FALSE(creds);
  EXPECT_TRUE(transport::is(creds.error(), errc::invalid_argument))
      << transport::describe(creds.error());
  EXPECT_NE(transport::message_of(creds.error()).find("not issued by this deployment's CA"),
            std::string::npos);
}

TEST_F(deployment_certs, refuses_a_key_that_group_or_others_can_read) {
  fs::permissions(root_ / "ours" / "decode-0-key.pem", fs::perms::others_read,
                  fs::perm_options::add);
  auto creds = load_node_credentials(root_ / "ours", "decode-0");
  ASSERT_FALSE(creds);
  EXPECT_NE(transport::message_of(creds.error()).find("chmod 600"), std::string::npos);
}

TEST_F(deployment_certs, refuses_bad_names_hosts_and_a_used_folder) {
  EXPECT_TRUE(make_deployment_certs(root_ / "ours", {{"x", {"127.0.0.1"}}}));  // not empty
  EXPECT_TRUE(make_deployment_certs(root_ / "a", {{"../x", {"127.0.0.1"}}}));
  EXPECT_TRUE(make_deployment_certs(root_ / "b", {{"x", {"h,DNS:evil"}}}));
  EXPECT_TRUE(make_deployment_certs(root_ / "c", {{"x", {}}}));
  EXPECT_FALSE(load_node_credentials(root_ / "ours", "missing"));
}

constexpr const char* secret = "correct horse battery staple";
constexpr const char* other_secret = "incorrect horse battery staple";

x509_ptr read_cert(const fs::path& path) {
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr)
    return nullptr;
  x509_ptr cert{PEM_read_X509(file, nullptr, nullptr, nullptr)};
  std::fclose(file);
  return cert;
}

derived_credentials derive(const char* s, const char* deployment, const std::string& node) {
  auto derived = derive_node_credentials(s, deployment, {node, {"127.0.0.1"}});
  EXPECT_TRUE(derived) << transport::describe(derived.error());
  if (!derived)
    std::abort();
  return std::move(*derived);
}

bool verifies(X509* cert, X509* ca) {
  internal::x509_store_ptr store{X509_STORE_new()};
  internal::x509_store_ctx_ptr ctx{X509_STORE_CTX_new()};
  return X509_STORE_add_cert(store.get(), ca) == 1 &&
         X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) == 1 &&
         X509_verify_cert(ctx.get()) == 1;
}

TEST(derived_credentials, same_secret_and_deployment_derive_the_same_ca) {
  const auto a = derive(secret, "pd-local", "prefill-0");
  const auto b = derive(secret, "pd-local", "decode-0");
  const auto ca_a = read_cert(a.credentials().ca_file);
  const auto ca_b = read_cert(b.credentials().ca_file);
  ASSERT_TRUE(ca_a && ca_b);
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(ca_a.get()), X509_get0_pubkey(ca_b.get())), 1);
  EXPECT_EQ(X509_NAME_cmp(X509_get_subject_name(ca_a.get()), X509_get_subject_name(ca_b.get())), 0);
  char subject[128];
  X509_NAME_oneline(X509_get_subject_name(ca_a.get()), subject, sizeof(subject));
  EXPECT_STREQ(subject, "/CN=mstar deployment pd-local CA");
  EXPECT_EQ(
      ASN1_INTEGER_cmp(X509_get0_serialNumber(ca_a.get()), X509_get0_serialNumber(ca_b.get())), 0);
}

// The derivation is a format every node of a deployment must share: pinned
// to a value computed independently (Python's cryptography: HKDF-SHA256 with
// the deployment as salt, 48 bytes, k = seed mod (n-1) + 1, kG uncompressed).
TEST(derived_credentials, ca_key_matches_an_independent_computation) {
  const auto ca = read_cert(derive(secret, "pd-local", "n").credentials().ca_file);
  ASSERT_TRUE(ca);
  unsigned char point[65];
  std::size_t size = 0;
  ASSERT_EQ(EVP_PKEY_get_octet_string_param(X509_get0_pubkey(ca.get()), "pub", point, sizeof(point),
                                            &size),
            1);
  std::string hex;
  for (std::size_t i = 0; i < size; ++i)
    hex += fmt::format("{:02x}", point[i]);
  EXPECT_EQ(hex,
            "04262645e5f9fb89f62484a77d59e3f163836564e8f6a28af088a26d24c6528484c3eb873eaec4d4fb8ee4"
            "c0ee760611b0e9b60dee92e6fc7f1e1837aa447fa5de");
}

TEST(derived_credentials, another_secret_or_deployment_derives_another_ca) {
  const auto ours = read_cert(derive(secret, "pd-local", "n").credentials().ca_file);
  const auto theirs = read_cert(derive(other_secret, "pd-local", "n").credentials().ca_file);
  const auto elsewhere = read_cert(derive(secret, "pd-remote", "n").credentials().ca_file);
  ASSERT_TRUE(ours && theirs && elsewhere);
  EXPECT_NE(EVP_PKEY_eq(X509_get0_pubkey(ours.get()), X509_get0_pubkey(theirs.get())), 1);
  EXPECT_NE(EVP_PKEY_eq(X509_get0_pubkey(ours.get()), X509_get0_pubkey(elsewhere.get())), 1);
}

TEST(derived_credentials, node_certificate_verifies_against_every_holders_ca_only) {
  const auto a = derive(secret, "pd-local", "prefill-0");
  const auto b = derive(secret, "pd-local", "decode-0");
  const auto c = derive(other_secret, "pd-local", "decode-0");
  const auto cert_a = read_cert(a.credentials().certificate);
  ASSERT_TRUE(cert_a);
  EXPECT_EQ(X509_check_ip_asc(cert_a.get(), "127.0.0.1", 0), 1);
  // b's CA certificate carries another signature over the same content and key.
  EXPECT_TRUE(verifies(cert_a.get(), read_cert(a.credentials().ca_file).get()));
  EXPECT_TRUE(verifies(cert_a.get(), read_cert(b.credentials().ca_file).get()));
  EXPECT_FALSE(verifies(cert_a.get(), read_cert(c.credentials().ca_file).get()));
}

TEST(derived_credentials, refuses_a_short_secret_without_echoing_it) {
  const std::string short_secret(min_secret_chars - 1, 'x');
  auto derived = derive_node_credentials(short_secret, "pd-local", {"n", {"127.0.0.1"}});
  ASSERT_FALSE(derived);
  EXPECT_TRUE(transport::is(derived.error(), errc::invalid_argument));
  const auto message = transport::message_of(derived.error());
  EXPECT_NE(message.find("at least 16"), std::string::npos) << message;
  EXPECT_EQ(message.find(short_secret), std::string::npos) << message;
  EXPECT_FALSE(derive_node_credentials(secret, "", {"n", {"127.0.0.1"}}));
  EXPECT_FALSE(derive_node_credentials(secret, "pd-local", {"ca", {"127.0.0.1"}}));
  EXPECT_FALSE(derive_node_credentials(secret, "pd-local", {"n", {}}));
}

TEST(derived_credentials, folder_is_private_holds_no_secret_and_goes_with_its_owner) {
  const fs::path runtime = fs::temp_directory_path() / ("mstar-xdg-" + std::to_string(::getpid()));
  fs::create_directories(runtime);
  const char* saved = std::getenv("XDG_RUNTIME_DIR");
  const std::string saved_value = saved ? saved : "";
  ::setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
  fs::path dir;
  {
    auto derived = derive(secret, "pd-local", "prefill-0");
    dir = derived.directory();
    EXPECT_EQ(dir.parent_path(), runtime);
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
      ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & 0777, 0600u) << entry.path();
      std::ifstream in{entry.path()};
      const std::string text{std::istreambuf_iterator<char>{in}, {}};
      EXPECT_EQ(text.find(secret), std::string::npos) << entry.path();
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());  // no CA key among them
    EXPECT_EQ(names, (std::vector<std::string>{"ca.pem", "prefill-0-key.pem", "prefill-0.pem"}));
    auto moved = std::move(derived);
    EXPECT_TRUE(fs::exists(dir));  // the moved-from owner removed nothing
    EXPECT_EQ(moved.directory(), dir);
  }
  EXPECT_FALSE(fs::exists(dir));
  if (saved)
    ::setenv("XDG_RUNTIME_DIR", saved_value.c_str(), 1);
  else
    ::unsetenv("XDG_RUNTIME_DIR");
  fs::remove_all(runtime);
}

}  // namespace
}  // namespace mstar::actors
