#include "actors/deployment_certs.hpp"

#include <caf/sec.hpp>
#include <cstdio>
#include <filesystem>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/error.hpp"

namespace mstar::actors {
namespace {

namespace fs = std::filesystem;

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

}  // namespace
}  // namespace mstar::actors
