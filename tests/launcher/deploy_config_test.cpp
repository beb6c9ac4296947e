// The deployment file: defaults, every rule's message naming its key, the
// shipped examples.
#include "launcher/deploy/deploy_config.hpp"

#include <gtest/gtest.h>
#include <string>
#include <string_view>

namespace mstar::deploy {
namespace {

namespace fs = std::filesystem;

// The smallest valid deployment; tests append or replace lines of it.
const std::string minimal = R"(deployment: pd-test
auth: {mode: secret, secret: "0123456789abcdef"}
nodes:
  - {name: prefill-0, role: prefill, control_port: 7101}
  - {name: decode-0, role: decode, control_port: 7102}
)";

std::string replaced(std::string text, std::string_view from, std::string_view to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

/// Passes when parsing `yaml` fails with a message containing every needle.
::testing::AssertionResult fails_with(std::string_view yaml,
                                      std::initializer_list<std::string_view> needles) {
  const auto parsed = parse_deployment(yaml, "/srv/deploy");
  if (parsed)
    return ::testing::AssertionFailure() << "parsed without error:\n" << yaml;
  const std::string& message = parsed.error().message();
  for (const auto needle : needles) {
    if (message.find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << needle << "' not in: " << message;
  }
  return ::testing::AssertionSuccess() << message;
}

TEST(deploy_config, a_minimal_file_gets_every_default) {
  const auto parsed = parse_deployment(minimal, "/srv/deploy");
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  const deployment_config& c = *parsed;
  EXPECT_EQ(c.name, "pd-test");
  EXPECT_TRUE(c.model.empty());
  EXPECT_EQ(c.device, "cpu");
  EXPECT_FALSE(c.page_size);
  EXPECT_EQ(c.auth.mode, auth_mode::secret);
  EXPECT_EQ(c.auth.secret, "0123456789abcdef");
  EXPECT_EQ(c.http, http_config{});
  EXPECT_EQ(c.timeouts, timeouts_config{});
  EXPECT_EQ(c.lease_s, 30);
  EXPECT_EQ(c.restart, restart_config{});
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[1].role, role::decode);
  EXPECT_EQ(c.nodes[1].host, "127.0.0.1");
  EXPECT_EQ(c.nodes[1].control_port, 7102);
  EXPECT_EQ(c.nodes[1].device, "cpu");
  EXPECT_EQ(c.front, "prefill-0");
  EXPECT_EQ(&c.front_node(), &c.nodes[0]);
  EXPECT_EQ(c.find_node("decode-0"), &c.nodes[1]);
  EXPECT_EQ(c.find_node("decode-9"), nullptr);
}

TEST(deploy_config, reads_every_key_and_resolves_relative_paths_against_the_base) {
  const std::string yaml = R"(deployment: full
model: ../models/m
device: cuda:1
page_size: 64
auth: {mode: secret, secret_file: keys/secret.txt}
http: {host: 0.0.0.0, port: 9000, api_key_file: /etc/mstar/api-key}
timeouts: {join_s: 5, transfer_s: 2.5, request_s: 60}
lease_s: 10
restart: {max_retries: 0, backoff_s: 0.5}
nodes:
  - name: p
    role: both
    host: 10.0.0.1
    control_port: 7000
    device: cpu
    pools: {kv_pages: 4096, max_slots: 65}
    engine: {max_batched_tokens: 512, max_running: 64}
    ssh: me@gpu-a
  - {name: d, role: decode, host: 10.0.0.2, control_port: 7000}
front: d
)";
  const auto parsed = parse_deployment(yaml, "/srv/deploy");
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  const deployment_config& c = *parsed;
  EXPECT_EQ(c.model, fs::path{"/srv/models/m"});
  EXPECT_EQ(c.page_size, 64);
  EXPECT_EQ(c.auth.secret_file, fs::path{"/srv/deploy/keys/secret.txt"});
  EXPECT_EQ(c.http.api_key_file, fs::path{"/etc/mstar/api-key"});
  EXPECT_EQ(c.http.port, 9000);
  EXPECT_EQ(c.timeouts.transfer_s, 2.5);
  EXPECT_EQ(c.restart.max_retries, 0);
  EXPECT_EQ(c.nodes[0].device, "cpu");
  EXPECT_EQ(c.nodes[1].device, "cuda:1");
  EXPECT_EQ(c.nodes[0].pools.kv_pages, 4096);
  EXPECT_EQ(c.nodes[0].engine.max_running, 64);
  EXPECT_EQ(c.nodes[0].ssh, "me@gpu-a");
  EXPECT_EQ(c.front_node().name, "d");
}

TEST(deploy_config, a_yaml_syntax_error_names_line_and_column) {
  const auto parsed = parse_deployment("deployment: x\nnodes: [a, b\n", "/");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().code(), errc::parse_error);
  EXPECT_NE(parsed.error().message().find("line 3, column 1"), std::string::npos)
      << parsed.error().message();
  EXPECT_TRUE(fails_with("deployment: x\n  bad: indent\n", {"YAML syntax error at line 2"}));
}

TEST(deploy_config, an_empty_or_non_map_document_is_refused) {
  EXPECT_TRUE(fails_with("", {"the document is empty"}));
  EXPECT_TRUE(fails_with("- a\n- b\n", {"the document: expected a map, got a list"}));
}

TEST(deploy_config, unknown_keys_are_named_with_the_allowed_ones_at_every_level) {
  EXPECT_TRUE(
      fails_with(minimal + "replicas: 2\n", {"replicas: unknown key", "deployment, model"}));
  EXPECT_TRUE(fails_with(minimal + "http: {hots: x}\n", {"http.hots: unknown key", "host, port"}));
  EXPECT_TRUE(fails_with(minimal + "timeouts: {join: 1}\n", {"timeouts.join: unknown key"}));
  EXPECT_TRUE(fails_with(minimal + "restart: {retries: 1}\n", {"restart.retries: unknown key"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "mode: secret,", "mode: secret, token: x,"),
                         {"auth.token: unknown key", "mode, secret, secret_file, dir"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, gpu: 1,"),
                         {"nodes[1].gpu: unknown key", "name, role, host, control_port"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, pools: {pages: 1},"),
                         {"nodes[1].pools.pages: unknown key", "kv_pages, max_slots"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, engine: {batch: 1},"),
                         {"nodes[1].engine.batch: unknown key", "max_batched_tokens"}));
}

TEST(deploy_config, credentials_outside_auth_are_pointed_there) {
  EXPECT_TRUE(fails_with(minimal + "secret_file: secret.txt\n",
                         {"secret_file: belongs under auth:", "mode: secret"}));
}

TEST(deploy_config, a_second_yaml_document_is_refused) {
  EXPECT_TRUE(fails_with(minimal + "---\n" + minimal, {"the file holds 2 YAML documents"}));
}

TEST(deploy_config, a_key_given_twice_is_refused) {
  EXPECT_TRUE(fails_with(minimal + "lease_s: 40\nlease_s: 50\n", {"lease_s: given twice"}));
}

TEST(deploy_config, missing_required_keys_are_named) {
  EXPECT_TRUE(fails_with(replaced(minimal, "deployment: pd-test\n", ""), {"deployment: missing"}));
  EXPECT_TRUE(
      fails_with(replaced(minimal, "auth: {mode: secret, secret: \"0123456789abcdef\"}\n", ""),
                 {"auth: missing"}));
  EXPECT_TRUE(fails_with("deployment: x\nauth: {mode: tls, dir: c}\n", {"nodes: missing"}));
  EXPECT_TRUE(fails_with("deployment: x\nauth: {mode: tls, dir: c}\nnodes: []\n",
                         {"nodes: expected a list with at least one node"}));
  EXPECT_TRUE(fails_with(replaced(minimal, ", control_port: 7102", ""),
                         {"nodes[1].control_port: missing"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode, ", ""),
                         {"nodes[1].role: missing", "prefill, decode or both"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "name: decode-0, ", ""), {"nodes[1].name: missing"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "mode: secret, ", ""), {"auth.mode: missing"}));
}

TEST(deploy_config, wrong_types_are_named_with_what_was_expected) {
  EXPECT_TRUE(fails_with(replaced(minimal, "7102", "seven"),
                         {"nodes[1].control_port: expected an integer, got 'seven'"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "7102", "7102.5"),
                         {"nodes[1].control_port: expected an integer"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "deployment: pd-test", "deployment: {a: 1}"),
                         {"deployment: expected a string, got a map"}));
  EXPECT_TRUE(fails_with(minimal + "timeouts: {join_s: soon}\n",
                         {"timeouts.join_s: expected a number of seconds, got 'soon'"}));
  EXPECT_TRUE(fails_with(minimal + "http: [1, 2]\n", {"http: expected a map, got a list"}));
  EXPECT_TRUE(fails_with(minimal + "http: {port: [8000]}\n",
                         {"http.port: expected an integer, got a list"}));
  EXPECT_TRUE(fails_with(minimal + "nodes2: x\n", {"nodes2: unknown key"}));
  EXPECT_TRUE(fails_with("deployment: x\nauth: {mode: tls, dir: c}\nnodes: {a: 1}\n",
                         {"nodes: expected a list"}));
  EXPECT_TRUE(fails_with("deployment: x\nauth: {mode: tls, dir: c}\nnodes: [7]\n",
                         {"nodes[0]: expected a map, got a scalar"}));
  EXPECT_TRUE(fails_with(minimal + "front:\n", {"front: expected a string, got nothing"}));
}

TEST(deploy_config, out_of_range_values_are_named_with_the_range) {
  EXPECT_TRUE(
      fails_with(replaced(minimal, "7102", "0"), {"nodes[1].control_port: 0 is outside 1..65535"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "7102", "70000"), {"nodes[1].control_port: 70000"}));
  EXPECT_TRUE(fails_with(minimal + "http: {port: 0}\n", {"http.port: 0 is outside 1..65535"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, pools: {kv_pages: 0},"),
                         {"nodes[1].pools.kv_pages: 0 is outside"}));
  EXPECT_TRUE(
      fails_with(replaced(minimal, "role: decode,", "role: decode, pools: {max_slots: -4},"),
                 {"nodes[1].pools.max_slots: -4 is outside"}));
  EXPECT_TRUE(
      fails_with(replaced(minimal, "role: decode,", "role: decode, engine: {max_running: 0},"),
                 {"nodes[1].engine.max_running: 0 is outside"}));
  EXPECT_TRUE(fails_with(minimal + "page_size: 0\n", {"page_size: 0 is outside 1..4096"}));
  EXPECT_TRUE(fails_with(minimal + "timeouts: {transfer_s: 0}\n",
                         {"timeouts.transfer_s: 0 must be greater than 0"}));
  EXPECT_TRUE(fails_with(minimal + "timeouts: {request_s: -1}\n", {"timeouts.request_s: -1"}));
  EXPECT_TRUE(fails_with(minimal + "lease_s: inf\n", {"lease_s: inf must be a finite number"}));
  EXPECT_TRUE(fails_with(minimal + "restart: {backoff_s: 0}\n", {"restart.backoff_s: 0 must be"}));
  EXPECT_TRUE(fails_with(minimal + "restart: {max_retries: -1}\n", {"restart.max_retries: -1"}));
}

TEST(deploy_config, gpu_memory_fraction_is_a_number_in_the_unit_interval) {
  const auto parsed = parse_deployment(
      replaced(minimal, "role: decode,", "role: decode, pools: {gpu_memory_fraction: 0.75},"),
      "/srv/deploy");
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(parsed->nodes[1].pools.gpu_memory_fraction, 0.75);
  EXPECT_FALSE(parsed->nodes[0].pools.gpu_memory_fraction.has_value());
  for (const char* bad : {"0", "-0.5", "1.5", "inf"}) {
    EXPECT_TRUE(fails_with(
        replaced(minimal, "role: decode,",
                 std::string{"role: decode, pools: {gpu_memory_fraction: "} + bad + "},"),
        {"nodes[1].pools.gpu_memory_fraction: ", bad, "must be in (0, 1]"}));
  }
  EXPECT_TRUE(fails_with(
      replaced(minimal, "role: decode,", "role: decode, pools: {gpu_memory_fraction: most},"),
      {"nodes[1].pools.gpu_memory_fraction: expected a number in (0, 1], got 'most'"}));
}

TEST(deploy_config, tensor_parallel_ranks_only_on_nodes_whose_pools_stay_home) {
  const auto parsed = parse_deployment(
      replaced(minimal, "role: decode,", "role: decode, tensor_parallel: 1,"), "/srv/deploy");
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message();
  EXPECT_EQ(parsed->nodes[1].tensor_parallel, 1);
  EXPECT_EQ(parsed->nodes[0].tensor_parallel, 1);  // the default
  const auto both = parse_deployment(
      replaced(minimal, "role: decode,", "role: both, device: cuda, tensor_parallel: 2,"),
      "/srv/deploy");
  ASSERT_TRUE(both.has_value()) << both.error().message();
  EXPECT_EQ(both->nodes[1].tensor_parallel, 2);
  EXPECT_EQ(both->nodes[1].tensor_parallel_mode, "threads");  // the default
  const auto processes =
      parse_deployment(replaced(minimal, "role: decode,",
                                "role: both, tensor_parallel: 2, tensor_parallel_mode: processes,"),
                       "/srv/deploy");
  ASSERT_TRUE(processes.has_value()) << processes.error().message();
  EXPECT_EQ(processes->nodes[1].tensor_parallel_mode, "processes");
  const auto again = parse_deployment(to_yaml(*processes), "/srv/deploy");
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(again->nodes, processes->nodes);  // (an inline secret is never printed)
  EXPECT_TRUE(
      fails_with(replaced(minimal, "role: decode,",
                          "role: both, tensor_parallel: 2, tensor_parallel_mode: forks,"),
                 {"nodes[1].tensor_parallel_mode: 'forks' is not one of threads, processes"}));
  EXPECT_TRUE(fails_with(
      replaced(minimal, "role: decode,", "role: decode, device: cuda, tensor_parallel: 2,"),
      {"nodes[1].tensor_parallel: 2 ranks on a decode node are not supported yet",
       "role both only"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, tensor_parallel: 0,"),
                         {"nodes[1].tensor_parallel"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, tensor_parallel: two,"),
                         {"nodes[1].tensor_parallel"}));
}

TEST(deploy_config, names_roles_and_devices_must_be_well_formed) {
  EXPECT_TRUE(fails_with(replaced(minimal, "pd-test", "PD Test"),
                         {"deployment: 'PD Test' must be 1 to 63 characters of a-z, 0-9 and '-'"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "decode-0", "decode_0"), {"nodes[1].name: 'decode_0'"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode", "role: generate"),
                         {"nodes[1].role: 'generate' is not one of prefill, decode, both"}));
  EXPECT_TRUE(fails_with(minimal + "device: gpu\n", {"device: 'gpu' is not one of cpu, cuda"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, device: 'cuda:x',"),
                         {"nodes[1].device: 'cuda:x'"}));
  EXPECT_TRUE(
      fails_with(replaced(minimal, "role: decode,", "role: decode, engine: {schedule: async},"),
                 {"nodes[1].engine.schedule: 'async' is not one of sync, overlap"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, pools: {memory: gpu},"),
                         {"nodes[1].pools.memory: 'gpu' is not one of shared, private"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, ssh: -oProxyCommand=x,"),
                         {"nodes[1].ssh: '-oProxyCommand=x' must be a destination"}));
}

TEST(deploy_config, duplicate_node_names_are_refused) {
  EXPECT_TRUE(fails_with(replaced(minimal, "decode-0", "prefill-0"),
                         {"nodes[1].name: 'prefill-0' is already the name of nodes[0]"}));
}

TEST(deploy_config, control_ports_collide_only_on_one_host) {
  EXPECT_TRUE(fails_with(
      replaced(minimal, "7102", "7101"),
      {"nodes[1].control_port: 7101 is already used by nodes[0] (prefill-0) on 127.0.0.1"}));
  // localhost and 127.0.0.1 are one machine.
  EXPECT_TRUE(fails_with(replaced(replaced(minimal, "7102", "7101"), "role: decode,",
                                  "role: decode, host: localhost,"),
                         {"nodes[1].control_port: 7101 is already used by nodes[0]"}));
  const auto other_host = replaced(replaced(minimal, "7102", "7101"), "role: decode,",
                                   "role: decode, host: 10.0.0.2, ssh: me@b,");
  EXPECT_TRUE(parse_deployment(other_host, "/"));
}

TEST(deploy_config, the_http_port_collides_with_control_ports_on_the_front_host) {
  EXPECT_TRUE(fails_with(minimal + "http: {port: 7102}\n",
                         {"http.port: 7102 is already the control_port of nodes[1] (decode-0)"}));
  // decode-0 on another host: its port 8000 is free on the front's host.
  const auto elsewhere = replaced(replaced(minimal, "7102", "8000"), "role: decode,",
                                  "role: decode, host: 10.0.0.2, ssh: me@b,");
  EXPECT_TRUE(parse_deployment(elsewhere, "/"));
}

TEST(deploy_config, a_deployment_needs_a_node_for_prefill_and_one_for_decode) {
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode", "role: prefill"),
                         {"nodes: no node can decode", "decode-0: prefill"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "role: prefill", "role: decode"),
                         {"nodes: no node can prefill"}));
  const auto both =
      replaced(replaced(minimal, "role: prefill", "role: both"), "role: decode", "role: both");
  EXPECT_TRUE(parse_deployment(both, "/"));
}

TEST(deploy_config, front_must_name_a_node) {
  EXPECT_TRUE(fails_with(minimal + "front: decode-1\n",
                         {"front: 'decode-1' names no node; nodes: prefill-0, decode-0"}));
}

TEST(deploy_config, auth_takes_exactly_one_credential_of_its_mode) {
  EXPECT_TRUE(fails_with(replaced(minimal, "mode: secret,", "mode: secret, secret_file: s,"),
                         {"auth.secret_file: mode secret needs exactly one"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "mode: secret,", "mode: secret, dir: certs,"),
                         {"auth.dir: only with mode: tls"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "mode: secret,", "mode: tls,"),
                         {"auth.secret: only with mode: secret"}));
  EXPECT_TRUE(
      fails_with(replaced(minimal, "mode: secret, secret: \"0123456789abcdef\"", "mode: tls"),
                 {"auth.dir: missing"}));
  EXPECT_TRUE(fails_with(replaced(minimal, "mode: secret", "mode: password"),
                         {"auth.mode: 'password' is not one of secret, tls"}));
  const auto tls = parse_deployment(
      replaced(minimal, "mode: secret, secret: \"0123456789abcdef\"", "mode: tls, dir: certs/"),
      "/srv/deploy");
  ASSERT_TRUE(tls) << tls.error().to_string();
  EXPECT_EQ(tls->auth.mode, auth_mode::tls);
  EXPECT_EQ(tls->auth.tls_dir, fs::path{"/srv/deploy/certs/"});
}

TEST(deploy_config, a_remote_node_cannot_listen_on_loopback) {
  EXPECT_TRUE(fails_with(replaced(minimal, "role: decode,", "role: decode, ssh: me@b,"),
                         {"nodes[1].host: 127.0.0.1 is a loopback address", "ssh: me@b"}));
}

TEST(deploy_config, the_lease_must_outlast_a_transfer) {
  EXPECT_TRUE(fails_with(minimal + "lease_s: 10\n",
                         {"lease_s: 10 is shorter than timeouts.transfer_s (30)"}));
}

TEST(deploy_config, load_names_the_file_in_every_error) {
  const auto missing = load_deployment("/nonexistent/deploy.yaml");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::not_found);
  EXPECT_NE(missing.error().message().find("/nonexistent/deploy.yaml"), std::string::npos);
}

TEST(deploy_config, to_yaml_reads_back_to_the_same_config) {
  const std::string yaml =
      replaced(replaced(minimal, "secret: \"0123456789abcdef\"", "secret_file: s"), "role: decode,",
               "role: decode, pools: {kv_pages: 64, gpu_memory_fraction: 0.85, memory: private}, "
               "engine: {max_running: 2, "
               "schedule: sync},") +
      "model: m\npage_size: 16\ntimeouts: {transfer_s: 0.1}\n";
  const auto first = parse_deployment(yaml, "/srv");
  ASSERT_TRUE(first) << first.error().to_string();
  const std::string printed = to_yaml(*first);
  const auto again = parse_deployment(printed, "/elsewhere");
  ASSERT_TRUE(again) << again.error().to_string() << "\n" << printed;
  EXPECT_EQ(*again, *first) << printed;
}

TEST(deploy_config, to_yaml_never_prints_an_inline_secret) {
  const auto parsed = parse_deployment(minimal, "/");
  ASSERT_TRUE(parsed);
  const std::string printed = to_yaml(*parsed);
  EXPECT_EQ(printed.find("0123456789abcdef"), std::string::npos) << printed;
  EXPECT_NE(printed.find("<redacted>"), std::string::npos) << printed;
}

TEST(deploy_config, roles_read_back_from_their_names) {
  for (const role r : {role::prefill, role::decode, role::both})
    EXPECT_EQ(parse_role(to_string(r)), r);
  EXPECT_FALSE(parse_role("Prefill"));
  EXPECT_TRUE(can_prefill(role::both) && can_decode(role::both));
  EXPECT_FALSE(can_prefill(role::decode) || can_decode(role::prefill));
}

TEST(deploy_config, the_shipped_examples_parse) {
  const fs::path dir = MSTAR_LAUNCHER_EXAMPLES_DIR;
  for (const char* name : {"local.yaml", "pd-local.yaml", "pd-two-hosts.yaml"}) {
    const auto parsed = load_deployment(dir / name);
    EXPECT_TRUE(parsed) << name << ": " << parsed.error().to_string();
  }
  const auto local = load_deployment(dir / "local.yaml");
  ASSERT_TRUE(local);
  EXPECT_EQ(local->nodes.size(), 1u);
  EXPECT_EQ(local->nodes[0].role, role::both);
  EXPECT_EQ(local->auth.secret_file, dir / "secret.txt");

  const auto pd = load_deployment(dir / "pd-local.yaml");
  ASSERT_TRUE(pd);
  ASSERT_EQ(pd->nodes.size(), 2u);
  EXPECT_EQ(pd->nodes[0].role, role::prefill);
  EXPECT_EQ(pd->nodes[1].role, role::decode);

  const auto two = load_deployment(dir / "pd-two-hosts.yaml");
  ASSERT_TRUE(two);
  ASSERT_EQ(two->nodes.size(), 2u);
  EXPECT_NE(two->nodes[0].host, two->nodes[1].host);
  EXPECT_FALSE(two->nodes[0].ssh.empty());
  EXPECT_FALSE(two->nodes[1].ssh.empty());
}

}  // namespace
}  // namespace mstar::deploy
