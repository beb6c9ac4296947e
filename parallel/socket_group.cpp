// Forming a socket group: rank 0 listens, reads each joiner's hello and
// token as they come (poll over the listener and every half-introduced
// connection, so a stranger that connects and says nothing delays no one),
// refuses what does not belong at once, and welcomes the ranks once all are
// in. The formed group's collectives are in internal/socket_hub.cpp and
// internal/socket_spoke.cpp.
#include "parallel/socket_group.hpp"

#include <array>
#include <fmt/format.h>
#include <poll.h>
#include <vector>

#include "parallel/internal/socket_io.hpp"
#include "parallel/internal/socket_ranks.hpp"
#include "parallel/internal/socket_wire.hpp"

namespace mstar::parallel {

using internal::deadline;
using internal::io_status;
using internal::unique_fd;
using namespace std::chrono_literals;

namespace {

/// More half-introduced connections than this, and the newest is dropped:
/// a flood of strangers cannot exhaust rank 0's descriptors.
constexpr std::size_t max_pending = 64;

result<internal::socket_address> check_options(const socket_group_options& o) {
  const auto bad = [](std::string message) {
    return make_error(errc::invalid_argument, "socket group " + std::move(message));
  };
  if (o.size < 1)
    return bad(fmt::format("size: {} is not positive", o.size));
  if (o.rank < 0 || o.rank >= o.size)
    return bad(fmt::format("rank: {} is not in [0, {})", o.rank, o.size));
  if (o.timeout.count() <= 0)
    return bad(fmt::format("timeout: {} ms is not positive", o.timeout.count()));
  if (o.token.size() > internal::max_token_bytes) {
    return bad(
        fmt::format("token: {} bytes, at most {}", o.token.size(), internal::max_token_bytes));
  }
  return internal::parse_address(o.address, "address");
}

// Sends `w` and `text`, waiting at most `until`; false when it did not all go.
bool send_welcome(int fd, internal::welcome w, std::string_view text, deadline until) {
  w.text_bytes = static_cast<std::uint32_t>(text.size());
  const auto head = internal::to_bytes(w);
  if (internal::write_all(fd, head, until).status != io_status::done)
    return false;
  const std::span body(reinterpret_cast<const std::byte*>(text.data()), text.size());
  return internal::write_all(fd, body, until).status == io_status::done;
}

void refuse(unique_fd& fd, errc code, std::string_view reason) {
  internal::welcome w;
  w.refusal = static_cast<std::uint32_t>(code);
  (void)send_welcome(fd.get(), w, reason, std::chrono::steady_clock::now() + 100ms);
  fd.reset();
}

/// A connection that has not yet said who it is.
struct joiner {
  unique_fd fd;
  std::array<std::byte, sizeof(internal::hello)> head{};
  std::size_t head_got = 0;
  internal::hello hello{};
  std::string token;
  std::size_t token_got = 0;
};

}  // namespace

struct socket_group_listener::state {
  socket_group_options options;
  internal::listening_socket listener;
  std::string address;           ///< what listener was bound to; kept after it closes
  std::vector<unique_fd> links;  ///< links[r]: rank r, once it joined
  int joined = 0;
  std::string last_refusal;
  bool used = false;

  // Reads what `j` sent; true when it is finished with (joined or refused).
  bool pump(joiner& j) {
    if (j.head_got < j.head.size()) {
      auto got = internal::read_some(j.fd.get(), std::span(j.head).subspan(j.head_got));
      j.head_got += got.bytes;
      if (got.status == io_status::closed)
        return true;
      if (j.head_got < j.head.size())
        return false;
      j.hello = internal::from_bytes<internal::hello>(j.head);
      if (auto why = check_hello(j.hello); !why.empty())
        return refuse_joiner(j, why);
      j.token.resize(j.hello.token_bytes);
    }
    auto got = internal::read_some(j.fd.get(),
                                   std::as_writable_bytes(std::span(j.token)).subspan(j.token_got));
    j.token_got += got.bytes;
    if (got.status == io_status::closed)
      return true;
    if (j.token_got < j.token.size())
      return false;
    return admit(j);
  }

  std::string check_hello(const internal::hello& h) const {
    if (h.magic != internal::wire_magic)
      return "not a tensor parallel socket group hello (wrong magic number)";
    if (h.version != internal::wire_version) {
      return fmt::format("protocol version {}, rank 0 speaks {}", h.version,
                         internal::wire_version);
    }
    if (h.token_bytes > internal::max_token_bytes)
      return fmt::format("a token of {} bytes, at most {}", h.token_bytes,
                         internal::max_token_bytes);
    return {};
  }

  bool admit(joiner& j) {
    const auto& h = j.hello;
    if (h.size != options.size)
      return refuse_joiner(
          j, fmt::format("group size {} does not match rank 0's {}", h.size, options.size));
    if (h.rank < 1 || h.rank >= options.size)
      return refuse_joiner(j, fmt::format("rank {} is not in [1, {})", h.rank, options.size));
    if (j.token != options.token)
      return refuse_joiner(j, "its token does not match the group's");
    auto& slot = links[static_cast<std::size_t>(h.rank)];
    if (slot)
      return refuse_joiner(j, fmt::format("rank {} already joined", h.rank));
    slot = std::move(j.fd);
    ++joined;
    return true;
  }

  bool refuse_joiner(joiner& j, const std::string& why) {
    last_refusal = fmt::format("a joiner claiming rank {}: {}", j.hello.rank, why);
    refuse(j.fd, errc::invalid_argument, why);
    return true;
  }

  // Waits for ranks 1..size-1 until `until`; true when all are in.
  bool gather(deadline until) {
    std::vector<joiner> pending;
    std::vector<pollfd> fds;
    while (joined < options.size - 1) {
      fds.assign(1, {listener.fd.get(), POLLIN, 0});
      for (const auto& j : pending)
        fds.push_back({j.fd.get(), POLLIN, 0});
      const int n = ::poll(fds.data(), fds.size(), internal::millis_left(until));
      if (n <= 0 && std::chrono::steady_clock::now() >= until)
        return false;
      std::vector<bool> finished(pending.size(), false);
      for (std::size_t i = 1; n > 0 && i < fds.size(); ++i) {
        if (fds[i].revents != 0)
          finished[i - 1] = pump(pending[i - 1]);
      }
      std::size_t keep = 0;
      for (std::size_t i = 0; i < pending.size(); ++i) {
        if (finished[i])
          continue;
        if (keep != i)
          pending[keep] = std::move(pending[i]);
        ++keep;
      }
      pending.resize(keep);
      if (n > 0 && fds[0].revents != 0) {
        while (auto fd = internal::accept_one(listener)) {
          if (pending.size() < max_pending) {
            pending.emplace_back();
            pending.back().fd = std::move(fd);
          }
        }
      }
    }
    return true;
  }
};

socket_group_listener::socket_group_listener(std::unique_ptr<state> s) : state_(std::move(s)) {}
socket_group_listener::socket_group_listener(socket_group_listener&&) noexcept = default;
socket_group_listener& socket_group_listener::operator=(socket_group_listener&&) noexcept = default;
socket_group_listener::~socket_group_listener() = default;

const std::string& socket_group_listener::address() const noexcept {
  return state_->address;
}

result<std::unique_ptr<communicator>> socket_group_listener::accept_all() {
  auto& s = *state_;
  if (s.used) {
    return make_error(errc::invalid_argument,
                      fmt::format("socket group at {}: accept_all was already called", s.address));
  }
  s.used = true;
  const auto until = std::chrono::steady_clock::now() + s.options.timeout;
  const bool formed = s.gather(until);
  s.listener.close();  // nobody else may join; a Unix socket's path goes too
  if (!formed) {
    int missing = 1;
    while (s.links[static_cast<std::size_t>(missing)])
      ++missing;
    auto e = peer_timeout("join", 0, missing, s.options.timeout);
    std::string message = e.message();
    for (auto& fd : s.links) {
      if (fd)
        refuse(fd, errc::internal, message);
    }
    if (!s.last_refusal.empty())
      message += fmt::format(" (refused {})", s.last_refusal);
    return make_error(errc::internal, std::move(message));
  }
  for (std::size_t r = 1; r < s.links.size(); ++r) {
    if (!send_welcome(s.links[r].get(), internal::welcome{}, {}, until))
      return peer_gone("join", 0, static_cast<int>(r), "its connection closed before welcome");
  }
  return internal::make_hub(std::move(s.links), s.options.timeout);
}

result<socket_group_listener> socket_group::listen(const socket_group_options& options) {
  auto where = check_options(options);
  if (!where)
    return where.error();
  if (options.rank != 0) {
    return make_error(
        errc::invalid_argument,
        fmt::format("socket group rank: {} cannot listen; rank 0 does", options.rank));
  }
  auto listener = internal::listen_at(*where);
  if (!listener)
    return listener.error();
  auto s = std::make_unique<socket_group_listener::state>();
  s->options = options;
  s->listener = std::move(*listener);
  s->address = s->listener.address.text;
  s->links.resize(static_cast<std::size_t>(options.size));
  return socket_group_listener(std::move(s));
}

result<std::unique_ptr<communicator>> socket_group::join(const socket_group_options& options) {
  auto where = check_options(options);
  if (!where)
    return where.error();
  if (options.rank == 0) {
    auto listener = listen(options);
    if (!listener)
      return listener.error();
    return listener->accept_all();
  }
  if (!where->is_path && where->port == 0) {
    return make_error(errc::invalid_argument,
                      fmt::format("socket group address: {} has port 0; only rank 0 may ask for "
                                  "any port, the others need the one it got",
                                  where->text));
  }
  const auto until = std::chrono::steady_clock::now() + options.timeout;
  const auto context =
      fmt::format("tensor parallel join of rank {} at {}: ", options.rank, where->text);
  auto fd = internal::connect_to(*where, until);
  if (!fd)
    return fd.error().with_context(context);
  internal::hello h;
  h.size = options.size;
  h.rank = options.rank;
  h.token_bytes = static_cast<std::uint32_t>(options.token.size());
  const auto head = internal::to_bytes(h);
  const std::span token(reinterpret_cast<const std::byte*>(options.token.data()),
                        options.token.size());
  if (internal::write_all(fd->get(), head, until).status != io_status::done ||
      internal::write_all(fd->get(), token, until).status != io_status::done) {
    return make_error(errc::internal, context + "rank 0 did not take this rank's hello");
  }
  // Rank 0 answers once every rank is in, or refuses at its own deadline.
  const auto answer_by = until + internal::verdict_grace(options.timeout);
  std::array<std::byte, sizeof(internal::welcome)> answer{};
  auto got = internal::read_all(fd->get(), answer, answer_by);
  if (got.status == io_status::timed_out)
    return peer_timeout("join", options.rank, 0, options.timeout);
  if (got.status != io_status::done)
    return peer_gone("join", options.rank, 0, got.why);
  const auto w = internal::from_bytes<internal::welcome>(answer);
  if (w.magic != internal::wire_magic || w.text_bytes > internal::max_text_bytes)
    return make_error(errc::internal, context + "the answer is not a socket group's welcome");
  std::string text(w.text_bytes, '\0');
  if (internal::read_all(fd->get(), std::as_writable_bytes(std::span(text)), answer_by).status !=
      io_status::done)
    return make_error(errc::internal, context + "rank 0's answer was cut short");
  if (w.refusal != 0) {
    const auto code = w.refusal == static_cast<std::uint32_t>(errc::invalid_argument)
                          ? errc::invalid_argument
                          : errc::internal;
    return make_error(code, context + "rank 0 refused it: " + text);
  }
  return internal::make_spoke(std::move(*fd), options.rank, options.size, options.timeout);
}

process_group_factory socket_process_groups(std::string address, std::string token,
                                            std::chrono::milliseconds timeout) {
  process_group_factory f;
  f.host = [address, token, timeout](int ranks) -> result<process_group_factory::hosted> {
    auto listener = socket_group::listen({address, 0, ranks, token, timeout});
    if (!listener)
      return listener.error();
    auto shared = std::make_shared<socket_group_listener>(std::move(*listener));
    process_group_factory::hosted h;
    h.join_text = shared->address();
    h.complete = [shared]() -> result<process_group_factory::communicator_ptr> {
      auto comm = shared->accept_all();
      if (!comm)
        return comm.error();
      return process_group_factory::communicator_ptr(std::move(*comm));
    };
    return h;
  };
  f.join = [token, timeout](const std::string& text, int rank,
                            int ranks) -> result<process_group_factory::communicator_ptr> {
    auto comm = socket_group::join({text, rank, ranks, token, timeout});
    if (!comm)
      return comm.error();
    return process_group_factory::communicator_ptr(std::move(*comm));
  };
  return f;
}

}  // namespace mstar::parallel
