#include <fmt/format.h>
#include <optional>
#include <string>

#include "core/untrusted_json.hpp"
#include "models/internal/config_readers.hpp"

namespace mstar::models::internal {
namespace {

std::optional<layer_kind> from_char(char c) {
  switch (c) {
    case 'M':
      return layer_kind::mamba2;
    case '*':
      return layer_kind::attention;
    case '-':
      return layer_kind::mlp;
    case 'E':
      return layer_kind::moe;
    default:
      return std::nullopt;
  }
}

std::optional<layer_kind> from_name(const std::string& name) {
  if (name == "mamba" || name == "linear_attention")
    return layer_kind::mamba2;
  if (name == "attention" || name == "full_attention")
    return layer_kind::attention;
  if (name == "mlp")
    return layer_kind::mlp;
  if (name == "moe")
    return layer_kind::moe;
  return std::nullopt;
}

result<std::vector<layer_kind>> from_pattern(const json_fields& fields, std::string_view key) {
  const nlohmann::json& value = *fields.find(key);
  if (!value.is_string())
    return fields.fail(key, "expected a string such as \"M*M-\"");
  const auto text = value.get<std::string>();
  std::vector<layer_kind> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto kind = from_char(text[i]);
    if (!kind) {
      return fields.fail(key, fmt::format("character '{}' at {} is not a layer (M Mamba-2, * "
                                          "attention, - MLP, E MoE)",
                                          text[i], i));
    }
    out.push_back(*kind);
  }
  return out;
}

result<std::vector<layer_kind>> from_list(const json_fields& fields, std::string_view key) {
  const nlohmann::json& value = *fields.find(key);
  if (!value.is_array())
    return fields.fail(key, "expected a list of layer type names");
  std::vector<layer_kind> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto kind = value[i].is_string() ? from_name(value[i].get<std::string>()) : std::nullopt;
    if (!kind) {
      return fields.fail(key, fmt::format("entry {} is {}, not one of \"mamba\", \"attention\", "
                                          "\"mlp\", \"moe\" (or \"linear_attention\", "
                                          "\"full_attention\")",
                                          i, json_excerpt(value[i])));
    }
    out.push_back(*kind);
  }
  return out;
}

std::string as_pattern(const std::vector<layer_kind>& layers) {
  std::string out;
  for (const layer_kind kind : layers)
    out.push_back(pattern_char(kind));
  return out;
}

}  // namespace

result<std::vector<layer_kind>> read_layer_pattern(const json_fields& fields) {
  std::optional<std::vector<layer_kind>> layers;
  std::string_view source;
  for (const std::string_view key :
       {"layers_block_type", "layer_types", "hybrid_override_pattern"}) {
    if (!fields.has(key))
      continue;
    auto read =
        key == "hybrid_override_pattern" ? from_pattern(fields, key) : from_list(fields, key);
    if (!read)
      return read.error();
    if (layers && *layers != *read) {
      return fields.fail(key, fmt::format("gives layers \"{}\" but '{}' gives \"{}\"",
                                          as_pattern(*read), source, as_pattern(*layers)));
    }
    if (!layers)
      source = key;
    layers = std::move(*read);
  }
  if (!layers) {
    return fields.fail("hybrid_override_pattern",
                       "missing: the config has neither 'hybrid_override_pattern' nor "
                       "'layers_block_type'");
  }
  if (layers->empty())
    return fields.fail(source, "lists no layers");
  auto declared = fields.optional_integer("num_hidden_layers", std::nullopt);
  if (!declared)
    return declared.error();
  if (*declared && **declared != static_cast<std::int64_t>(layers->size())) {
    return fields.fail("num_hidden_layers", fmt::format("is {} but '{}' has {} layers", **declared,
                                                        source, layers->size()));
  }
  return std::move(*layers);
}

}  // namespace mstar::models::internal
