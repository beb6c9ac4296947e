#include "serve/internal/session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

namespace mstar::serve::internal {
namespace {

constexpr std::size_t max_header_bytes = 64 * 1024;
constexpr std::chrono::seconds write_timeout{60};

constexpr std::string_view sse_header =
    "HTTP/1.1 200 OK\r\nServer: mstar-serve\r\nContent-Type: text/event-stream\r\n"
    "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";

}  // namespace

std::vector<std::shared_ptr<session>> server_state::live_sessions() {
  const std::lock_guard lock{mutex};
  std::vector<std::shared_ptr<session>> out;
  for (auto& [_, weak] : sessions) {
    if (auto s = weak.lock())
      out.push_back(std::move(s));
  }
  return out;
}

session::session(tcp::socket&& socket, std::shared_ptr<server_state> state)
    : counted_(state), stream_(std::move(socket)), state_(std::move(state)) {}

session::~session() {
  const std::lock_guard lock{state_->mutex};
  state_->sessions.erase(this);
}

void session::start() {
  {
    const std::lock_guard lock{state_->mutex};
    state_->sessions.emplace(this, weak_from_this());
  }
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
}

void session::close_when_idle() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->keep_alive_ = false;
    if (!self->busy_)
      self->close();
  });
}

void session::cancel_generation() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (auto* engine = self->state_->svc->engine(); engine != nullptr && self->gen_) {
      for (const auto& id : self->engine_ids_)
        engine->cancel(id);
    }
  });
}

void session::read() {
  if (closed_)
    return;
  if (state_->stopping) {
    close();
    return;
  }
  busy_ = false;
  parser_.emplace();
  parser_->header_limit(max_header_bytes);
  parser_->body_limit(state_->options.max_body_bytes);
  stream_.expires_after(state_->options.idle_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
}

void session::on_header(beast::error_code ec) {
  if (ec == http::error::body_limit) {  // a Content-Length over the limit
    busy_ = true;
    return refuse_large_body();
  }
  if (ec) {
    // A closed or idle connection ends quietly; garbage gets one 400.
    if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
        ec != net::error::operation_aborted && ec != net::error::connection_reset &&
        ec != net::error::eof && !closed_) {
      busy_ = true;
      keep_alive_ = false;
      send(service::reply(bad_request(fmt::format("malformed HTTP request: {}", ec.message()))));
      return;
    }
    close();
    return;
  }
  busy_ = true;
  const auto& req = parser_->get();
  keep_alive_ = req.keep_alive() && !state_->stopping;
  if (const auto len = parser_->content_length(); len && *len > state_->options.max_body_bytes) {
    keep_alive_ = false;
    send(service::reply({413,
                         fmt::format("the body ({} bytes) is over the limit of {} bytes", *len,
                                     state_->options.max_body_bytes),
                         "invalid_request_error", "", "body_too_large"}));
    return;
  }
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](beast::error_code e, std::size_t) { self->on_body(e); });
  };
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    net::async_write(
        stream_, net::buffer(*cont),
        [self = shared_from_this(), cont, read_body](beast::error_code e, std::size_t) {
          if (e)
            return self->close();
          read_body();
        });
    return;
  }
  read_body();
}

void session::refuse_large_body() {
  keep_alive_ = false;  // the rest of the body is never read
  send(service::reply(
      {413, fmt::format("the body is over the limit of {} bytes", state_->options.max_body_bytes),
       "invalid_request_error", "", "body_too_large"}));
}

void session::on_body(beast::error_code ec) {
  if (ec == http::error::body_limit)
    return refuse_large_body();
  if (ec) {
    keep_alive_ = false;
    if (ec == net::error::eof || ec == http::error::end_of_stream ||
        ec == net::error::connection_reset || ec == beast::error::timeout)
      return close();
    send(service::reply(bad_request(fmt::format("malformed HTTP request: {}", ec.message()))));
    return;
  }
  stream_.expires_never();
  handle();
}

void session::handle() {
  const auto& req = parser_->get();
  auto view = [](beast::string_view v) { return std::string_view{v.data(), v.size()}; };
  const http_call call{view(req.method_string()), view(req.target()),
                       view(req[http::field::authorization]), req.body()};
  auto out = state_->svc->dispatch(call);
  if (auto* reply = std::get_if<http_reply>(&out)) {
    send(std::move(*reply));
    return;
  }
  start_generation(std::move(std::get<std::unique_ptr<generation>>(out)));
}

void session::send(http_reply reply) {
  state_->svc->responded(reply.status);
  res_ = {};
  res_.version(11);
  res_.result(static_cast<http::status>(reply.status));
  res_.set(http::field::server, "mstar-serve");
  res_.set(http::field::content_type, reply.content_type);
  res_.keep_alive(keep_alive_);
  res_.body() = std::move(reply.body);
  res_.prepare_payload();
  stream_.expires_after(write_timeout);
  http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec)
      return self->close();
    self->after_response();
  });
}

void session::start_generation(std::unique_ptr<generation> g) {
  gen_ = std::move(g);
  auto specs = to_specs(gen_->request(), gen_->id());
  engine_ids_.clear();
  for (const auto& s : specs)
    engine_ids_.push_back(s.id);
  if (gen_->request().stream) {
    state_->svc->responded(200);
    write_raw(fmt::format("{}X-Request-Id: {}\r\nConnection: {}\r\n\r\n", sse_header, gen_->id(),
                          keep_alive_ ? "keep-alive" : "close"));
  }
  watch_peer();
  auto* engine = state_->svc->engine();
  for (auto& spec : specs) {
    if (engine == nullptr) {
      engine::delta d;
      d.id = spec.id;
      d.finished = engine::finish_reason::error;
      d.error = "no engine";
      on_delta(d);
      continue;
    }
    engine->submit(std::move(spec), [self = shared_from_this()](const engine::delta& d) {
      net::post(self->stream_.get_executor(), [self, d] { self->on_delta(d); });
    });
  }
}

void session::on_delta(const engine::delta& d) {
  if (!gen_)
    return;
  const auto events = gen_->on_delta(d);
  if (!events.empty() && !peer_closed_)
    write_chunk(events);
  if (gen_->done())
    end_generation();
}

void session::end_generation() {
  state_->svc->finished(*gen_);
  if (state_->options.log_requests)
    log_generation();
  if (peer_closed_) {
    gen_.reset();
    close();
    return;
  }
  if (gen_->request().stream) {
    const auto failed = gen_->failure();
    write_chunk(failed ? generation::stream_error(*failed) : gen_->stream_tail());
    write_raw("0\r\n\r\n");
    ending_stream_ = true;
    gen_.reset();
    write_next();
    return;
  }
  const auto failed = gen_->failure();
  auto reply = failed ? service::reply(*failed) : http_reply{200, "application/json", gen_->body()};
  gen_.reset();
  send(std::move(reply));
}

void session::log_generation() const {
  const auto& u = gen_->usage();
  const auto& t = gen_->timing();
  const auto images = gen_->request().images.size();
  spdlog::info(
      "{} {}: prompt {} tokens ({} cached){}, generated {}, ttft {:.1f} ms, {:.1f} ms, {}{}",
      gen_->id(), gen_->request().kind == endpoint::chat ? "chat" : "completion", u.prompt_tokens,
      u.cached_tokens, images > 0 ? fmt::format(", {} image(s)", images) : std::string{},
      u.completion_tokens, 1e3 * t.ttft_s.value_or(0.0), 1e3 * t.e2e_s, gen_->finish_reason(),
      peer_closed_ ? " (client went away)" : "");
}

void session::write_raw(std::string data) {
  outbox_.push_back(std::move(data));
  write_next();
}

void session::write_chunk(const std::string& data) {
  write_raw(fmt::format("{:x}\r\n{}\r\n", data.size(), data));
}

// Writes everything queued in one gather write: under load several deltas
// of a connection wait while one write is on the wire, and go out together.
void session::write_next() {
  if (writing_ || closed_ || peer_closed_)
    return;
  if (outbox_.empty()) {
    if (ending_stream_) {
      ending_stream_ = false;
      after_response();
    }
    return;
  }
  writing_ = true;
  in_flight_ = outbox_.size();
  std::vector<net::const_buffer> buffers;
  buffers.reserve(in_flight_);
  for (const auto& piece : outbox_)
    buffers.emplace_back(net::buffer(piece));
  stream_.expires_after(write_timeout);
  net::async_write(
      stream_, buffers, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->writing_ = false;
        self->outbox_.erase(self->outbox_.begin(),
                            self->outbox_.begin() + static_cast<std::ptrdiff_t>(self->in_flight_));
        self->in_flight_ = 0;
        if (ec)
          return self->peer_gone();
        self->write_next();
      });
}

// While a generation runs the client sends nothing; the socket turning
// readable with nothing to read means it closed, so its requests are
// cancelled. Readiness can be stale (an edge for bytes the request reader
// already took), so a peek decides: 0 is the peer's FIN, EAGAIN re-arms.
void session::watch_peer() {
  if (watching_ || closed_)
    return;
  watching_ = true;
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this()](beast::error_code ec) { self->on_watch(ec); });
}

void session::on_watch(beast::error_code ec) {
  watching_ = false;
  if (read_after_watch_) {
    read_after_watch_ = false;
    return read();
  }
  if (!gen_ || closed_ || ec == net::error::operation_aborted)
    return;
  if (ec)
    return peer_gone();
  char byte = 0;
  const auto got = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
    return peer_gone();
  if (got < 0)
    return watch_peer();  // stale readiness: nothing there yet
  // A pipelined request: the reader takes it after this response.
}

void session::peer_gone() {
  if (peer_closed_)
    return;
  peer_closed_ = true;
  // Pieces under an async_write still: kept until it returns.
  outbox_.erase(outbox_.begin() + static_cast<std::ptrdiff_t>(writing_ ? in_flight_ : 0),
                outbox_.end());
  if (gen_) {
    if (auto* engine = state_->svc->engine()) {
      for (const auto& id : engine_ids_)
        engine->cancel(id);
    }
    return;  // end_generation closes once the cancelled requests report
  }
  close();
}

void session::after_response() {
  if (!keep_alive_ || state_->stopping || peer_closed_)
    return close();
  if (watching_) {
    read_after_watch_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  read();
}

void session::close() {
  if (closed_)
    return;
  closed_ = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
}

}  // namespace mstar::serve::internal
