// actors/internal/ssl_error_queue: an error an earlier TLS call left on the
// thread's queue no longer turns a healthy connection's "no data yet" into
// a failure (CAF 0.17.6 classifies every SSL_read with SSL_get_error and
// never clears the queue, so it closed the healthy connection).
#include "actors/internal/ssl_error_queue.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include "actors/deployment_certs.hpp"

namespace {

namespace fs = std::filesystem;

TEST(SslErrorQueue, InterposersAreBound) {
  EXPECT_TRUE(mstar::actors::internal::ssl_error_queue_guard_is_bound());
}

TEST(SslErrorQueue, StaleErrorDoesNotFailAReadWithNoData) {
  const auto dir = fs::temp_directory_path() / ("mstar-sslq-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ASSERT_FALSE(mstar::actors::make_deployment_certs(dir, {{"node", {"127.0.0.1"}}}));
  SSL_CTX* server_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  ASSERT_EQ(SSL_CTX_use_certificate_chain_file(server_ctx, (dir / "node.pem").c_str()), 1);
  ASSERT_EQ(
      SSL_CTX_use_PrivateKey_file(server_ctx, (dir / "node-key.pem").c_str(), SSL_FILETYPE_PEM), 1);
  fs::remove_all(dir);
  SSL* server = SSL_new(server_ctx);
  SSL* client = SSL_new(client_ctx);
  BIO* a = nullptr;
  BIO* b = nullptr;
  ASSERT_EQ(BIO_new_bio_pair(&a, 0, &b, 0), 1);
  SSL_set_bio(server, a, a);
  SSL_set_bio(client, b, b);
  SSL_set_accept_state(server);
  SSL_set_connect_state(client);
  for (int i = 0; i < 10 && !(SSL_is_init_finished(server) && SSL_is_init_finished(client)); ++i) {
    SSL_do_handshake(client);
    SSL_do_handshake(server);
  }
  ASSERT_TRUE(SSL_is_init_finished(server) && SSL_is_init_finished(client));
  ERR_clear_error();
  // What another connection's failure leaves on this thread's queue (a peer
  // killed mid-connection, OpenSSL 3).
  ERR_raise(ERR_LIB_SSL, SSL_R_UNEXPECTED_EOF_WHILE_READING);
  char buf[16];
  const int ret = SSL_read(server, buf, sizeof buf);  // the established link, no data yet
  EXPECT_LE(ret, 0);
  EXPECT_EQ(SSL_get_error(server, ret), SSL_ERROR_WANT_READ)
      << "a stale error made an empty read look failed: CAF would close the connection";
  SSL_free(client);
  SSL_free(server);
  SSL_CTX_free(client_ctx);
  SSL_CTX_free(server_ctx);
  ERR_clear_error();
}

}  // namespace
