#include "models/internal/pipeline_load.hpp"

#include <string>
#include <utility>

#include "core/untrusted_json.hpp"

namespace mstar::models::internal {
namespace {

using json = nlohmann::json;
using step = bpe_tokenizer::state::pre_tokenize_step;

result<void> read_normalizer_node(const tokenizer_json_reporter& r, const json& node,
                                  const std::string& field, std::vector<normal_form>& out) {
  const std::string type = type_of(node);
  if (type == "Sequence") {
    const auto list = node.find("normalizers");
    if (list == node.end() || !list->is_array())
      return r.bad(field + ".normalizers", "not a list");
    for (std::size_t i = 0; i < list->size(); ++i) {
      const auto inner = fmt::format("{}.normalizers[{}]", field, i);
      if (auto ok = read_normalizer_node(r, (*list)[i], inner, out); !ok)
        return ok;
    }
    return {};
  }
  if (const auto form = normal_form_named(type)) {
    out.push_back(*form);
    return {};
  }
  return r.unsupported(field, fmt::format("type '{}' is not supported (NFC, NFD, NFKC, NFKD or "
                                          "a Sequence of them)",
                                          text_excerpt(type)));
}

// A pre-tokenizer step and the field it was read from.
struct step_node {
  const json* node;
  std::string field;
};

// Flattens Sequences into their steps, in order.
result<void> collect_steps(const tokenizer_json_reporter& r, const json& node,
                           const std::string& field, std::vector<step_node>& out) {
  if (type_of(node) != "Sequence") {
    out.push_back({&node, field});
    return {};
  }
  const auto list = node.find("pretokenizers");
  if (list == node.end() || !list->is_array() || list->empty())
    return r.bad(field + ".pretokenizers", "not a non-empty list");
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto inner = fmt::format("{}.pretokenizers[{}]", field, i);
    if (auto ok = collect_steps(r, (*list)[i], inner, out); !ok)
      return ok;
  }
  return {};
}

result<split_behavior> read_behavior(const tokenizer_json_reporter& r, const json& node,
                                     const std::string& field) {
  const auto it = node.find("behavior");
  if (it == node.end() || !it->is_string())
    return r.bad(field + ".behavior", "missing, or not a string");
  const auto name = it->get<std::string>();
  constexpr std::pair<std::string_view, split_behavior> names[] = {
      {"Removed", split_behavior::removed},
      {"Isolated", split_behavior::isolated},
      {"MergedWithPrevious", split_behavior::merged_with_previous},
      {"MergedWithNext", split_behavior::merged_with_next},
      {"Contiguous", split_behavior::contiguous},
  };
  for (const auto& known : names) {
    if (known.first == name)
      return known.second;
  }
  return r.unsupported(field + ".behavior",
                       fmt::format("'{}' is not supported (Removed, Isolated, MergedWithPrevious, "
                                   "MergedWithNext or Contiguous)",
                                   text_excerpt(name)));
}

result<step> read_split(const tokenizer_json_reporter& r, const json& node,
                        const std::string& field) {
  const auto pattern = node.find("pattern");
  const json* text = nullptr;
  bool literal = false;
  if (pattern != node.end() && pattern->is_object() && pattern->size() == 1) {
    if (const auto it = pattern->find("Regex"); it != pattern->end() && it->is_string()) {
      text = &*it;
    } else if (const auto it2 = pattern->find("String");
               it2 != pattern->end() && it2->is_string()) {
      text = &*it2;
      literal = true;
    }
  }
  if (text == nullptr)
    return r.bad(field + ".pattern", "needs {\"Regex\": \"...\"} or {\"String\": \"...\"}");
  auto compiled = regex::compile(text->get<std::string>(),
                                 literal ? regex::syntax::literal : regex::syntax::pattern);
  if (!compiled) {
    return r.bad(fmt::format("{}.pattern.{}", field, literal ? "String" : "Regex"),
                 fmt::format("does not compile (Oniguruma: {})", compiled.error().message()));
  }
  auto behavior = read_behavior(r, node, field);
  if (!behavior)
    return behavior.error();
  auto invert = read_flag(r, node, "invert", false, field);
  if (!invert)
    return invert.error();
  return step{false, split_rule{std::move(*compiled), *behavior, *invert}};
}

result<step> read_byte_level(const tokenizer_json_reporter& r, const json& node,
                             const std::string& field) {
  const auto prefix = read_flag(r, node, "add_prefix_space", false, field);
  if (!prefix)
    return prefix.error();
  const auto use_regex = read_flag(r, node, "use_regex", true, field);
  if (!use_regex)
    return use_regex.error();
  step out{*prefix, std::nullopt};
  if (*use_regex) {
    auto compiled = regex::compile(gpt2_pattern);
    if (!compiled)
      return r.bad(field, fmt::format("GPT-2's pattern: {}", compiled.error().message()));
    out.split = split_rule{std::move(*compiled), split_behavior::isolated, false};
  }
  return out;
}

}  // namespace

result<void> read_normalizer(const tokenizer_json_reporter& r, const json& doc,
                             std::vector<normal_form>& out) {
  const auto normalizer = doc.find("normalizer");
  if (normalizer == doc.end() || normalizer->is_null())
    return {};
  return read_normalizer_node(r, *normalizer, "normalizer", out);
}

result<void> read_pre_tokenizer(const tokenizer_json_reporter& r, const json& doc,
                                std::vector<step>& out) {
  const auto pre = doc.find("pre_tokenizer");
  if (pre == doc.end() || pre->is_null())
    return r.unsupported("pre_tokenizer", "null: not a byte-level tokenizer (need ByteLevel)");
  std::vector<step_node> nodes;
  if (auto ok = collect_steps(r, *pre, "pre_tokenizer", nodes); !ok)
    return ok;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& [node, field] = nodes[i];
    const std::string type = type_of(*node);
    const bool last = i + 1 == nodes.size();
    if (type == "ByteLevel" && !last) {
      return r.unsupported(field,
                           "ByteLevel before another step is not supported (ByteLevel "
                           "must come last)");
    }
    if (type != "Split" && type != "ByteLevel") {
      return r.unsupported(field, fmt::format("type '{}' is not supported (Split, ByteLevel or a "
                                              "Sequence of Splits then ByteLevel)",
                                              text_excerpt(type)));
    }
    auto read = type == "Split" ? read_split(r, *node, field) : read_byte_level(r, *node, field);
    if (!read)
      return read.error();
    out.push_back(std::move(*read));
    if (last && type != "ByteLevel") {
      return r.unsupported(field,
                           "the last step is not ByteLevel: not a byte-level tokenizer "
                           "(need ByteLevel last)");
    }
  }
  return {};
}

result<void> read_decoder(const tokenizer_json_reporter& r, const json& doc) {
  const auto decoder = doc.find("decoder");
  if (decoder != doc.end() && !decoder->is_null() && type_of(*decoder) != "ByteLevel") {
    return r.unsupported("decoder", fmt::format("type '{}' is not supported (ByteLevel)",
                                                text_excerpt(type_of(*decoder))));
  }
  return {};
}

}  // namespace mstar::models::internal
