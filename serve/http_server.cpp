#include "serve/http_server.hpp"

#include <algorithm>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <thread>

#include "serve/internal/session.hpp"

namespace mstar::serve {

using namespace internal;

struct http_server::impl {
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
  // The acceptor's handlers run on a strand of their own, and `stop` closes
  // it through the same strand: with several threads running `ioc`, a close
  // posted to `ioc` raced the handler that starts the next accept (seen by
  // ThreadSanitizer in http_images.a_model_without_a_vision_tower_refuses_image_parts).
  net::strand<net::io_context::executor_type> accept_strand{net::make_strand(ioc)};
  tcp::acceptor acceptor{accept_strand};
  std::shared_ptr<server_state> state = std::make_shared<server_state>();
  std::vector<std::thread> threads;
  std::uint16_t port = 0;
  std::once_flag stopped;

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open())
        return;
      if (!ec && !state->stopping) {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<session>(std::move(socket), state)->start();
      }
      accept();
    });
  }

  // Polls `done` every 5 ms for up to `limit`; true when it held.
  template <class Pred>
  static bool wait_for(Pred done, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= until)
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
};

http_server::http_server(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

http_server::~http_server() {
  stop();
}

std::uint16_t http_server::port() const noexcept {
  return impl_->port;
}

result<std::unique_ptr<http_server>> http_server::start(std::shared_ptr<service> svc,
                                                        const server_options& options) {
  auto p = std::make_unique<impl>();
  p->state->svc = std::move(svc);
  p->state->options = options;
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) {
    return make_error(errc::invalid_argument, fmt::format("--host '{}' is not an IP address: {}",
                                                          options.host, ec.message()));
  }
  const tcp::endpoint at{address, options.port};
  auto failed = [&](const char* what) {
    return make_error(errc::io_error, fmt::format("cannot {} {}:{}: {}", what, options.host,
                                                  options.port, ec.message()));
  };
  if (p->acceptor.open(at.protocol(), ec); ec)
    return failed("open a socket for");
  if (p->acceptor.set_option(net::socket_base::reuse_address(true), ec); ec)
    return failed("set SO_REUSEADDR on");
  if (p->acceptor.bind(at, ec); ec)
    return failed("bind");
  if (p->acceptor.listen(net::socket_base::max_listen_connections, ec); ec)
    return failed("listen on");
  p->port = p->acceptor.local_endpoint().port();
  p->guard.emplace(p->ioc.get_executor());
  p->accept();
  auto threads = options.threads;
  if (threads == 0)
    threads = std::clamp<std::size_t>(std::thread::hardware_concurrency() / 4, 2, 8);
  for (std::size_t i = 0; i < threads; ++i)
    p->threads.emplace_back([io = &p->ioc] { io->run(); });
  return std::unique_ptr<http_server>(new http_server(std::move(p)));
}

void http_server::run_until_signal() {
  net::io_context signals;
  net::signal_set set{signals, SIGINT, SIGTERM};
  set.async_wait([](beast::error_code, int sig) {
    spdlog::info("signal {}: stopping (in-flight requests may finish)", sig);
  });
  signals.run();
  stop();
}

void http_server::stop() {
  std::call_once(impl_->stopped, [&] {
    auto& p = *impl_;
    auto& svc = *p.state->svc;
    p.state->stopping = true;
    svc.drain();
    net::post(p.accept_strand, [&p] {
      beast::error_code ignored;
      p.acceptor.close(ignored);
    });
    for (const auto& s : p.state->live_sessions())
      s->close_when_idle();
    const auto grace =
        std::chrono::duration_cast<std::chrono::milliseconds>(p.state->options.shutdown_grace);
    if (!impl::wait_for([&] { return svc.outstanding() == 0; }, grace)) {
      spdlog::warn("{} request(s) still running after {} s: cancelling them", svc.outstanding(),
                   p.state->options.shutdown_grace.count());
      for (const auto& s : p.state->live_sessions())
        s->cancel_generation();
      (void)impl::wait_for([&] { return svc.outstanding() == 0; }, std::chrono::seconds(10));
    }
    // Every session gone, destructors included (session::counted), before
    // the I/O threads and then the io_context go.
    if (!impl::wait_for([&] { return p.state->sessions_alive == 0; }, std::chrono::seconds(5))) {
      spdlog::warn("{} connection(s) still open 5 s after the last request: stopping anyway",
                   p.state->sessions_alive.load());
    }
    p.guard.reset();
    p.ioc.stop();
    for (auto& t : p.threads)
      t.join();
  });
}

}  // namespace mstar::serve
