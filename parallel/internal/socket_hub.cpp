// Rank 0 of a socket group: every collective, it reads each peer's frame and
// payload at once (poll over all connections, so a peer that dies is seen
// while another is still sending), checks that every rank made its call,
// combines in rank order and answers each peer. Whatever breaks the group
// here, it tells every peer why (a verdict frame), so all ranks name the
// same cause.
#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <poll.h>
#include <vector>

#include "parallel/internal/socket_rank.hpp"
#include "parallel/internal/socket_ranks.hpp"

namespace mstar::parallel::internal {
namespace {

/// What one peer has sent of the current collective so far.
struct inbound {
  std::array<std::byte, sizeof(frame)> head{};
  std::size_t head_got = 0;
  frame f{};
  std::span<std::byte> body;  ///< where the payload goes once the frame is read
  std::size_t body_got = 0;
  std::string text;  ///< a goodbye's reason
  bool done = false;
};

class hub final : public socket_rank {
 public:
  hub(std::vector<unique_fd> fds, std::chrono::milliseconds timeout)
      : socket_rank(0, static_cast<int>(fds.size()), timeout), links_(fds.size()) {
    for (std::size_t q = 0; q < fds.size(); ++q)
      links_[q].fd = std::move(fds[q]);
  }
  ~hub() override { leave("its communicator was destroyed"); }
  hub(const hub&) = delete;
  hub& operator=(const hub&) = delete;

 private:
  result<void> exchange(const call& c) override {
    const auto until = std::chrono::steady_clock::now() + timeout_;
    std::vector<inbound> in(links_.size());
    if (c.kind == frame_kind::all_reduce_sum)
      scratch_.resize(links_.size());
    for (std::size_t q = 1; q < links_.size(); ++q)
      in[q].body = payload_from(c, q);
    if (auto ok = receive_all(c, in, until); !ok)
      return ok;
    if (auto ok = no_goodbyes(c); !ok)
      return ok;
    combine(c);
    for (std::size_t q = 1; q < links_.size(); ++q) {
      const auto answer = answer_for(c, static_cast<int>(q));
      const frame f{frame_kind::reply, c.root, seq_, c.count, answer.size()};
      const auto sent = send_frame(links_[q], f, answer, until);
      if (sent.status == io_status::closed)
        return lost(c, static_cast<int>(q), sent.why);
      if (sent.status != io_status::done)
        return late(c, static_cast<int>(q));
    }
    return {};
  }

  // Where peer q's payload lands: a scratch row to sum, its slot of the
  // gathered output, or (from broadcast's root) this rank's buffer.
  std::span<std::byte> payload_from(const call& c, std::size_t q) {
    switch (c.kind) {
      case frame_kind::all_reduce_sum:
        scratch_[q].resize(c.count);
        return std::as_writable_bytes(std::span(scratch_[q]));
      case frame_kind::all_gather:
        return c.receive.subspan(q * c.send.size(), c.send.size());
      case frame_kind::broadcast:
        return static_cast<int>(q) == c.root ? c.receive : std::span<std::byte>{};
      case frame_kind::reply:
      case frame_kind::gone:
      case frame_kind::late:
      case frame_kind::broken:
        break;
    }
    return {};
  }

  std::span<const std::byte> answer_for(const call& c, int q) const {
    if (c.kind != frame_kind::broadcast)
      return c.receive;
    if (q == c.root)
      return {};  // the root has the bytes: it only hears the call is done
    return c.root == 0 ? c.send : c.receive;
  }

  // The rank-order sum: 0 + rank 0 + rank 1 + ..., element by element the
  // same float additions as the in-process group's, so the same bits.
  void combine(const call& c) {
    if (c.kind == frame_kind::all_reduce_sum) {
      const std::span data(reinterpret_cast<float*>(c.receive.data()), c.count);
      for (float& x : data)
        x = 0.0F + x;
      for (std::size_t q = 1; q < links_.size(); ++q) {
        const float* src = scratch_[q].data();
        for (std::size_t i = 0; i < data.size(); ++i)
          data[i] += src[i];
      }
    } else if (c.kind == frame_kind::all_gather) {
      std::copy(c.send.begin(), c.send.end(), c.receive.begin());
    }
  }

  result<void> receive_all(const call& c, std::vector<inbound>& in, deadline until) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> who;
    for (;;) {
      fds.clear();
      who.clear();
      for (std::size_t q = 1; q < links_.size(); ++q) {
        if (!in[q].done) {
          fds.push_back({links_[q].fd.get(), POLLIN, 0});
          who.push_back(q);
        }
      }
      if (fds.empty())
        return {};
      const int n = ::poll(fds.data(), fds.size(), millis_left(until));
      if (n <= 0 && std::chrono::steady_clock::now() >= until)
        return late(c, static_cast<int>(who.front()));
      for (std::size_t i = 0; n > 0 && i < fds.size(); ++i) {
        if (fds[i].revents == 0)
          continue;
        if (auto ok = pump(c, static_cast<int>(who[i]), in[who[i]]); !ok)
          return ok;
      }
    }
  }

  // A peer that gave up on this call (it waited longer than its timeout for
  // this rank) has said goodbye after its frame: fail the call here too
  // rather than answer a rank that no longer listens. Best effort: a goodbye
  // still on its way is read by the next call.
  result<void> no_goodbyes(const call& c) {
    for (std::size_t q = 1; q < links_.size(); ++q) {
      pollfd p{links_[q].fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0)
        continue;
      inbound extra;
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      while (!extra.done && std::chrono::steady_clock::now() < until) {
        if (auto ok = pump(c, static_cast<int>(q), extra); !ok)
          return ok;
        p.revents = 0;
        (void)::poll(&p, 1, millis_left(until));
      }
      return broke(
          fmt::format("tensor parallel {}: rank {} sent more than its call before rank 0 "
                      "answered",
                      op_name(c.kind), q));
    }
    return {};
  }

  // Reads what peer q has sent; checks its frame as soon as it is whole.
  result<void> pump(const call& c, int q, inbound& in) {
    const int fd = links_[static_cast<std::size_t>(q)].fd.get();
    if (in.head_got < in.head.size()) {
      auto got = read_some(fd, std::span(in.head).subspan(in.head_got));
      in.head_got += got.bytes;
      if (got.status == io_status::closed)
        return lost(c, q, got.why);
      if (in.head_got < in.head.size())
        return {};
      in.f = from_bytes<frame>(in.head);
      if (auto ok = admit(c, q, in); !ok)
        return ok;
    }
    if (in.body_got < in.body.size()) {
      auto got = read_some(fd, in.body.subspan(in.body_got));
      in.body_got += got.bytes;
      if (got.status == io_status::closed)
        return lost(c, q, got.why);
      if (in.body_got < in.body.size())
        return {};
    }
    if (in.f.kind == frame_kind::gone)
      return lost(c, q, in.text);  // it aborted, or failed on its own
    in.done = true;
    return {};
  }

  result<void> admit(const call& c, int q, inbound& in) {
    const frame& f = in.f;
    if (f.kind == frame_kind::gone) {
      if (f.bytes > max_text_bytes)
        return broke(fmt::format("rank {} said goodbye with {} bytes of reason", q, f.bytes));
      in.text.resize(f.bytes);
      in.body = std::as_writable_bytes(std::span(in.text.data(), in.text.size()));
      return {};
    }
    if (f.kind != c.kind || f.count != c.count || f.root != c.root || f.seq != seq_) {
      return broke(fmt::format(
          "tensor parallel group out of step: rank 0 called {} (count {}, root {}, "
          "call {}) while rank {} called {} (count {}, root {}, call {})",
          op_name(c.kind), c.count, c.root, seq_, q, op_name(f.kind), f.count, f.root, f.seq));
    }
    if (f.bytes != in.body.size()) {
      return broke(fmt::format("tensor parallel {}: rank {} sent {} bytes for {} elements",
                               op_name(c.kind), q, f.bytes, f.count));
    }
    return {};
  }

  // Breaks the group: peer q's connection closed, or it left for `why`.
  error lost(const call& c, int q, const std::string& why) {
    auto e = fail_gone(op_name(c.kind), q, why);
    relay({frame_kind::gone, q, seq_, 0, why.size()}, why, q);
    return e;
  }

  error late(const call& c, int q) {
    auto e = fail(peer_timeout(op_name(c.kind), rank_, q, timeout_));
    const auto ms = static_cast<std::uint64_t>(timeout_.count());
    relay({frame_kind::late, q, seq_, ms, 0}, {}, -1);  // q too: it reads it when it arrives
    return e;
  }

  error broke(std::string message) {
    auto e = fail(make_error(errc::internal, message));
    relay({frame_kind::broken, -1, seq_, 0, message.size()}, message, -1);
    return e;
  }

  void relay(const frame& f, std::string_view text, int except) {
    for (std::size_t q = 1; q < links_.size(); ++q) {
      if (static_cast<int>(q) != except)
        tell(links_[q], f, text);
    }
  }

  void announce_gone(int who, const std::string& reason) override {
    relay({frame_kind::gone, who, seq_, 0, reason.size()}, reason, -1);
  }

  void close_links() override {
    for (auto& l : links_)
      l.fd.reset();
  }

  std::vector<link> links_;                  ///< links_[q]: the connection to rank q; [0] empty
  std::vector<std::vector<float>> scratch_;  ///< all_reduce_sum: each peer's floats
};

}  // namespace

std::unique_ptr<communicator> make_hub(std::vector<unique_fd> links,
                                       std::chrono::milliseconds timeout) {
  return std::make_unique<hub>(std::move(links), timeout);
}

}  // namespace mstar::parallel::internal
