// to_yaml: a deployment back to YAML, every default written out.
#include <yaml-cpp/yaml.h>

#include "launcher/deploy/deploy_config.hpp"

namespace mstar::deploy {
namespace {

template <class T>
void emit_if(YAML::Emitter& out, const char* key, const std::optional<T>& value) {
  if (value)
    out << YAML::Key << key << YAML::Value << *value;
}

void emit_auth(YAML::Emitter& out, const auth_config& auth) {
  out << YAML::Key << "auth" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mode" << YAML::Value << std::string{to_string(auth.mode)};
  if (auth.mode == auth_mode::tls)
    out << YAML::Key << "dir" << YAML::Value << auth.tls_dir.string();
  else if (!auth.secret_file.empty())
    out << YAML::Key << "secret_file" << YAML::Value << auth.secret_file.string();
  else
    out << YAML::Key << "secret" << YAML::Value << "<redacted>";
  out << YAML::EndMap;
}

void emit_node(YAML::Emitter& out, const node_config& node) {
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << node.name;
  out << YAML::Key << "role" << YAML::Value << std::string{to_string(node.role)};
  out << YAML::Key << "host" << YAML::Value << node.host;
  out << YAML::Key << "control_port" << YAML::Value << node.control_port;
  out << YAML::Key << "device" << YAML::Value << node.device;
  if (node.tensor_parallel != 1)
    out << YAML::Key << "tensor_parallel" << YAML::Value << node.tensor_parallel;
  if (node.tensor_parallel_mode != "threads")
    out << YAML::Key << "tensor_parallel_mode" << YAML::Value << node.tensor_parallel_mode;
  if (node.pools != pool_overrides{}) {
    out << YAML::Key << "pools" << YAML::Value << YAML::BeginMap;
    emit_if(out, "kv_pages", node.pools.kv_pages);
    emit_if(out, "max_slots", node.pools.max_slots);
    emit_if(out, "gpu_memory_fraction", node.pools.gpu_memory_fraction);
    if (!node.pools.memory.empty())
      out << YAML::Key << "memory" << YAML::Value << node.pools.memory;
    out << YAML::EndMap;
  }
  if (node.engine != engine_overrides{}) {
    out << YAML::Key << "engine" << YAML::Value << YAML::BeginMap;
    emit_if(out, "max_batched_tokens", node.engine.max_batched_tokens);
    emit_if(out, "max_running", node.engine.max_running);
    if (!node.engine.schedule.empty())
      out << YAML::Key << "schedule" << YAML::Value << node.engine.schedule;
    out << YAML::EndMap;
  }
  if (!node.ssh.empty())
    out << YAML::Key << "ssh" << YAML::Value << node.ssh;
  out << YAML::EndMap;
}

}  // namespace

std::string to_yaml(const deployment_config& config) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << YAML::BeginMap;
  out << YAML::Key << "deployment" << YAML::Value << config.name;
  if (!config.model.empty())
    out << YAML::Key << "model" << YAML::Value << config.model.string();
  out << YAML::Key << "device" << YAML::Value << config.device;
  emit_if(out, "page_size", config.page_size);
  emit_auth(out, config.auth);
  out << YAML::Key << "http" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "host" << YAML::Value << config.http.host;
  out << YAML::Key << "port" << YAML::Value << config.http.port;
  if (!config.http.api_key_file.empty())
    out << YAML::Key << "api_key_file" << YAML::Value << config.http.api_key_file.string();
  out << YAML::EndMap;
  out << YAML::Key << "timeouts" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "join_s" << YAML::Value << config.timeouts.join_s;
  out << YAML::Key << "transfer_s" << YAML::Value << config.timeouts.transfer_s;
  out << YAML::Key << "request_s" << YAML::Value << config.timeouts.request_s;
  out << YAML::EndMap;
  out << YAML::Key << "lease_s" << YAML::Value << config.lease_s;
  out << YAML::Key << "restart" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_retries" << YAML::Value << config.restart.max_retries;
  out << YAML::Key << "backoff_s" << YAML::Value << config.restart.backoff_s;
  out << YAML::EndMap;
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const auto& node : config.nodes)
    emit_node(out, node);
  out << YAML::EndSeq;
  out << YAML::Key << "front" << YAML::Value << config.front;
  out << YAML::EndMap;
  return std::string{out.c_str()} + "\n";
}

}  // namespace mstar::deploy
