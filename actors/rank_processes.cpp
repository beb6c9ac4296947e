// Tensor-parallel ranks as processes: the conductor's model over its
// followers' streams, the remote members of the replicated pools, and the
// follower's loop (actors/rank_processes.hpp).
#include "actors/rank_processes.hpp"

#include <atomic>
#include <deque>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <poll.h>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <vector>

#include "actors/rank_wire.hpp"
#include "engine/pool_set.hpp"
#include "kernels/replicated_arena.hpp"

namespace mstar::actors {

namespace io = parallel::internal;
using ranks::op;

std::string pool_shape(const models::pool_spec& spec) {
  std::string out;
  if (spec.kv) {
    const auto& g = spec.kv->geometry;
    out += fmt::format("KV pages of {} tokens x {} layers x {} KV heads x {} dims ({}), {} pages",
                       g.page_size, g.num_layers, g.num_kv_heads, g.head_dim, to_string(g.dtype),
                       spec.kv->max_num_pages);
  } else {
    out += "no KV pool";
  }
  if (spec.recurrent) {
    const auto& r = *spec.recurrent;
    out += fmt::format("; recurrent: {} layers, {} slots, {} checkpoint slots", r.num_layers,
                       r.max_slots, r.checkpoint_slots);
    for (const auto& [name, block] : r.blocks)
      out += fmt::format(", {} [{}] {}", name, fmt::join(block.shape(), "x"),
                         to_string(block.dtype()));
  } else {
    out += "; no recurrent pool";
  }
  return out;
}

namespace {

// A reply frame's error, or the frame when it is of `want`.
// `asked` names the request in errors (an op's name, or "loading").
result<ranks::frame> expect_reply(result<ranks::frame> got, op want, int rank,
                                  std::string_view asked) {
  if (!got)
    return got.error();
  if (got->kind == op::reply_error) {
    auto e = ranks::decode<ranks::error_wire>(got->payload, "reply_error");
    const auto inner = e ? ranks::from_wire(*e) : e.error();
    return make_error(inner.code(),
                      fmt::format("tensor-parallel rank {}: {}: {}", rank, asked, inner.message()));
  }
  if (got->kind != want) {
    return make_error(errc::internal, fmt::format("tensor-parallel rank {}: answered {} with {}",
                                                  rank, asked, ranks::to_string(got->kind)));
  }
  return got;
}

// One follower's stream, as the conductor holds it. Writes come from
// whichever thread makes the call (the worker's model calls, the pool
// actors' byte movements), one at a time under `write_mutex_`, so the
// stream's order is the order the calls were made in. A reader thread takes
// the follower's frames: replies go to their waiting callers in order; a
// `failed` frame or a closed stream is the follower's failure, which every
// later call returns.
class rank_link {
 public:
  rank_link(int rank, io::unique_fd fd, std::chrono::milliseconds timeout)
      : rank_(rank),
        fd_(std::move(fd)),
        timeout_(timeout),
        peer_(fmt::format("tensor-parallel rank {}", rank)) {}
  ~rank_link() { close(); }
  rank_link(const rank_link&) = delete;
  rank_link& operator=(const rank_link&) = delete;

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] std::uint32_t next_arena_id() noexcept { return next_arena_++; }

  void start_reader() {
    reader_ = std::thread([this] { read_loop(); });
  }

  // The follower's failure, if any.
  [[nodiscard]] std::optional<error> failure() const {
    std::lock_guard lock(state_mutex_);
    return failure_;
  }

  // Puts a request that gets no answer on the stream.
  result<void> send(op kind, const std::vector<char>& payload) {
    std::lock_guard lock(write_mutex_);
    if (auto f = failure())
      return *f;
    if (auto ok = ranks::write_frame(fd_.get(), kind, payload, ranks::after(timeout_), peer_);
        !ok) {
      fail(prefixed(ok.error()));
      return *failure();
    }
    return {};
  }

  // Puts a request on the stream and waits for its reply (at most the
  // timeout): the reply frame, or the follower's failure.
  result<ranks::frame> call(op kind, const std::vector<char>& payload) {
    std::future<result<ranks::frame>> reply;
    {
      std::lock_guard lock(write_mutex_);
      {
        std::lock_guard state(state_mutex_);
        if (failure_)
          return *failure_;
        pending_.emplace_back();
        reply = pending_.back().get_future();
      }
      if (auto ok = ranks::write_frame(fd_.get(), kind, payload, ranks::after(timeout_), peer_);
          !ok) {
        fail(prefixed(ok.error()));
      }
    }
    if (reply.wait_for(timeout_) != std::future_status::ready) {
      fail(make_error(errc::internal, fmt::format("{}: no answer to {} within {} ms", peer_,
                                                  ranks::to_string(kind), timeout_.count())));
    }
    return reply.get();
  }

  // Tells the follower to leave, then stops reading. Idempotent.
  void close() {
    if (closing_.exchange(true))
      return;
    {
      std::lock_guard lock(write_mutex_);
      if (!failure())
        (void)ranks::write_frame(fd_.get(), op::shutdown, {},
                                 ranks::after(std::chrono::milliseconds{1000}), peer_);
    }
    if (reader_.joinable())
      reader_.join();
    fail(make_error(errc::cancelled, fmt::format("{}: the conductor closed its stream", peer_)));
  }

 private:
  error prefixed(const error& e) const {
    return make_error(e.code(), e.message().starts_with(peer_)
                                    ? e.message()
                                    : fmt::format("{}: {}", peer_, e.message()));
  }

  // The first failure sticks; every waiting caller gets it.
  void fail(const error& e) {
    std::lock_guard lock(state_mutex_);
    if (!failure_)
      failure_ = e;
    for (auto& p : pending_)
      p.set_value(*failure_);
    pending_.clear();
  }

  void read_loop() {
    while (!closing_.load()) {
      pollfd pfd{fd_.get(), POLLIN, 0};
      const int ready = ::poll(&pfd, 1, 100);
      if (ready <= 0)
        continue;  // nothing yet (or EINTR): look at closing_ again
      auto got = ranks::read_frame(fd_.get(), ranks::after(timeout_), "its stream");
      if (!got) {
        if (!closing_.load()) {
          fail(make_error(errc::internal,
                          fmt::format("{} left the node ({})", peer_, got.error().message())));
        }
        return;
      }
      switch (got->kind) {
        case op::reply_ok:
        case op::reply_text:
        case op::reply_error: {
          std::lock_guard lock(state_mutex_);
          if (pending_.empty()) {
            failure_ = failure_.value_or(
                make_error(errc::internal, fmt::format("{}: a reply nobody asked for", peer_)));
            return;
          }
          pending_.front().set_value(std::move(*got));
          pending_.pop_front();
          break;
        }
        case op::failed: {
          auto e = ranks::decode<ranks::error_wire>(got->payload, "failed");
          fail(prefixed(e ? ranks::from_wire(*e) : e.error()));
          return;
        }
        default:
          fail(make_error(errc::parse_error, fmt::format("{}: sent {} to its conductor", peer_,
                                                         ranks::to_string(got->kind))));
          return;
      }
    }
  }

  int rank_;
  io::unique_fd fd_;
  std::chrono::milliseconds timeout_;
  std::string peer_;
  std::atomic<std::uint32_t> next_arena_{0};
  std::mutex write_mutex_;
  mutable std::mutex state_mutex_;
  std::deque<std::promise<result<ranks::frame>>> pending_;
  std::optional<error> failure_;
  std::atomic<bool> closing_{false};
  std::thread reader_;
};

// A follower's copy of a pool's memory, seen from the conductor: member r
// of a replicated arena. Every byte movement goes on rank r's stream; the
// bytes themselves are in the follower (data() is null: nothing here reads
// them, rank 0's model binds to member 0). Failures stick to the link.
class remote_arena final : public kernels::arena {
 public:
  remote_arena(std::shared_ptr<rank_link> link, std::uint32_t id, std::size_t bytes,
               kernels::memory_kind kind)
      : link_(std::move(link)), id_(id), bytes_(bytes), kind_(kind) {}

  [[nodiscard]] kernels::memory_kind kind() const noexcept override { return kind_; }
  [[nodiscard]] std::byte* data() noexcept override { return nullptr; }
  [[nodiscard]] const std::byte* data() const noexcept override { return nullptr; }
  [[nodiscard]] std::size_t size() const noexcept override { return bytes_; }

  void copy_pages(const kernels::kv_geometry& geometry, std::span<const std::int32_t> src,
                  std::span<const std::int32_t> dst) override {
    ranks::page_move m{
        id_, ranks::to_wire(geometry), {src.begin(), src.end()}, {dst.begin(), dst.end()}};
    (void)link_->send(op::copy_pages, ranks::encode(m));
  }
  void copy_slots(const kernels::kv_geometry& geometry, std::int32_t src, std::int32_t dst,
                  std::size_t slots) override {
    ranks::slot_run m{id_, ranks::to_wire(geometry), src, dst, slots};
    (void)link_->send(op::copy_slots, ranks::encode(m));
  }
  void zero_pages(const kernels::kv_geometry& geometry,
                  std::span<const std::int32_t> pages) override {
    ranks::page_move m{id_, ranks::to_wire(geometry), {}, {pages.begin(), pages.end()}};
    (void)link_->send(op::zero_pages, ranks::encode(m));
  }
  // Transfers of tensor-parallel pools are refused by the replicated arena
  // before they reach a member; one that got here anyway fails the arena.
  void pack_pages(const kernels::kv_geometry&, std::span<const std::int32_t>, std::byte*) override {
    refused_ = true;
  }
  void unpack_pages(const kernels::kv_geometry&, std::span<const std::int32_t>,
                    const std::byte*) override {
    refused_ = true;
  }
  void copy_slot(const kernels::slot_block& block, std::int32_t src, std::int32_t dst) override {
    auto m = ranks::to_wire(id_, block, src, dst);
    (void)link_->send(op::copy_slot, ranks::encode(m));
  }
  void zero_slot(const kernels::slot_block& block, std::int32_t slot) override {
    auto m = ranks::to_wire(id_, block, 0, slot);
    (void)link_->send(op::zero_slot, ranks::encode(m));
  }
  void pack_slot(const kernels::slot_block&, std::int32_t, std::byte*) override { refused_ = true; }
  void unpack_slot(const kernels::slot_block&, std::int32_t, const std::byte*) override {
    refused_ = true;
  }

  [[nodiscard]] result<void> read(std::size_t, std::span<std::byte>) const override {
    return make_error(
        errc::unsupported,
        fmt::format("tensor-parallel rank {}'s pool memory is in its own process", link_->rank()));
  }
  [[nodiscard]] result<void> write(std::size_t offset, std::span<const std::byte> in) override {
    if (auto ok = kernels::check_range("remote arena", bytes_, offset, in.size()); !ok)
      return ok;
    ranks::arena_write m{id_, offset, {}};
    m.bytes.resize(in.size());
    std::memcpy(m.bytes.data(), in.data(), in.size());
    return link_->send(op::write, ranks::encode(m));
  }
  [[nodiscard]] result<void> status() const override {
    if (refused_) {
      return make_error(errc::unsupported,
                        "transfer of tensor-parallel pools is not supported yet");
    }
    if (auto f = link_->failure())
      return *f;
    return {};
  }
  [[nodiscard]] result<void> synchronize() override {
    std::uint32_t id = id_;
    auto got = expect_reply(link_->call(op::synchronize, ranks::encode(id)), op::reply_ok,
                            link_->rank(), ranks::to_string(op::synchronize));
    if (!got)
      return got.error();
    return status();
  }

 private:
  std::shared_ptr<rank_link> link_;
  std::uint32_t id_;
  std::size_t bytes_;
  kernels::memory_kind kind_;
  bool refused_ = false;
};

// The conductor's model: rank 0 here, every other rank behind its stream.
class process_ranks_lm final : public models::causal_lm {
 public:
  process_ranks_lm(std::unique_ptr<models::causal_lm> local,
                   std::shared_ptr<parallel::communicator> comm,
                   std::vector<std::shared_ptr<rank_link>> links, std::int64_t follower_parameters)
      : local_(std::move(local)),
        comm_(std::move(comm)),
        links_(std::move(links)),
        follower_parameters_(follower_parameters) {}

  ~process_ranks_lm() override {
    // Followers leave first (their loops end on shutdown), then rank 0's
    // model and its membership of the data group.
    for (auto& l : links_)
      l->close();
    local_.reset();
    comm_.reset();
  }

  [[nodiscard]] const models::tokenizer* tok() const noexcept override { return local_->tok(); }
  [[nodiscard]] std::int64_t vocab_size() const noexcept override { return local_->vocab_size(); }
  [[nodiscard]] std::int64_t max_context() const noexcept override { return local_->max_context(); }
  [[nodiscard]] std::span<const std::int64_t> eos_token_ids() const noexcept override {
    return local_->eos_token_ids();
  }
  [[nodiscard]] bool prefix_skip_safe() const noexcept override {
    return local_->prefix_skip_safe();
  }
  [[nodiscard]] bool supports_windows() const noexcept override {
    return local_->supports_windows();
  }
  [[nodiscard]] std::optional<models::vision_facts> vision() const noexcept override {
    return local_->vision();
  }
  [[nodiscard]] result<void> place_images(
      std::vector<resources::token_id>& prompt,
      std::span<const models::image_input> images) const override {
    return local_->place_images(prompt, images);
  }
  [[nodiscard]] std::vector<models::image_span> image_spans(
      std::span<const resources::token_id> prompt,
      std::span<const models::image_input> images) const override {
    return local_->image_spans(prompt, images);
  }
  [[nodiscard]] std::string preprocess_fingerprint() const override {
    return local_->preprocess_fingerprint();
  }
  [[nodiscard]] models::step_request declare(
      std::span<const models::step_row> rows) const override {
    return local_->declare(rows);
  }
  [[nodiscard]] std::string device_name() const override { return local_->device_name(); }
  [[nodiscard]] mstar::dtype compute_dtype() const noexcept override {
    return local_->compute_dtype();
  }
  [[nodiscard]] std::int64_t num_parameters() const noexcept override {
    return local_->num_parameters() + follower_parameters_;
  }
  [[nodiscard]] bool on_gpu() const noexcept override { return local_->on_gpu(); }

  // Rank 0's spec, every follower's checked against it, its memory
  // replicated over rank 0's and each follower's (made there on request).
  // `replicas` stays 1: this process holds only member 0; each follower
  // allocates its own copy and reports when it cannot.
  [[nodiscard]] result<models::pool_spec> pools(
      const models::pool_options& options) const override {
    auto spec = local_->pools(options);
    if (!spec)
      return spec.error();
    const auto ours = pool_shape(*spec);
    auto opts = options;
    const auto payload = ranks::encode(opts);
    std::vector<kernels::arena_factory> members{spec->memory};
    for (const auto& link : links_) {
      auto got = expect_reply(link->call(op::pools, payload), op::reply_text, link->rank(),
                              ranks::to_string(op::pools));
      if (!got)
        return got.error();
      auto theirs = ranks::decode<std::string>(got->payload, "pools reply");
      if (!theirs)
        return theirs.error();
      if (*theirs != ours) {
        return make_error(errc::invalid_argument,
                          fmt::format("tensor-parallel rank {}'s pools differ from rank 0's: "
                                      "rank {}: {}; rank 0: {}",
                                      link->rank(), link->rank(), *theirs, ours));
      }
      members.push_back([link](std::size_t bytes) -> result<std::unique_ptr<kernels::arena>> {
        ranks::arena_made_request req{link->next_arena_id(), bytes};
        auto made = expect_reply(link->call(op::make_arena, ranks::encode(req)), op::reply_text,
                                 link->rank(), ranks::to_string(op::make_arena));
        if (!made)
          return made.error();
        auto kind = ranks::decode<std::string>(made->payload, "make_arena reply");
        if (!kind)
          return kind.error();
        return std::unique_ptr<kernels::arena>(std::make_unique<remote_arena>(
            link, req.id, bytes,
            *kind == "device" ? kernels::memory_kind::device : kernels::memory_kind::host));
      });
    }
    // Rank 0's fingerprint names its part ("tp 0/N"); these pools hold
    // every rank's, as tensor_parallel_lm's do.
    spec->fingerprint += fmt::format(" replicated over {} ranks", links_.size() + 1);
    spec->memory = kernels::replicated_arena_factory(std::move(members));
    return spec;
  }

  [[nodiscard]] result<void> bind(resources::kv_pool* kv,
                                  resources::recurrent_state_pool* recurrent) override {
    if (auto b = broken())
      return *b;
    for (const auto& link : links_) {
      if (auto got = expect_reply(link->call(op::bind, {}), op::reply_ok, link->rank(),
                                  ranks::to_string(op::bind));
          !got) {
        return got.error();
      }
    }
    return local_->bind(kv, recurrent);
  }

  void begin_sequence(const resources::request_id& rid, std::span<const resources::token_id> prompt,
                      std::span<const models::image_input> images) override {
    ranks::sequence_begin m{rid, {prompt.begin(), prompt.end()}, {images.begin(), images.end()}};
    broadcast(op::begin_sequence, ranks::encode(m));
    local_->begin_sequence(rid, prompt, images);
  }

  void end_sequence(const resources::request_id& rid) override {
    auto id = rid;
    broadcast(op::end_sequence, ranks::encode(id));
    local_->end_sequence(rid);
  }

  [[nodiscard]] result<models::forward_output> forward(
      std::span<const models::step_row> rows, const models::step_plans& plans,
      std::span<const models::row_sampling> draws) override {
    if (auto b = broken())
      return *b;
    auto call = step_call_of(rows, plans, draws, {});
    broadcast(op::forward, ranks::encode(call));
    if (auto b = broken())
      return *b;
    auto out = local_->forward(rows, plans, draws);
    return settle(std::move(out));
  }

  [[nodiscard]] result<std::uint64_t> launch(std::span<const models::step_row> rows,
                                             const models::step_plans& plans,
                                             std::span<const models::row_sampling> draws,
                                             std::span<const std::int32_t> loopback) override {
    if (auto b = broken())
      return *b;
    auto call = step_call_of(rows, plans, draws, loopback);
    broadcast(op::launch, ranks::encode(call));
    if (auto b = broken())
      return *b;
    return settle(local_->launch(rows, plans, draws, loopback));
  }

  [[nodiscard]] result<models::forward_output> finish(std::uint64_t ticket) override {
    if (auto b = broken())
      return *b;
    broadcast(op::finish, {});
    return settle(local_->finish(ticket));
  }

 private:
  static ranks::step_call step_call_of(std::span<const models::step_row> rows,
                                       const models::step_plans& plans,
                                       std::span<const models::row_sampling> draws,
                                       std::span<const std::int32_t> loopback) {
    ranks::step_call call;
    call.rows.reserve(rows.size());
    for (const auto& r : rows)
      call.rows.push_back({r.rid, {r.tokens.begin(), r.tokens.end()}});
    if (plans.kv)
      call.kv = *plans.kv;
    if (plans.recurrent)
      call.recurrent = *plans.recurrent;
    call.draws.assign(draws.begin(), draws.end());
    call.loopback.assign(loopback.begin(), loopback.end());
    return call;
  }

  // Every follower's stream gets the request; a stream that fails records
  // it on its link (broken() then says so).
  void broadcast(op kind, const std::vector<char>& payload) {
    for (const auto& link : links_)
      (void)link->send(kind, payload);
  }

  // Rank 0's outcome, with a failure recorded (the data group aborted, so
  // followers still in a collective stop) and the root cause preferred: a
  // follower's own failure explains rank 0's broken collective.
  template <class T>
  result<T> settle(result<T> got) {
    if (!got) {
      // A follower that died broke rank 0's collective; its stream says so
      // within moments, and names the cause better than the collective.
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds{500};
      while (!broken() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds{5});
      {
        std::lock_guard lock(failure_mutex_);
        if (!failure_) {
          failure_ = make_error(got.error().code(),
                                fmt::format("tensor-parallel rank 0: {}", got.error().message()));
        }
      }
      if (comm_)
        comm_->abort(fmt::format("rank 0 failed: {}", got.error().message()));
    }
    if (auto b = broken())
      return *b;
    return got;
  }

  // A follower's failure first (the cause), then rank 0's own.
  [[nodiscard]] std::optional<error> broken() const {
    for (const auto& link : links_) {
      if (auto f = link->failure())
        return f;
    }
    std::lock_guard lock(failure_mutex_);
    return failure_;
  }

  std::unique_ptr<models::causal_lm> local_;
  std::shared_ptr<parallel::communicator> comm_;
  std::vector<std::shared_ptr<rank_link>> links_;
  std::int64_t follower_parameters_ = 0;
  mutable std::mutex failure_mutex_;
  std::optional<error> failure_;
};

// A follower's frame written or the error naming the conductor.
result<void> answer(int fd, op kind, const std::vector<char>& payload,
                    std::chrono::milliseconds timeout) {
  return ranks::write_frame(fd, kind, payload, ranks::after(timeout), "the conductor");
}

result<void> answer_error(int fd, const error& e, std::chrono::milliseconds timeout) {
  auto w = ranks::to_wire(e);
  return answer(fd, op::reply_error, ranks::encode(w), timeout);
}

}  // namespace

struct rank_conductor::state {
  rank_process_options options;
  io::listening_socket listener;
  bool accepted = false;
};

rank_conductor::rank_conductor(std::unique_ptr<state> s) : state_(std::move(s)) {}
rank_conductor::rank_conductor(rank_conductor&&) noexcept = default;
rank_conductor& rank_conductor::operator=(rank_conductor&&) noexcept = default;
rank_conductor::~rank_conductor() = default;

result<rank_conductor> rank_conductor::listen(const rank_process_options& options) {
  if (options.ranks < 2) {
    return make_error(
        errc::invalid_argument,
        fmt::format("tensor-parallel ranks: {} (at least 2 for rank processes)", options.ranks));
  }
  if (options.timeout.count() <= 0)
    return make_error(errc::invalid_argument, "tensor-parallel rank timeout: not positive");
  auto where = io::parse_address(options.address, "tensor-parallel conductor address");
  if (!where)
    return where.error();
  auto listener = io::listen_at(*where);
  if (!listener)
    return listener.error();
  auto s = std::make_unique<state>();
  s->options = options;
  s->listener = std::move(*listener);
  return rank_conductor(std::move(s));
}

const std::string& rank_conductor::address() const noexcept {
  return state_->listener.address.text;
}

namespace {

// Reads a connection's hello (by `until`): its rank, or why it is refused.
result<int> read_hello(int fd, const rank_process_options& o, io::deadline until,
                       const std::vector<io::unique_fd>& joined) {
  auto f = ranks::read_frame(fd, until, "a joining rank");
  if (!f)
    return f.error();
  if (f->kind != op::hello)
    return make_error(errc::invalid_argument, "the first frame was not a hello");
  auto h = ranks::decode<ranks::hello_wire>(f->payload, "hello");
  if (!h)
    return h.error();
  if (h->version != ranks::version) {
    return make_error(errc::unsupported, fmt::format("rank stream version {} (this conductor: {})",
                                                     h->version, ranks::version));
  }
  if (h->token != o.token)
    return make_error(errc::invalid_argument, "wrong token");
  if (h->ranks != o.ranks) {
    return make_error(errc::invalid_argument,
                      fmt::format("group of {} ranks (this conductor's: {})", h->ranks, o.ranks));
  }
  if (h->rank < 1 || h->rank >= o.ranks) {
    return make_error(errc::invalid_argument,
                      fmt::format("rank {} (followers are 1..{})", h->rank, o.ranks - 1));
  }
  if (joined[static_cast<std::size_t>(h->rank)])
    return make_error(errc::invalid_argument, fmt::format("rank {} already joined", h->rank));
  return h->rank;
}

void refuse(int fd, const std::string& reason) {
  ranks::welcome_wire w{reason, {}};
  (void)ranks::write_frame(fd, op::welcome, ranks::encode(w),
                           ranks::after(std::chrono::milliseconds{1000}), "a joining rank");
}

}  // namespace

result<std::unique_ptr<models::causal_lm>> rank_conductor::accept_all(
    const models::run_options& run, const rank_group_factory& groups, const rank_loader& load) {
  auto& s = *state_;
  if (s.accepted)
    return make_error(errc::invalid_argument, "rank_conductor::accept_all: called twice");
  s.accepted = true;
  const auto& o = s.options;
  const auto until = ranks::after(o.timeout);
  std::vector<io::unique_fd> joined(static_cast<std::size_t>(o.ranks));
  int waiting = o.ranks - 1;
  std::string last_refusal;
  while (waiting > 0) {
    if (const int left = io::millis_left(until); left > 0) {
      pollfd pfd{s.listener.fd.get(), POLLIN, 0};
      (void)::poll(&pfd, 1, std::min(left, 100));  // EINTR or nothing yet: accept_one says
    }
    if (io::millis_left(until) <= 0) {
      int missing = 1;
      while (joined[static_cast<std::size_t>(missing)])
        ++missing;
      return make_error(
          errc::internal,
          fmt::format("tensor-parallel rank {} did not join the conductor at {} "
                      "within {} ms{}",
                      missing, address(), o.timeout.count(),
                      last_refusal.empty() ? "" : " (refused: " + last_refusal + ")"));
    }
    auto fd = io::accept_one(s.listener);
    if (!fd)
      continue;
    // A joiner has a few seconds to introduce itself, so a silent stranger
    // cannot hold the real ranks out until the deadline.
    const auto intro = std::min(until, ranks::after(std::chrono::milliseconds{5000}));
    auto rank = read_hello(fd.get(), o, intro, joined);
    if (!rank) {
      last_refusal = rank.error().message();
      refuse(fd.get(), last_refusal);
      continue;
    }
    joined[static_cast<std::size_t>(*rank)] = std::move(fd);
    --waiting;
  }
  s.listener.close();  // the ranks are in: nobody else may join

  auto refuse_all = [&](const error& e) {
    for (std::size_t r = 1; r < joined.size(); ++r)
      refuse(joined[r].get(), e.message());
    return e;
  };
  auto hosted = groups.host(o.ranks);
  if (!hosted)
    return refuse_all(hosted.error().with_context("forming the tensor-parallel data group"));
  for (std::size_t r = 1; r < joined.size(); ++r) {
    ranks::welcome_wire w{{}, hosted->join_text};
    if (auto ok =
            ranks::write_frame(joined[r].get(), op::welcome, ranks::encode(w),
                               ranks::after(o.timeout), fmt::format("tensor-parallel rank {}", r));
        !ok) {
      return ok.error();
    }
  }
  auto comm = hosted->complete();
  if (!comm)
    return comm.error().with_context("forming the tensor-parallel data group");
  models::run_options mine = run;
  mine.tensor_parallel = *comm;
  mine.tensor_parallel_ranks = 1;
  mine.tensor_parallel_groups = nullptr;
  auto local = load(mine);
  if (!local) {
    (*comm)->abort("rank 0 could not load: " + local.error().message());
    return make_error(local.error().code(),
                      fmt::format("tensor-parallel rank 0: {}", local.error().message()));
  }
  // Each follower says it loaded (its weight count) or why not.
  std::int64_t follower_parameters = 0;
  for (std::size_t r = 1; r < joined.size(); ++r) {
    auto ready = expect_reply(ranks::read_frame(joined[r].get(), ranks::after(o.timeout),
                                                fmt::format("tensor-parallel rank {}", r)),
                              op::reply_text, static_cast<int>(r), "loading");
    if (!ready)
      return ready.error();
    auto n = ranks::decode<std::int64_t>(ready->payload, "ready");
    if (!n)
      return n.error();
    follower_parameters += *n;
  }
  std::vector<std::shared_ptr<rank_link>> links;
  for (std::size_t r = 1; r < joined.size(); ++r) {
    links.push_back(
        std::make_shared<rank_link>(static_cast<int>(r), std::move(joined[r]), o.timeout));
    links.back()->start_reader();
  }
  return std::unique_ptr<models::causal_lm>(std::make_unique<process_ranks_lm>(
      std::move(*local), std::move(*comm), std::move(links), follower_parameters));
}

namespace {

// What a follower holds while it serves: its model, its pools (made at
// bind, over the arenas the conductor asked for), the outstanding launches.
struct follower {
  int fd = -1;
  std::chrono::milliseconds timeout{};
  std::shared_ptr<parallel::communicator> comm;
  std::unique_ptr<models::causal_lm> model;
  std::optional<models::pool_spec> spec;
  std::map<std::uint32_t, std::unique_ptr<kernels::arena>> unclaimed;  ///< made, not yet in a pool
  std::map<std::uint32_t, kernels::arena*> arenas;
  std::unique_ptr<engine::pool_set> pools;
  std::deque<std::uint64_t> tickets;

  ~follower() {
    // As local_engine: the pools' device arenas first (they run on the
    // model backend's stream), the model's backend last.
    pools.reset();
    unclaimed.clear();
    model.reset();
  }

  result<kernels::arena*> arena_of(std::uint32_t id) {
    const auto it = arenas.find(id);
    if (it == arenas.end())
      return make_error(errc::not_found, fmt::format("no arena {}", id));
    return it->second;
  }

  // Requests with a reply: the text (or none) or the error.
  result<std::optional<std::vector<char>>> answerable(const ranks::frame& f) {
    using reply = std::optional<std::vector<char>>;
    switch (f.kind) {
      case op::pools: {
        auto opts = ranks::decode<models::pool_options>(f.payload, "pools");
        if (!opts)
          return opts.error();
        auto got = model->pools(*opts);
        if (!got)
          return got.error();
        spec = std::move(*got);
        auto text = pool_shape(*spec);
        return reply{ranks::encode(text)};
      }
      case op::make_arena: {
        auto req = ranks::decode<ranks::arena_made_request>(f.payload, "make_arena");
        if (!req)
          return req.error();
        if (!spec)
          return make_error(errc::invalid_argument, "make_arena before pools");
        if (arenas.contains(req->id))
          return make_error(errc::invalid_argument, fmt::format("arena {} made twice", req->id));
        auto made = kernels::make_arena(spec->memory, req->bytes);
        if (!made)
          return made.error();
        std::string kind = (*made)->kind() == kernels::memory_kind::device ? "device" : "host";
        arenas[req->id] = made->get();
        unclaimed[req->id] = std::move(*made);
        return reply{ranks::encode(kind)};
      }
      case op::bind: {
        if (!spec)
          return make_error(errc::invalid_argument, "bind before pools");
        // The pools take the conductor's arenas in the order it made them
        // (the same code makes the same pools in the same order), each of
        // the size this rank's pool asks for.
        auto s = *spec;
        s.memory = [this](std::size_t bytes) -> result<std::unique_ptr<kernels::arena>> {
          if (unclaimed.empty()) {
            return make_error(errc::internal,
                              fmt::format("this rank's pools want an arena of {} bytes the "
                                          "conductor never made",
                                          bytes));
          }
          auto it = unclaimed.begin();
          if (it->second->size() != bytes) {
            return make_error(errc::internal,
                              fmt::format("this rank's pools want {} bytes where the conductor's "
                                          "arena {} has {}",
                                          bytes, it->first, it->second->size()));
          }
          auto a = std::move(it->second);
          unclaimed.erase(it);
          return a;
        };
        auto made = engine::pool_set::make(s);
        if (!made)
          return made.error();
        if (!unclaimed.empty()) {
          return make_error(errc::internal, fmt::format("the conductor made {} arenas this rank's "
                                                        "pools do not use",
                                                        unclaimed.size()));
        }
        pools = std::move(*made);
        if (auto ok = model->bind(pools->kv(), pools->recurrent()); !ok)
          return ok.error();
        return reply{};
      }
      case op::synchronize: {
        auto id = ranks::decode<std::uint32_t>(f.payload, "synchronize");
        if (!id)
          return id.error();
        auto a = arena_of(*id);
        if (!a)
          return a.error();
        if (auto ok = (*a)->synchronize(); !ok)
          return ok.error();
        return reply{};
      }
      default:
        return make_error(errc::internal, "not a request with a reply");
    }
  }

  // The step's rows and plans as the model takes them (views into `call`).
  static std::vector<models::step_row> rows_of(const ranks::step_call& call) {
    std::vector<models::step_row> rows;
    rows.reserve(call.rows.size());
    for (const auto& r : call.rows)
      rows.push_back({r.rid, r.tokens});
    return rows;
  }
  static models::step_plans plans_of(ranks::step_call& call) {
    models::step_plans plans;
    if (call.kv)
      plans.kv = std::make_shared<const resources::kv_plan>(std::move(*call.kv));
    if (call.recurrent)
      plans.recurrent =
          std::make_shared<const resources::recurrent_plan>(std::move(*call.recurrent));
    return plans;
  }

  // Requests without a reply; an error ends the follower.
  result<void> apply(const ranks::frame& f) {
    switch (f.kind) {
      case op::begin_sequence: {
        auto m = ranks::decode<ranks::sequence_begin>(f.payload, "begin_sequence");
        if (!m)
          return m.error();
        model->begin_sequence(m->rid, m->prompt, m->images);
        return {};
      }
      case op::end_sequence: {
        auto rid = ranks::decode<resources::request_id>(f.payload, "end_sequence");
        if (!rid)
          return rid.error();
        model->end_sequence(*rid);
        return {};
      }
      case op::forward:
      case op::launch: {
        auto call = ranks::decode<ranks::step_call>(f.payload, ranks::to_string(f.kind));
        if (!call)
          return call.error();
        const auto rows = rows_of(*call);
        const auto plans = plans_of(*call);
        if (f.kind == op::forward) {
          auto got = model->forward(rows, plans, call->draws);
          if (!got)
            return got.error().with_context("forward");
          return {};
        }
        auto ticket = model->launch(rows, plans, call->draws, call->loopback);
        if (!ticket)
          return ticket.error().with_context("launch");
        tickets.push_back(*ticket);
        return {};
      }
      case op::finish: {
        if (tickets.empty())
          return make_error(errc::internal, "finish without a launched forward");
        const auto ticket = tickets.front();
        tickets.pop_front();
        if (auto got = model->finish(ticket); !got)
          return got.error().with_context("finish");
        return {};
      }
      case op::copy_pages:
      case op::zero_pages: {
        auto m = ranks::decode<ranks::page_move>(f.payload, ranks::to_string(f.kind));
        if (!m)
          return m.error();
        auto a = arena_of(m->id);
        if (!a)
          return a.error();
        if (f.kind == op::copy_pages)
          (*a)->copy_pages(ranks::from_wire(m->geometry), m->src, m->dst);
        else
          (*a)->zero_pages(ranks::from_wire(m->geometry), m->dst);
        return (*a)->status();
      }
      case op::copy_slots: {
        auto m = ranks::decode<ranks::slot_run>(f.payload, "copy_slots");
        if (!m)
          return m.error();
        auto a = arena_of(m->id);
        if (!a)
          return a.error();
        (*a)->copy_slots(ranks::from_wire(m->geometry), m->src, m->dst, m->slots);
        return (*a)->status();
      }
      case op::copy_slot:
      case op::zero_slot: {
        auto m = ranks::decode<ranks::slot_move>(f.payload, ranks::to_string(f.kind));
        if (!m)
          return m.error();
        auto a = arena_of(m->id);
        if (!a)
          return a.error();
        if (f.kind == op::copy_slot)
          (*a)->copy_slot(ranks::block_of(*m), m->src, m->dst);
        else
          (*a)->zero_slot(ranks::block_of(*m), m->dst);
        return (*a)->status();
      }
      case op::write: {
        auto m = ranks::decode<ranks::arena_write>(f.payload, "write");
        if (!m)
          return m.error();
        auto a = arena_of(m->id);
        if (!a)
          return a.error();
        return (*a)->write(m->offset, std::as_bytes(std::span<const std::uint8_t>(m->bytes)));
      }
      default:
        return make_error(errc::parse_error,
                          fmt::format("the conductor sent {}", ranks::to_string(f.kind)));
    }
  }
};

}  // namespace

result<void> serve_as_follower(const follower_options& o, const models::run_options& run,
                               const rank_group_factory& groups, const rank_loader& load) {
  if (o.ranks < 2 || o.rank < 1 || o.rank >= o.ranks) {
    return make_error(errc::invalid_argument,
                      fmt::format("tensor-parallel follower rank {} of {} (followers are 1..N-1, "
                                  "N >= 2)",
                                  o.rank, o.ranks));
  }
  auto where = io::parse_address(o.conductor, "tensor-parallel conductor address");
  if (!where)
    return where.error();
  const auto until = ranks::after(o.timeout);
  auto fd = io::connect_to(*where, until);
  if (!fd)
    return fd.error();
  const std::string peer = "the conductor at " + where->text;
  ranks::hello_wire hello{ranks::version, o.token, o.rank, o.ranks};
  if (auto ok = ranks::write_frame(fd->get(), op::hello, ranks::encode(hello), until, peer); !ok)
    return ok.error();
  auto w = ranks::read_frame(fd->get(), until, peer);
  if (!w)
    return w.error();
  auto welcome = ranks::decode<ranks::welcome_wire>(w->payload, "welcome");
  if (!welcome)
    return welcome.error();
  if (w->kind != op::welcome || !welcome->refusal.empty()) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} refused rank {}: {}", peer, o.rank, welcome->refusal));
  }
  auto comm = groups.join(welcome->group, o.rank, o.ranks);
  if (!comm)
    return comm.error().with_context("joining the tensor-parallel data group");

  follower f;
  f.fd = fd->get();
  f.timeout = o.timeout;
  f.comm = *comm;
  models::run_options mine = run;
  mine.tensor_parallel = f.comm;
  mine.tensor_parallel_ranks = 1;
  mine.tensor_parallel_groups = nullptr;
  auto model = load(mine);
  if (!model) {
    f.comm->abort("rank " + std::to_string(o.rank) + " could not load: " + model.error().message());
    (void)answer_error(f.fd, model.error(), o.timeout);
    return model.error();
  }
  f.model = std::move(*model);
  std::int64_t params = f.model->num_parameters();
  if (auto ok = answer(f.fd, op::reply_text, ranks::encode(params), o.timeout); !ok)
    return ok.error();

  for (;;) {
    pollfd pfd{f.fd, POLLIN, 0};
    if (::poll(&pfd, 1, 1000) <= 0)
      continue;  // idle (or EINTR): the conductor may be quiet for long
    auto frame = ranks::read_frame(f.fd, ranks::after(o.timeout), peer);
    if (!frame) {
      f.comm->abort("the conductor left");
      return make_error(errc::cancelled, fmt::format("tensor-parallel rank {}: {}", o.rank,
                                                     frame.error().message()));
    }
    switch (frame->kind) {
      case op::shutdown:
        return {};
      case op::pools:
      case op::make_arena:
      case op::bind:
      case op::synchronize: {
        auto got = f.answerable(*frame);
        auto sent = !got               ? answer_error(f.fd, got.error(), o.timeout)
                    : got->has_value() ? answer(f.fd, op::reply_text, **got, o.timeout)
                                       : answer(f.fd, op::reply_ok, {}, o.timeout);
        if (!sent) {
          f.comm->abort("rank " + std::to_string(o.rank) + " lost its conductor");
          return sent.error();
        }
        break;
      }
      default: {
        if (auto ok = f.apply(*frame); !ok) {
          // The data group first, so rank 0 stops waiting in a collective;
          // then the conductor hears the cause.
          const auto e = make_error(
              ok.error().code(),
              fmt::format("{}: {}", ranks::to_string(frame->kind), ok.error().message()));
          f.comm->abort(fmt::format("rank {} failed: {}", o.rank, e.message()));
          auto wire = ranks::to_wire(e);
          (void)answer(f.fd, op::failed, ranks::encode(wire), o.timeout);
          return make_error(e.code(),
                            fmt::format("tensor-parallel rank {}: {}", o.rank, e.message()));
        }
        break;
      }
    }
  }
}

}  // namespace mstar::actors
