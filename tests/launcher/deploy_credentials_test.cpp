// Credentials named by a deployment: private files, secret length, TLS files,
// the secret mstar-launch creates; and load_deployment over real files.
#include <atomic>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

#include "launcher/deploy/credentials.hpp"
#include "launcher/deploy/deploy_config.hpp"

namespace mstar::deploy {
namespace {

namespace fs = std::filesystem;

/// A fresh folder under the system's temp folder, removed with everything in it.
class temp_dir {
 public:
  temp_dir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("mstar-deploy-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// Writes `text` to `name` with permissions `perms`; returns its path.
  fs::path write(const std::string& name, const std::string& text,
                 fs::perms perms = fs::perms::owner_read | fs::perms::owner_write) const {
    const fs::path file = path_ / name;
    std::ofstream{file} << text;
    fs::permissions(file, perms);
    return file;
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

auth_config secret_file_auth(const fs::path& file) {
  auth_config auth;
  auth.secret_file = file;
  return auth;
}

std::string message_of(const result<std::string>& r) {
  return r ? std::string{"(no error)"} : r.error().message();
}

TEST(deploy_credentials, reads_a_private_secret_file_without_its_newline) {
  const temp_dir dir;
  const auto secret = read_secret(secret_file_auth(dir.write("s", "0123456789abcdef0123\n")));
  ASSERT_TRUE(secret) << secret.error().to_string();
  EXPECT_EQ(*secret, "0123456789abcdef0123");
}

TEST(deploy_credentials, a_missing_empty_or_shared_secret_file_is_refused_naming_the_key) {
  const temp_dir dir;
  const auto missing = read_secret(secret_file_auth(dir.path() / "none"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::not_found);
  EXPECT_NE(message_of(missing).find("auth.secret_file: "), std::string::npos);
  EXPECT_NE(message_of(missing).find("does not exist"), std::string::npos);

  const auto empty = read_secret(secret_file_auth(dir.write("empty", "\n")));
  EXPECT_NE(message_of(empty).find("auth.secret_file: "), std::string::npos);
  EXPECT_NE(message_of(empty).find("is empty"), std::string::npos);

  const auto shared = read_secret(secret_file_auth(
      dir.write("shared", "0123456789abcdef0123", fs::perms::owner_all | fs::perms::group_read)));
  EXPECT_NE(message_of(shared).find("auth.secret_file: "), std::string::npos);
  EXPECT_NE(message_of(shared).find("open to its group or others"), std::string::npos);

  const auto world =
      read_private_file(dir.write("world", "key", fs::perms::owner_read | fs::perms::others_read),
                        "http.api_key_file");
  EXPECT_NE(message_of(world).find("http.api_key_file: "), std::string::npos);
}

TEST(deploy_credentials, a_short_secret_is_refused_inline_or_in_a_file) {
  const temp_dir dir;
  const auto short_file = read_secret(secret_file_auth(dir.write("s", "abc")));
  EXPECT_NE(message_of(short_file).find("auth.secret_file: the secret has 3 characters"),
            std::string::npos)
      << message_of(short_file);
  auth_config inline_auth;
  inline_auth.secret = "short";
  EXPECT_NE(message_of(read_secret(inline_auth)).find("auth.secret: the secret has 5"),
            std::string::npos);
  inline_auth.secret = "0123456789abcdef";
  EXPECT_EQ(read_secret(inline_auth).value(), "0123456789abcdef");
}

TEST(deploy_credentials, created_secrets_are_private_random_and_never_replaced) {
  const temp_dir dir;
  const fs::path a = dir.path() / "a.txt";
  const fs::path b = dir.path() / "b.txt";
  ASSERT_TRUE(create_secret_file(a));
  ASSERT_TRUE(create_secret_file(b));
  EXPECT_EQ(fs::status(a).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  const auto secret_a = read_secret(secret_file_auth(a));
  const auto secret_b = read_secret(secret_file_auth(b));
  ASSERT_TRUE(secret_a) << secret_a.error().to_string();
  ASSERT_TRUE(secret_b);
  EXPECT_EQ(secret_a->size(), 64u);
  EXPECT_NE(*secret_a, *secret_b);

  const auto again = create_secret_file(a);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message().find("auth.secret_file: "), std::string::npos);
  EXPECT_EQ(read_secret(secret_file_auth(a)).value(), *secret_a);
}

TEST(deploy_credentials, load_deployment_prefixes_errors_with_the_file) {
  const temp_dir dir;
  const fs::path file = dir.write("bad.yaml", "deployment: x\nnodes: [a\n");
  const auto parsed = load_deployment(file);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().message().rfind(file.string() + ": YAML syntax error at line", 0), 0u)
      << parsed.error().message();
}

TEST(deploy_credentials, a_loaded_deployment_resolves_paths_against_its_folder) {
  const temp_dir dir;
  const fs::path file = dir.write("deploy.yaml", R"(deployment: t
auth: {mode: secret, secret_file: secret.txt}
nodes: [{name: n, role: both, control_port: 7000}]
)");
  const auto parsed = load_deployment(file);
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->auth.secret_file, dir.path() / "secret.txt");
  // The file mstar-launch creates then reads back through the same config.
  ASSERT_TRUE(create_secret_file(parsed->auth.secret_file));
  EXPECT_TRUE(read_secret(parsed->auth));
}

}  // namespace
}  // namespace mstar::deploy
