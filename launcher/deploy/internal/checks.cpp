#include "launcher/deploy/internal/checks.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace mstar::deploy::internal {
namespace {

bool is_loopback(std::string_view host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1" || host == "[::1]";
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return std::ranges::equal(a, b, [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::string node_ref(const deployment_config& config, std::size_t i) {
  return fmt::format("nodes[{}] ({})", i, config.nodes[i].name);
}

result<void> check_names(const deployment_config& config) {
  for (std::size_t i = 0; i < config.nodes.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (config.nodes[i].name == config.nodes[j].name)
        return make_error(errc::invalid_argument,
                          fmt::format("nodes[{}].name: '{}' is already the name of nodes[{}]", i,
                                      config.nodes[i].name, j));
    }
  }
  return {};
}

result<void> check_hosts(const deployment_config& config) {
  for (std::size_t i = 0; i < config.nodes.size(); ++i) {
    const node_config& node = config.nodes[i];
    // Peers dial the control port at `host`: on another machine, loopback reaches no one.
    if (!node.ssh.empty() && is_loopback(node.host))
      return make_error(errc::invalid_argument,
                        fmt::format("nodes[{}].host: {} is a loopback address, but the node runs "
                                    "on another machine (ssh: {}); give an address its peers "
                                    "can reach",
                                    i, node.host, node.ssh));
  }
  return {};
}

result<void> check_ports(const deployment_config& config) {
  const node_config& front = config.front_node();
  for (std::size_t i = 0; i < config.nodes.size(); ++i) {
    const node_config& node = config.nodes[i];
    for (std::size_t j = 0; j < i; ++j) {
      const node_config& other = config.nodes[j];
      if (node.control_port == other.control_port && same_host(node.host, other.host))
        return make_error(errc::invalid_argument,
                          fmt::format("nodes[{}].control_port: {} is already used by {} on {}", i,
                                      node.control_port, node_ref(config, j), other.host));
    }
    if (node.control_port == config.http.port && same_host(node.host, front.host))
      return make_error(errc::invalid_argument,
                        fmt::format("http.port: {} is already the control_port of {} on {}, the "
                                    "front node's host",
                                    config.http.port, node_ref(config, i), node.host));
  }
  return {};
}

result<void> check_roles(const deployment_config& config) {
  const auto any = [&](bool (*can)(role) noexcept) {
    return std::ranges::any_of(config.nodes, [&](const node_config& n) { return can(n.role); });
  };
  std::string roles;
  for (const auto& node : config.nodes)
    roles += fmt::format("{}{}: {}", roles.empty() ? "" : ", ", node.name, to_string(node.role));
  if (!any(&can_prefill))
    return make_error(
        errc::invalid_argument,
        fmt::format("nodes: no node can prefill (role prefill or both); roles: {}", roles));
  if (!any(&can_decode))
    return make_error(
        errc::invalid_argument,
        fmt::format("nodes: no node can decode (role decode or both); roles: {}", roles));
  return {};
}

result<void> check_front(const deployment_config& config) {
  if (config.find_node(config.front) != nullptr)
    return {};
  std::string names;
  for (const auto& node : config.nodes)
    names += fmt::format("{}{}", names.empty() ? "" : ", ", node.name);
  return make_error(errc::invalid_argument,
                    fmt::format("front: '{}' names no node; nodes: {}", config.front, names));
}

result<void> check_timing(const deployment_config& config) {
  // A lease that ends mid-transfer frees pages a decode node is still reading.
  if (config.lease_s < config.timeouts.transfer_s)
    return make_error(errc::invalid_argument,
                      fmt::format("lease_s: {} is shorter than timeouts.transfer_s ({}); published "
                                  "pages could be released while a decode node reads them",
                                  config.lease_s, config.timeouts.transfer_s));
  return {};
}

}  // namespace

bool same_host(std::string_view a, std::string_view b) {
  return equal_ignoring_case(a, b) || (is_loopback(a) && is_loopback(b));
}

result<void> check_deployment(const deployment_config& config) {
  for (auto* check :
       {&check_names, &check_front, &check_hosts, &check_ports, &check_roles, &check_timing}) {
    if (auto checked = check(config); !checked)
      return checked;
  }
  return {};
}

}  // namespace mstar::deploy::internal
