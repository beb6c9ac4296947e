// The control plane between nodes, with real processes: a node publishes an
// actor over mutual TLS in a forked child; clients, each a forked child,
// connect with the deployment's credential, with none, with another
// deployment's, or with plain BASP. In secret mode each child derives its
// credential from the shared secret itself, as a node does. Children are forked before anything
// touches CAF or libssl; each reports through its exit code, the server also
// through a pipe (what its actor received, what it logged).

#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <filesystem>
#include <gtest/gtest.h>
#include <optional>
#include <set>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sstream>
#include <unistd.h>

#include "actors/control_plane.hpp"
#include "actors/deployment_certs.hpp"
#include "tests/transport/multiproc_support.hpp"

namespace mstar::actors {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using transport::test::channel;
using transport::test::spawn;
using transport::test::wait_exit;

constexpr const char* host = "127.0.0.1";

// Client exit codes.
constexpr int replied = 0;
constexpr int refused = 1;
constexpr int setup_failed = 2;

constexpr const char* deployment_name = "cp-test";
constexpr const char* our_secret = "correct horse battery staple";
constexpr const char* wrong_secret = "incorrect horse battery staple";

// How a child gets its credential: a deployment folder's files (tls mode),
// or derived from `secret` when it is set (secret mode).
struct node_auth {
  std::optional<node_credentials> files;
  std::string secret;
  std::string name;
};

// The credential `auth` names; a derived one is kept in `derived`, which
// must outlive the actor system (CAF re-reads the files).
std::optional<node_credentials> resolve(const node_auth& auth,
                                        std::optional<derived_credentials>& derived) {
  if (auth.secret.empty())
    return auth.files;
  auto made = derive_node_credentials(auth.secret, deployment_name, {auth.name, {host}});
  if (!made)
    return std::nullopt;
  derived.emplace(std::move(*made));
  return derived->credentials();
}

// The published node actor: answers "ping" with "pong"; counts every
// message that reaches it, whatever its type.
caf::behavior counting_echo(caf::event_based_actor* self, std::atomic<int>* received) {
  self->set_default_handler([received](caf::scheduled_actor*, caf::message_view&) {
    ++*received;
    return caf::result<caf::message>{caf::sec::unexpected_message};
  });
  return {[received](const std::string& text) {
    ++*received;
    return text == "ping" ? std::string{"pong"} : std::string{"?"};
  }};
}

// The server child: publishes the echo actor, sends its port, waits for the
// parent's word, then sends how many messages the actor got and its log.
int run_server(const node_auth& auth, const channel& up, const channel& down) {
  std::optional<derived_credentials> derived;
  const auto creds = resolve(auth, derived);
  if (!creds)
    return setup_failed;
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  std::atomic<int> received{0};
  {
    caf::actor_system_config cfg;
    if (configure_node(cfg, *creds))
      return setup_failed;
    caf::actor_system sys{cfg};
    auto echo = sys.spawn(counting_echo, &received);
    auto port = publish_node(sys, echo, host, 0);
    if (!port || !up.send(std::to_string(*port)))
      return setup_failed;
    (void)down.receive(8s);  // the parent's clients are done (or it gave up)
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  }
  spdlog::default_logger()->sinks().pop_back();
  up.send(std::to_string(received.load()));
  up.send(log.str());
  return 0;
}

// Asks `middleman` (the OpenSSL module's or the plain one) to connect,
// bounded by `timeout`: what a process without our wrappers would do.
std::optional<caf::actor> raw_connect(caf::actor_system& sys,
                                      const caf::io::middleman_actor& middleman, std::uint16_t port,
                                      std::chrono::milliseconds timeout) {
  caf::scoped_actor self{sys};
  std::optional<caf::actor> found;
  self->request(middleman, timeout, caf::connect_atom_v, std::string{host}, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            if (ptr)
              found = caf::actor_cast<caf::actor>(ptr);
          },
          [](caf::error&) {});
  return found;
}

// Sends "ping" to `node` and waits for "pong"; `replied` or `refused`.
int ping(caf::actor_system& sys, const caf::actor& node) {
  caf::scoped_actor self{sys};
  int code = refused;
  self->request(node, 2s, std::string{"ping"})
      .receive([&](const std::string& reply) { code = reply == "pong" ? replied : refused; },
               [](caf::error&) {});
  return code;
}

enum class client_kind { credential, anonymous_tls, plain_basp };

// A client child. With a credential it uses connect_node; without, CAF's
// OpenSSL module unconfigured (anonymous TLS) or the plain middleman. If it
// connects it pings, so a hole would show in the server's count.
int run_client(client_kind kind, const node_auth& auth, std::uint16_t port) {
  std::optional<derived_credentials> derived;
  caf::actor_system_config cfg;
  if (kind == client_kind::credential) {
    const auto creds = resolve(auth, derived);
    if (!creds || configure_node(cfg, *creds))
      return setup_failed;
  } else {
    cfg.load<caf::io::middleman>();
    cfg.load<caf::openssl::manager>();
  }
  caf::actor_system sys{cfg};
  std::optional<caf::actor> node;
  switch (kind) {
    case client_kind::credential: {
      auto found = connect_node(sys, host, port, 3s);
      if (found)
        node = *found;
      break;
    }
    case client_kind::anonymous_tls:
      node = raw_connect(sys, sys.openssl_manager().actor_handle(), port, 3s);
      break;
    case client_kind::plain_basp:
      node = raw_connect(sys, sys.middleman().actor_handle(), port, 1s);
      break;
  }
  return node ? ping(sys, *node) : refused;
}

struct outcome {
  int client_exit = -1;
  int server_exit = -1;
  int received = -1;  ///< messages the published actor got
  std::string server_log;
};

class control_plane : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("mstar-control-plane-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    ASSERT_FALSE(make_deployment_certs(root_ / "ours", {{"server", {host}}, {"client", {host}}}));
    ASSERT_FALSE(make_deployment_certs(root_ / "theirs", {{"client", {host}}}));
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static node_credentials credential(const std::string& deployment, const std::string& node) {
    auto creds = load_node_credentials(root_ / deployment, node);
    EXPECT_TRUE(creds) << caf::to_string(creds.error());
    return creds ? *creds : node_credentials{};
  }
  static node_auth files(const std::string& folder, const std::string& node) {
    return {credential(folder, node), "", node};
  }
  static node_auth shared(const std::string& secret_text, const std::string& node) {
    return {std::nullopt, secret_text, node};
  }

  // Starts the server child, runs one client child against it, collects both.
  static outcome run(client_kind kind, const node_auth& client_auth) {
    return run(kind, client_auth, files("ours", "server"));
  }
  static outcome run(client_kind kind, const node_auth& client_auth, const node_auth& server_auth) {
    outcome out;
    channel up;
    channel down;
    const pid_t server = spawn([&] { return run_server(server_auth, up, down); }, 20);
    const auto port = up.receive(5s);
    if (port) {
      const auto p = static_cast<std::uint16_t>(std::stoi(*port));
      const pid_t client = spawn([&] { return run_client(kind, client_auth, p); }, 20);
      out.client_exit = wait_exit(client, 8s);
    }
    down.send("done");
    if (auto received = up.receive(5s))
      out.received = std::stoi(*received);
    out.server_log = up.receive(5s).value_or("");
    out.server_exit = wait_exit(server, 5s);
    return out;
  }

  static inline fs::path root_;
};

TEST_F(control_plane, authenticated_peer_gets_a_reply_from_the_published_actor) {
  const auto out = run(client_kind::credential, files("ours", "client"));
  EXPECT_EQ(out.client_exit, replied);
  EXPECT_EQ(out.server_exit, 0);
  EXPECT_EQ(out.received, 1);
  EXPECT_EQ(out.server_log.find("refused"), std::string::npos) << out.server_log;
}

TEST_F(control_plane, peer_without_a_credential_cannot_connect_and_the_refusal_is_logged) {
  const auto out = run(client_kind::anonymous_tls, {});
  EXPECT_EQ(out.client_exit, refused);
  EXPECT_EQ(out.server_exit, 0);
  EXPECT_EQ(out.received, 0);
  EXPECT_NE(out.server_log.find("refused TLS peer 127.0.0.1:"), std::string::npos)
      << out.server_log;
}

TEST_F(control_plane, peer_with_another_deployments_credential_cannot_connect_and_is_logged) {
  const auto out = run(client_kind::credential, files("theirs", "client"));
  EXPECT_EQ(out.client_exit, refused);
  EXPECT_EQ(out.server_exit, 0);
  EXPECT_EQ(out.received, 0);
  EXPECT_NE(out.server_log.find("refused TLS peer 127.0.0.1:"), std::string::npos)
      << out.server_log;
}

TEST_F(control_plane, peer_speaking_plain_basp_reaches_no_actor) {
  const auto out = run(client_kind::plain_basp, {});
  EXPECT_EQ(out.client_exit, refused);
  EXPECT_EQ(out.server_exit, 0);
  EXPECT_EQ(out.received, 0);
  EXPECT_NE(out.server_log.find("refused TLS peer 127.0.0.1:"), std::string::npos)
      << out.server_log;
}

TEST_F(control_plane, peers_sharing_a_secret_connect_and_exchange_a_message) {
  const auto out =
      run(client_kind::credential, shared(our_secret, "client"), shared(our_secret, "server"));
  EXPECT_EQ(out.client_exit, replied);
  EXPECT_EQ(out.server_exit, 0);
  EXPECT_EQ(out.received, 1);
  EXPECT_EQ(out.server_log.find("refused"), std::string::npos) << out.server_log;
}

TEST_F(control_plane, peer_with_another_secret_cannot_connect_and_is_logged) {
  const auto out =
      run(client_kind::credential, shared(wrong_secret, "client"), shared(our_secret, "server"));
  EXPECT_EQ(out.client_exit, refused);
  EXPECT_EQ(out.server_exit, 0);
  EXPECT_EQ(out.received, 0);
  EXPECT_NE(out.server_log.find("refused TLS peer 127.0.0.1:"), std::string::npos)
      << out.server_log;
}

TEST_F(control_plane, peer_without_the_secret_cannot_connect_to_a_secret_node) {
  const auto out = run(client_kind::anonymous_tls, {}, shared(our_secret, "server"));
  EXPECT_EQ(out.client_exit, refused);
  EXPECT_EQ(out.server_exit, 0);
  EXPECT_EQ(out.received, 0);
  EXPECT_NE(out.server_log.find("refused TLS peer 127.0.0.1:"), std::string::npos)
      << out.server_log;
}

}  // namespace
}  // namespace mstar::actors
