#include "launcher/deploy/credentials.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

#include "core/hex.hpp"

namespace mstar::deploy {
namespace {

namespace fs = std::filesystem;

error file_error(errc code, std::string_view key, const fs::path& file, std::string_view why) {
  return make_error(code, fmt::format("{}: {} {}", key, file.string(), why));
}

std::string trimmed(std::string text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

}  // namespace

result<std::string> read_private_file(const fs::path& file, std::string_view key) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (ec || !fs::exists(status))
    return file_error(errc::not_found, key, file, "does not exist");
  if (!fs::is_regular_file(status))
    return file_error(errc::invalid_argument, key, file, "is not a regular file");
  const auto others = fs::perms::group_all | fs::perms::others_all;
  if ((status.permissions() & others) != fs::perms::none)
    return file_error(errc::invalid_argument, key, file,
                      "is open to its group or others; make it private (chmod 600)");
  std::ifstream in{file, std::ios::binary};
  std::ostringstream text;
  text << in.rdbuf();
  if (!in)
    return file_error(errc::io_error, key, file, "cannot be read");
  std::string contents = trimmed(std::move(text).str());
  if (contents.empty())
    return file_error(errc::invalid_argument, key, file, "is empty");
  return contents;
}

result<std::string> read_secret(const auth_config& auth) {
  if (auth.mode != auth_mode::secret)
    return make_error(errc::invalid_argument, "auth.mode: tls has no shared secret");
  const bool inline_secret = auth.secret_file.empty();
  auto secret = inline_secret ? result<std::string>{auth.secret}
                              : read_private_file(auth.secret_file, "auth.secret_file");
  if (secret && secret->size() < min_secret_chars)
    return make_error(
        errc::invalid_argument,
        fmt::format("{}: the secret has {} characters; use at least {} ({})",
                    inline_secret ? "auth.secret" : "auth.secret_file", secret->size(),
                    min_secret_chars, "`openssl rand -hex 32` makes one"));
  return secret;
}

result<void> create_secret_file(const fs::path& file) {
  std::random_device random;
  std::array<std::uint8_t, 32> bytes{};
  for (auto& b : bytes)
    b = static_cast<std::uint8_t>(random());
  const std::string text = to_hex(bytes) + "\n";
  // O_EXCL: never replace a secret the running nodes may share.
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return file_error(errc::io_error, "auth.secret_file", file,
                      fmt::format("cannot be created: {}", std::strerror(errno)));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) {
    ::unlink(file.c_str());  // half a secret is worse than none
    return file_error(errc::io_error, "auth.secret_file", file, "could not be written");
  }
  return {};
}

}  // namespace mstar::deploy
