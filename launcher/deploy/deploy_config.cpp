#include "launcher/deploy/deploy_config.hpp"

#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <yaml-cpp/yaml.h>

#include "core/input_file.hpp"
#include "launcher/deploy/internal/checks.hpp"
#include "launcher/deploy/internal/map_reader.hpp"

namespace mstar::deploy {
namespace {

using internal::map_reader;
namespace fs = std::filesystem;

constexpr std::int64_t max_port = 65535;

/// Names go into shm segment names and log lines: short, lowercase, no spaces.
void check_name(map_reader& in, std::string_view key, const std::string& name) {
  const bool ok =
      name.size() <= 63 &&
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
  if (!in.failed() && in.has(key) && !ok)
    in.fail(errc::invalid_argument, key,
            fmt::format("'{}' must be 1 to 63 characters of a-z, 0-9 and '-'", name));
}

void check_device(map_reader& in, std::string_view key, const std::string& device) {
  const bool ok = device == "cpu" || device == "cuda" ||
                  (device.size() > 5 && device.starts_with("cuda:") &&
                   device.find_first_not_of("0123456789", 5) == std::string::npos);
  if (!in.failed() && in.has(key) && !ok)
    in.fail(errc::invalid_argument, key,
            fmt::format("'{}' is not one of cpu, cuda, cuda:N", device));
}

void read_auth(map_reader& in, const fs::path& base, auth_config& out) {
  std::string mode;
  in.require("mode", "secret or tls");
  in.string("mode", mode);
  if (in.failed())
    return;
  if (mode == "secret") {
    out.mode = auth_mode::secret;
    if (in.has("secret") == in.has("secret_file"))
      in.fail(errc::invalid_argument, "secret_file",
              "mode secret needs exactly one of secret_file and secret");
    if (in.has("dir"))
      in.fail(errc::invalid_argument, "dir", "only with mode: tls");
    in.string("secret", out.secret);
    in.path("secret_file", out.secret_file, base);
  } else if (mode == "tls") {
    out.mode = auth_mode::tls;
    for (const auto* key : {"secret", "secret_file"}) {
      if (in.has(key))
        in.fail(errc::invalid_argument, key, "only with mode: secret");
    }
    in.require("dir", "a folder holding ca.pem, cert.pem and key.pem");
    in.path("dir", out.tls_dir, base);
  } else {
    in.fail(errc::invalid_argument, "mode", fmt::format("'{}' is not one of secret, tls", mode));
  }
}

void read_node(map_reader& in, node_config& out) {
  in.expect_keys({"name", "role", "host", "control_port", "device", "tensor_parallel",
                  "tensor_parallel_mode", "pools", "engine", "ssh"});
  in.require("name");
  in.string("name", out.name);
  check_name(in, "name", out.name);
  std::string role_text;
  in.require("role", "prefill, decode or both");
  in.string("role", role_text);
  if (const auto r = parse_role(role_text))
    out.role = *r;
  else if (!in.failed())
    in.fail(errc::invalid_argument, "role",
            fmt::format("'{}' is not one of prefill, decode, both", role_text));
  in.string("host", out.host);
  in.require("control_port", "the node's control-plane port, 1-65535");
  in.integer("control_port", out.control_port, 1, max_port);
  in.string("device", out.device);
  check_device(in, "device", out.device);
  in.integer("tensor_parallel", out.tensor_parallel, 1, 64);
  in.string("tensor_parallel_mode", out.tensor_parallel_mode);
  if (!in.failed() && out.tensor_parallel_mode != "threads" &&
      out.tensor_parallel_mode != "processes") {
    in.fail(errc::invalid_argument, "tensor_parallel_mode",
            fmt::format("'{}' is not one of threads, processes", out.tensor_parallel_mode));
  }
  // A node's ranks each hold their part of the pools, which cannot yet be
  // published to or adopted from another node.
  if (!in.failed() && out.tensor_parallel > 1 && out.role != role::both)
    in.fail(errc::unsupported, "tensor_parallel",
            fmt::format("{} ranks on a {} node are not supported yet: tensor-parallel pools do "
                        "not move between nodes (role both only)",
                        out.tensor_parallel, to_string(out.role)));
  in.section("pools", {"kv_pages", "max_slots", "gpu_memory_fraction", "memory"},
             [&](map_reader& p) {
               p.integer("kv_pages", out.pools.kv_pages, 2, std::int64_t{1} << 24);
               p.integer("max_slots", out.pools.max_slots, 2, std::int64_t{1} << 20);
               p.fraction("gpu_memory_fraction", out.pools.gpu_memory_fraction);
               p.string("memory", out.pools.memory);
               if (!p.failed() && !out.pools.memory.empty() && out.pools.memory != "shared" &&
                   out.pools.memory != "private")
                 p.fail(errc::invalid_argument, "memory",
                        fmt::format("'{}' is not one of shared, private", out.pools.memory));
             });
  in.section("engine", {"max_batched_tokens", "max_running", "schedule"}, [&](map_reader& e) {
    e.integer("max_batched_tokens", out.engine.max_batched_tokens, 1, std::int64_t{1} << 20);
    e.integer("max_running", out.engine.max_running, 1, std::int64_t{1} << 16);
    e.string("schedule", out.engine.schedule);
    if (!e.failed() && !out.engine.schedule.empty() && out.engine.schedule != "sync" &&
        out.engine.schedule != "overlap")
      e.fail(errc::invalid_argument, "schedule",
             fmt::format("'{}' is not one of sync, overlap", out.engine.schedule));
  });
  in.string("ssh", out.ssh);
  // The value becomes an ssh argument: no options smuggled in, no spaces.
  if (!in.failed() &&
      (out.ssh.starts_with('-') || out.ssh.find_first_of(" \t\n") != std::string::npos))
    in.fail(errc::invalid_argument, "ssh",
            fmt::format("'{}' must be a destination like user@host (no spaces, no leading '-')",
                        out.ssh));
}

void read_nodes(map_reader& in, std::vector<node_config>& out) {
  in.require("nodes", "a list with at least one node");
  if (in.failed())
    return;
  const YAML::Node list = in.at("nodes");
  if (!list.IsSequence() || list.size() == 0) {
    in.fail(errc::invalid_argument, "nodes", "expected a list with at least one node");
    return;
  }
  for (std::size_t i = 0; i < list.size() && !in.failed(); ++i) {
    map_reader node_in{list[i], fmt::format("nodes[{}]", i)};
    read_node(node_in, out.emplace_back());
    if (node_in.failed())
      in.fail(*node_in.failure());
  }
}

void read_sections(map_reader& in, const fs::path& base, deployment_config& out) {
  in.section("auth", {"mode", "secret", "secret_file", "dir"},
             [&](map_reader& a) { read_auth(a, base, out.auth); });
  in.section("http", {"host", "port", "api_key_file"}, [&](map_reader& h) {
    h.string("host", out.http.host);
    h.integer("port", out.http.port, 1, max_port);
    h.path("api_key_file", out.http.api_key_file, base);
  });
  in.section("timeouts", {"join_s", "transfer_s", "request_s"}, [&](map_reader& t) {
    t.seconds("join_s", out.timeouts.join_s);
    t.seconds("transfer_s", out.timeouts.transfer_s);
    t.seconds("request_s", out.timeouts.request_s);
  });
  in.section("restart", {"max_retries", "backoff_s"}, [&](map_reader& r) {
    r.integer("max_retries", out.restart.max_retries, 0, 1000);
    r.seconds("backoff_s", out.restart.backoff_s);
  });
}

result<deployment_config> read_document(const YAML::Node& doc, const fs::path& base) {
  if (doc.IsNull())
    return make_error(errc::invalid_argument,
                      "the document is empty; expected a map with deployment, auth and nodes");
  deployment_config out;
  map_reader in{doc, ""};
  // The credential keys live under auth:; say so rather than just "unknown key".
  for (const auto* key : {"secret", "secret_file", "tls"}) {
    if (doc.IsMap() && in.has(key))
      in.fail(errc::invalid_argument, key,
              "belongs under auth: (auth: {mode: secret, secret_file: FILE} or auth: {mode: "
              "tls, dir: DIR})");
  }
  in.expect_keys({"deployment", "model", "device", "page_size", "auth", "http", "timeouts",
                  "lease_s", "restart", "nodes", "front"});
  in.require("deployment", "a name of a-z, 0-9 and '-'");
  in.string("deployment", out.name);
  check_name(in, "deployment", out.name);
  in.path("model", out.model, base);
  in.string("device", out.device);
  check_device(in, "device", out.device);
  in.integer("page_size", out.page_size, 1, 4096);
  in.require("auth", "mode: secret with secret_file or secret, or mode: tls with dir");
  read_sections(in, base, out);
  in.seconds("lease_s", out.lease_s);
  read_nodes(in, out.nodes);
  in.string("front", out.front);
  if (in.failed())
    return *in.failure();

  for (auto& node : out.nodes) {
    if (node.device.empty())
      node.device = out.device;
  }
  if (out.front.empty())
    out.front = out.nodes.front().name;
  if (auto checked = internal::check_deployment(out); !checked)
    return checked.error();
  return out;
}

}  // namespace

std::string_view to_string(role r) noexcept {
  switch (r) {
    case role::prefill:
      return "prefill";
    case role::decode:
      return "decode";
    case role::both:
      return "both";
  }
  return "both";
}

std::optional<role> parse_role(std::string_view text) noexcept {
  for (const role r : {role::prefill, role::decode, role::both}) {
    if (to_string(r) == text)
      return r;
  }
  return std::nullopt;
}

std::string_view to_string(auth_mode m) noexcept {
  switch (m) {
    case auth_mode::secret:
      return "secret";
    case auth_mode::tls:
      return "tls";
  }
  return "secret";
}

const node_config* deployment_config::find_node(std::string_view node_name) const noexcept {
  for (const auto& node : nodes) {
    if (node.name == node_name)
      return &node;
  }
  return nullptr;
}

const node_config& deployment_config::front_node() const noexcept {
  const node_config* node = find_node(front);
  return node != nullptr ? *node : nodes.front();
}

result<deployment_config> parse_deployment(std::string_view yaml, const fs::path& base_dir) {
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(std::string{yaml});
    if (docs.size() > 1)
      return make_error(
          errc::invalid_argument,
          fmt::format("the file holds {} YAML documents; a deployment is one", docs.size()));
    return read_document(docs.empty() ? YAML::Node{} : docs.front(), base_dir);
  } catch (const YAML::ParserException& e) {
    return make_error(errc::parse_error, fmt::format("YAML syntax error at line {}, column {}: {}",
                                                     e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const std::exception& e) {
    // Nothing above should throw once the syntax is good; keep the promise anyway.
    return make_error(errc::internal, fmt::format("reading the deployment failed: {}", e.what()));
  }
}

result<deployment_config> load_deployment(const fs::path& file) {
  // A regular file of bounded size only: a FIFO or a device would hang or fill memory.
  auto text = read_input_file(file, std::uint64_t{16} << 20);
  if (!text)
    return text.error().with_context("the deployment file");
  std::error_code ec;
  const fs::path absolute = fs::absolute(file, ec);
  const fs::path base = (ec ? file : absolute).parent_path();
  auto parsed = parse_deployment(*text, base);
  if (!parsed)
    return parsed.error().with_context(file.string());
  return parsed;
}

}  // namespace mstar::deploy
