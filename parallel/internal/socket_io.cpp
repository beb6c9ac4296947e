#include "parallel/internal/socket_io.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

namespace mstar::parallel::internal {
namespace {

using namespace std::chrono_literals;

std::string errno_text(int e) {
  return std::strerror(e);
}

error bad_address(std::string_view field, std::string_view text, std::string_view why) {
  return make_error(errc::invalid_argument,
                    fmt::format("socket group {}: '{}' {}", field, text, why));
}

result<socket_address> parse_path(std::string_view text, std::string_view path,
                                  std::string_view field) {
  socket_address a;
  auto* un = reinterpret_cast<sockaddr_un*>(&a.storage);
  if (path.empty())
    return bad_address(field, text, "names no path after unix:");
  if (path.size() >= sizeof(un->sun_path)) {
    return bad_address(field, text,
                       fmt::format("has a path of {} bytes; a Unix socket's holds at most {}",
                                   path.size(), sizeof(un->sun_path) - 1));
  }
  if (path.find('\0') != std::string_view::npos)
    return bad_address(field, text, "has a NUL byte in its path");
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path.data(), path.size());
  a.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  a.is_path = true;
  a.text = fmt::format("unix:{}", path);
  return a;
}

result<socket_address> parse_tcp(std::string_view text, std::string_view rest,
                                 std::string_view field) {
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos)
    return bad_address(field, text, "has no port: write tcp:HOST:PORT");
  std::string host(rest.substr(0, colon));
  const std::string_view port_text = rest.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc{} || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return bad_address(field, text,
                       fmt::format("has port '{}', not a number in [0, 65535]", port_text));
  }
  socket_address a;
  if (host == "localhost")
    host = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    const std::string bare = host.substr(1, host.size() - 2);
    if (::inet_pton(AF_INET6, bare.c_str(), &in6->sin6_addr) != 1)
      return bad_address(field, text, fmt::format("has host '{}', not an IPv6 address", host));
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<std::uint16_t>(port));
    a.length = sizeof(sockaddr_in6);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    if (::inet_pton(AF_INET, host.c_str(), &in4->sin_addr) != 1) {
      return bad_address(field, text,
                         fmt::format("has host '{}', not an IPv4 address, [IPv6] or localhost "
                                     "(names are not looked up)",
                                     host));
    }
    in4->sin_family = AF_INET;
    in4->sin_port = htons(static_cast<std::uint16_t>(port));
    a.length = sizeof(sockaddr_in);
  }
  a.port = port;
  a.text = fmt::format("tcp:{}:{}", host, port);
  return a;
}

// The canonical text of a TCP address the kernel filled in (getsockname).
std::string tcp_text(const sockaddr_storage& s) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (s.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&s);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    return fmt::format("tcp:[{}]:{}", buf, ntohs(in6->sin6_port));
  }
  const auto* in4 = reinterpret_cast<const sockaddr_in*>(&s);
  ::inet_ntop(AF_INET, &in4->sin_addr, buf, sizeof(buf));
  return fmt::format("tcp:{}:{}", buf, ntohs(in4->sin_port));
}

void tune(int fd, bool is_path) {
  const int one = 1;
  if (!is_path)  // collectives are request and reply: do not hold back small frames
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
#ifdef SO_NOSIGPIPE  // where MSG_NOSIGNAL is not enough (BSDs, macOS)
  ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
#endif
}

// Waits until `fd` has one of `events` or `until` passes; the revents, or 0
// at the deadline.
short wait_for(int fd, short events, deadline until) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, millis_left(until));
    if (n > 0)
      return p.revents;
    if (std::chrono::steady_clock::now() >= until)
      return 0;
    // EINTR, or poll woke a moment early: go round.
  }
}

bool is_gone(int e) {
  return e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == ESHUTDOWN;
}

}  // namespace

int millis_left(deadline d) noexcept {
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(d - std::chrono::steady_clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(left.count(), 1'000'000'000));
}

unique_fd& unique_fd::operator=(unique_fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void unique_fd::reset() noexcept {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

result<socket_address> parse_address(std::string_view text, std::string_view field) {
  if (text.starts_with("unix:"))
    return parse_path(text, text.substr(5), field);
  if (text.starts_with("tcp:"))
    return parse_tcp(text, text.substr(4), field);
  return bad_address(field, text, "is neither unix:PATH nor tcp:HOST:PORT");
}

listening_socket& listening_socket::operator=(listening_socket&& o) noexcept {
  if (this != &o) {
    close();
    fd = std::move(o.fd);
    address = std::move(o.address);
  }
  return *this;
}

void listening_socket::close() noexcept {
  // Only the socket that bound the path removes it: a moved-from one holds no fd.
  if (fd && address.is_path)
    ::unlink(reinterpret_cast<const sockaddr_un*>(&address.storage)->sun_path);
  fd.reset();
}

result<listening_socket> listen_at(const socket_address& where) {
  const auto failed = [&where](std::string_view what) {
    return make_error(errc::io_error, fmt::format("socket group: cannot {} at {}: {}", what,
                                                  where.text, errno_text(errno)));
  };
  unique_fd fd(::socket(where.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd)
    return failed("open a socket");
  const int one = 1;
  if (!where.is_path)  // a relaunch may reuse a port still in TIME_WAIT
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&where.storage), where.length) != 0)
    return failed("bind");
  listening_socket l;
  l.address = where;
  l.fd = std::move(fd);  // from here the path is ours to remove
  if (::listen(l.fd.get(), SOMAXCONN) != 0)
    return failed("listen");
  if (!where.is_path) {
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    if (::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0)
      return failed("read the bound port");
    l.address.storage = bound;
    l.address.length = length;
    l.address.text = tcp_text(bound);
    l.address.port = bound.ss_family == AF_INET6
                         ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                         : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  }
  return l;
}

result<unique_fd> connect_to(const socket_address& where, deadline until) {
  std::string last = "nobody listening";
  for (;;) {
    unique_fd fd(::socket(where.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) {
      return make_error(errc::io_error, fmt::format("socket group: cannot open a socket for {}: {}",
                                                    where.text, errno_text(errno)));
    }
    int e = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&where.storage), where.length) != 0)
      e = errno;
    if (e == EINPROGRESS) {
      if ((wait_for(fd.get(), POLLOUT, until) & (POLLOUT | POLLERR | POLLHUP)) == 0)
        e = ETIMEDOUT;
      else {
        socklen_t len = sizeof(e);
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &e, &len);
      }
    }
    if (e == 0) {
      tune(fd.get(), where.is_path);
      return fd;
    }
    // Rank 0 not listening yet (or its backlog full): try again, a little later.
    if (e != ECONNREFUSED && e != ENOENT && e != EAGAIN && e != ETIMEDOUT) {
      return make_error(errc::io_error, fmt::format("socket group: cannot connect to {}: {}",
                                                    where.text, errno_text(e)));
    }
    if (e != ETIMEDOUT)
      last = errno_text(e);
    if (std::chrono::steady_clock::now() + 10ms >= until) {
      return make_error(errc::internal,
                        fmt::format("socket group: nobody accepted a connection at {} in time "
                                    "(last attempt: {})",
                                    where.text, last));
    }
    std::this_thread::sleep_for(10ms);
  }
}

unique_fd accept_one(const listening_socket& listener) {
  for (;;) {
    const int fd = ::accept4(listener.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      tune(fd, listener.address.is_path);
      return unique_fd(fd);
    }
    if (errno != EINTR && errno != ECONNABORTED)
      return unique_fd();
  }
}

io_outcome write_all(int fd, std::span<const std::byte> data, deadline until,
                     bool stop_when_readable) {
  io_outcome out;
  while (out.bytes < data.size()) {
    const ssize_t n =
        ::send(fd, data.data() + out.bytes, data.size() - out.bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out.bytes += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && is_gone(errno))
      return {io_status::closed, out.bytes, errno_text(errno)};
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return {io_status::closed, out.bytes, errno_text(errno)};
    const short events = stop_when_readable ? POLLOUT | POLLIN : POLLOUT;
    const short ready = wait_for(fd, events, until);
    if (ready == 0)
      return {io_status::timed_out, out.bytes, {}};
    if (stop_when_readable && (ready & (POLLIN | POLLHUP)) != 0)
      return {io_status::interrupted, out.bytes, {}};
  }
  return out;
}

io_outcome read_some(int fd, std::span<std::byte> data) {
  io_outcome out;
  while (out.bytes < data.size()) {
    const ssize_t n = ::recv(fd, data.data() + out.bytes, data.size() - out.bytes, MSG_DONTWAIT);
    if (n > 0) {
      out.bytes += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0)
      return {io_status::closed, out.bytes, "its connection closed"};
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      break;
    return {io_status::closed, out.bytes, errno_text(errno)};
  }
  return out;
}

io_outcome read_all(int fd, std::span<std::byte> data, deadline until) {
  std::size_t got = 0;
  for (;;) {
    auto step = read_some(fd, data.subspan(got));
    got += step.bytes;
    if (step.status != io_status::done || got == data.size())
      return {step.status, got, std::move(step.why)};
    if (wait_for(fd, POLLIN, until) == 0)
      return {io_status::timed_out, got, {}};
  }
}

}  // namespace mstar::parallel::internal
