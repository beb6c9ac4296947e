#pragma once

// The deployment file: one YAML document describing every node of a
// disaggregated prefill/decode deployment, read by mstar-node and mstar-launch.
// Parsing fills in every default and checks every rule, so a value of
// deployment_config is complete and consistent. README.md lists the keys.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace mstar::deploy {

/// What a node does with requests.
enum class role : std::uint8_t {
  prefill,  ///< runs prompts and publishes their pages to decode nodes
  decode,   ///< adopts published pages and generates tokens
  both,     ///< does both, like mstar-serve
};

/// "prefill", "decode" or "both".
[[nodiscard]] std::string_view to_string(role r) noexcept;

/// The role named `text`, or nothing when it names none.
[[nodiscard]] std::optional<role> parse_role(std::string_view text) noexcept;

[[nodiscard]] constexpr bool can_prefill(role r) noexcept {
  return r != role::decode;
}
[[nodiscard]] constexpr bool can_decode(role r) noexcept {
  return r != role::prefill;
}

/// How the nodes' control plane (CAF) proves who they are to each other.
enum class auth_mode : std::uint8_t {
  secret,  ///< a shared secret, inline or in a file
  tls,     ///< certificates in a folder (ca.pem, cert.pem, key.pem)
};

[[nodiscard]] std::string_view to_string(auth_mode m) noexcept;

/// The `auth:` section. Exactly one of `secret` and `secret_file` is set in
/// secret mode; `tls_dir` is set in tls mode. Paths are absolute.
struct auth_config {
  auth_mode mode = auth_mode::secret;
  std::string secret;                 ///< inline secret (discouraged: it sits in the file)
  std::filesystem::path secret_file;  ///< a file holding the secret
  std::filesystem::path tls_dir;      ///< ca.pem, cert.pem and key.pem

  friend bool operator==(const auth_config&, const auth_config&) = default;
};

/// The front node's HTTP listener.
struct http_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;
  std::filesystem::path api_key_file;  ///< empty: no API key required

  friend bool operator==(const http_config&, const http_config&) = default;
};

/// Deadlines, in seconds; all positive.
struct timeouts_config {
  double join_s = 60;      ///< for every node to join the deployment at start
  double transfer_s = 30;  ///< for one decode node to pull one request's pages
  double request_s = 600;  ///< for one request, end to end

  friend bool operator==(const timeouts_config&, const timeouts_config&) = default;
};

/// How mstar-launch restarts a node that dies.
struct restart_config {
  std::int32_t max_retries = 3;  ///< restarts per node before the deployment stops
  double backoff_s = 1.0;        ///< the wait before a restart

  friend bool operator==(const restart_config&, const restart_config&) = default;
};

/// Pool sizes a node sets; unset ones keep the engine's defaults.
struct pool_overrides {
  std::optional<std::int64_t> kv_pages;   ///< KV pages in the pool, the sink included
  std::optional<std::int64_t> max_slots;  ///< recurrent state slots, the sink included
  /// On a GPU, the share of the device's memory the node may take, the pools
  /// sized from what the weights and work buffers leave of it (unset: 0.9);
  /// `kv_pages` / `max_slots` win where given. Ignored on the CPU.
  std::optional<double> gpu_memory_fraction;
  /// "shared" (named shared-memory segments, so a node on the same host
  /// reads pages with a mapped copy), "private", or empty: shared when
  /// another node of the deployment has the same host.
  std::string memory;

  friend bool operator==(const pool_overrides&, const pool_overrides&) = default;
};

/// Scheduler limits a node sets; unset ones keep the engine's defaults.
struct engine_overrides {
  std::optional<std::int64_t> max_batched_tokens;
  std::optional<std::int32_t> max_running;
  std::string schedule;  ///< "sync" or "overlap"; empty: the engine's default (overlap on a GPU,
                         ///< sync on the CPU)

  friend bool operator==(const engine_overrides&, const engine_overrides&) = default;
};

/// One process of the deployment.
struct node_config {
  std::string name;
  deploy::role role = role::both;
  std::string host = "127.0.0.1";  ///< where the control port listens
  std::uint16_t control_port = 0;  ///< the CAF control plane; never 0 after parsing
  std::string device;              ///< cpu, cuda or cuda:N; the top-level one when unset
  /// Ranks the node's model is split across (Nemotron-H; 1-64; role both
  /// only): see `tensor_parallel_mode` for where they run.
  std::int32_t tensor_parallel = 1;
  /// Where the ranks run: "threads" (the default: in the node's process,
  /// models/tensor_parallel_lm.hpp) or "processes" (rank 0 in the node's
  /// process, each other rank a process the node starts from its own binary,
  /// actors/rank_processes.hpp).
  std::string tensor_parallel_mode = "threads";
  pool_overrides pools;
  engine_overrides engine;
  std::string ssh;  ///< "user@host" for mstar-launch; empty: started on this host

  friend bool operator==(const node_config&, const node_config&) = default;
};

/// A parsed and checked deployment file, every default filled in.
struct deployment_config {
  std::string name;             ///< [a-z0-9-]+, in shm segment names and logs
  std::filesystem::path model;  ///< absolute; empty: the binary's embedded default model
  std::string device = "cpu";   ///< the default for nodes that name none
  /// Tokens per KV page on every node (pages move between nodes whole);
  /// unset: the engine's default.
  std::optional<std::int64_t> page_size;
  auth_config auth;
  http_config http;
  timeouts_config timeouts;
  double lease_s = 30;  ///< how long a prefill node holds published pages
  restart_config restart;
  std::vector<node_config> nodes;  ///< at least one; names unique
  std::string front;               ///< the node running the conductor and HTTP

  /// The node called `name`, or null. The pointer lives as long as `nodes`.
  [[nodiscard]] const node_config* find_node(std::string_view node_name) const noexcept;

  /// The node that runs the conductor and the HTTP listener. Precondition: a
  /// config from load_deployment or parse_deployment (nodes not empty).
  [[nodiscard]] const node_config& front_node() const noexcept;

  friend bool operator==(const deployment_config&, const deployment_config&) = default;
};

/// Reads, parses and checks the deployment file at `file`. Relative paths in
/// it resolve against the file's folder. Errors name the file and the key
/// path ("deploy.yaml: nodes[1].control_port: ..."); nothing throws.
[[nodiscard]] result<deployment_config> load_deployment(const std::filesystem::path& file);

/// Parses and checks a deployment document held in memory; relative paths in
/// it resolve against `base_dir`. Errors name the key path; nothing throws.
/// Credential files are not opened here (read_secret does that), so a file
/// mstar-launch has yet to create does not stop it from reading the rest.
[[nodiscard]] result<deployment_config> parse_deployment(std::string_view yaml,
                                                         const std::filesystem::path& base_dir);

/// `config` as a YAML document, defaults written out, for `--print-config`.
/// parse_deployment reads it back to the same value, except that an inline
/// secret is written as "<redacted>".
[[nodiscard]] std::string to_yaml(const deployment_config& config);

}  // namespace mstar::deploy
