#include <algorithm>
#include <fmt/format.h>

#include "core/untrusted_json.hpp"
#include "models/internal/bpe_state.hpp"
#include "models/internal/json_text.hpp"
#include "models/internal/pretokenize.hpp"
#include "models/tokenizer.hpp"

namespace mstar::models {
namespace {

using json = nlohmann::json;
using state = bpe_tokenizer::state;

// Messages: "<file>: field '<path>': <reason>".
struct reporter {
  std::string label;

  error bad(std::string_view field, std::string_view reason) const {
    return make_error(errc::parse_error, fmt::format("{}: field '{}': {}", label, field, reason));
  }
  error unsupported(std::string_view field, std::string_view reason) const {
    return make_error(errc::unsupported, fmt::format("{}: field '{}': {}", label, field, reason));
  }
};

std::string type_of(const json& node) {
  const auto it = node.is_object() ? node.find("type") : node.end();
  return it != node.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// A boolean field that may be absent; any other type is an error naming `field`.
result<bool> flag(const reporter& r, const json& node, const char* key, bool fallback,
                  std::string_view field) {
  const auto it = node.find(key);
  if (it == node.end() || it->is_null())
    return fallback;
  if (!it->is_boolean())
    return r.bad(field, fmt::format("'{}' is not true or false", key));
  return it->get<bool>();
}

bool is_unset(const json& node, std::string_view key) {
  const auto it = node.find(key);
  return it == node.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()) ||
         (it->is_boolean() && !it->get<bool>()) || (it->is_number() && it->get<double>() == 0);
}

result<void> read_pre_tokenizer(const reporter& r, const json& doc, state& s) {
  const auto normalizer = doc.find("normalizer");
  if (normalizer != doc.end() && !normalizer->is_null()) {
    return r.unsupported("normalizer", fmt::format("type '{}' is not supported (only null)",
                                                   text_excerpt(type_of(*normalizer))));
  }
  const auto pre = doc.find("pre_tokenizer");
  if (pre == doc.end() || pre->is_null()) {
    return r.unsupported("pre_tokenizer", "null: not a byte-level tokenizer (need ByteLevel)");
  }
  const json* level = &*pre;
  if (type_of(*pre) == "Sequence") {
    const auto list = pre->find("pretokenizers");
    if (list == pre->end() || !list->is_array() || list->size() != 1) {
      return r.unsupported("pre_tokenizer", "a Sequence other than [ByteLevel] is not supported");
    }
    level = &(*list)[0];
  }
  if (type_of(*level) != "ByteLevel") {
    return r.unsupported("pre_tokenizer", fmt::format("type '{}' is not supported (ByteLevel)",
                                                      text_excerpt(type_of(*level))));
  }
  const auto prefix = flag(r, *level, "add_prefix_space", false, "pre_tokenizer");
  if (!prefix)
    return prefix.error();
  const auto regex = flag(r, *level, "use_regex", true, "pre_tokenizer");
  if (!regex)
    return regex.error();
  s.add_prefix_space = *prefix;
  s.use_regex = *regex;
  const auto decoder = doc.find("decoder");
  if (decoder != doc.end() && !decoder->is_null() && type_of(*decoder) != "ByteLevel") {
    return r.unsupported("decoder", fmt::format("type '{}' is not supported (ByteLevel)",
                                                text_excerpt(type_of(*decoder))));
  }
  return {};
}

result<void> read_vocab(const reporter& r, const json& model, state& s) {
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object())
    return r.bad("model.vocab", "not an object");
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() > 0x7FFFFFFFU) {
      return r.bad("model.vocab", fmt::format("id of '{}' is {}, not a non-negative integer",
                                              text_excerpt(token), json_excerpt(id)));
    }
    s.vocab.emplace(token, static_cast<token_id>(id.get<std::uint64_t>()));
  }
  return {};
}

// A merge as its two halves: "a b" or ["a", "b"].
std::optional<std::pair<std::string, std::string>> merge_pair(const json& merge) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return std::pair{merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  if (!merge.is_string())
    return std::nullopt;
  const auto text = merge.get<std::string>();
  const auto space = text.find(' ');
  if (space == std::string::npos || space == 0 || text.find(' ', space + 1) != std::string::npos) {
    return std::nullopt;
  }
  return std::pair{text.substr(0, space), text.substr(space + 1)};
}

result<void> read_merges(const reporter& r, const json& model, state& s) {
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array())
    return r.bad("model.merges", "not a list");
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const auto pair = merge_pair((*merges)[i]);
    const auto field = fmt::format("model.merges[{}]", i);
    if (!pair)
      return r.bad(field,
                   fmt::format("{} is not \"a b\" or [\"a\", \"b\"]", json_excerpt((*merges)[i])));
    for (const auto& part : {pair->first, pair->second, pair->first + pair->second}) {
      if (!s.vocab.contains(part))
        return r.bad(field, fmt::format("'{}' is not in the vocab", text_excerpt(part)));
    }
    s.merge_ranks.emplace(internal::merge_key(pair->first, pair->second),
                          static_cast<std::uint32_t>(i));
  }
  return {};
}

result<void> read_model(const reporter& r, const json& doc, state& s) {
  const auto model = doc.find("model");
  if (model == doc.end() || !model->is_object())
    return r.bad("model", "not an object");
  if (const auto type = type_of(*model); !type.empty() && type != "BPE") {
    return r.unsupported("model.type",
                         fmt::format("'{}' is not supported (BPE)", text_excerpt(type)));
  }
  for (const char* key :
       {"byte_fallback", "continuing_subword_prefix", "end_of_word_suffix", "dropout"}) {
    if (!is_unset(*model, key)) {
      return r.unsupported(fmt::format("model.{}", key), "must be unset for byte-level BPE");
    }
  }
  const auto ignore = flag(r, *model, "ignore_merges", false, "model");
  if (!ignore)
    return ignore.error();
  s.ignore_merges = *ignore;
  if (auto ok = read_vocab(r, *model, s); !ok)
    return ok;
  if (auto ok = read_merges(r, *model, s); !ok)
    return ok;
  const auto unk = model->find("unk_token");
  if (unk != model->end() && unk->is_string()) {
    const auto it = s.vocab.find(unk->get<std::string>());
    if (it == s.vocab.end())
      return r.bad("model.unk_token", "is not in the vocab");
    s.unk = it->second;
  }
  return {};
}

result<void> read_added(const reporter& r, const json& doc, state& s,
                        std::vector<token_id>& special_ids) {
  const auto added = doc.find("added_tokens");
  if (added == doc.end() || added->is_null())
    return {};
  if (!added->is_array())
    return r.bad("added_tokens", "not a list");
  for (std::size_t i = 0; i < added->size(); ++i) {
    const json& item = (*added)[i];
    const auto field = fmt::format("added_tokens[{}]", i);
    if (!item.is_object() || !item.contains("id") || !item["id"].is_number_unsigned() ||
        !item.contains("content") || !item["content"].is_string() ||
        item["content"].get<std::string>().empty()) {
      return r.bad(field, "needs a non-negative 'id' and a non-empty 'content'");
    }
    if (item["id"].get<std::uint64_t>() > 0x7FFFFFFFU)
      return r.bad(field, "'id' is too large");
    const auto id = static_cast<token_id>(item["id"].get<std::uint64_t>());
    const auto is_special = flag(r, item, "special", false, field);
    if (!is_special)
      return is_special.error();
    s.added.push_back({item["content"].get<std::string>(), id});
    if (*is_special)
      special_ids.push_back(id);
  }
  std::stable_sort(s.added.begin(), s.added.end(), [](const auto& a, const auto& b) {
    return a.content.size() > b.content.size();
  });
  return {};
}

// Every id below `bound`: the model's vocabulary when known, else twice the
// entries the file lists (a table at most half empty), so a sparse id in a
// small file cannot make a giant table.
result<std::size_t> check_ids(const reporter& r, const state& s, std::size_t added_count,
                              std::int64_t vocab_size) {
  const std::size_t entries = s.vocab.size() + added_count;
  const auto bound = vocab_size > 0 ? static_cast<std::size_t>(vocab_size) : 2 * entries + 256;
  const auto why =
      vocab_size > 0
          ? fmt::format("the model's vocabulary of {} (config.json vocab_size)", vocab_size)
          : fmt::format(
                "{}, twice the {} entries the file lists (ids that sparse "
                "are refused)",
                bound, entries);
  std::size_t size = 0;
  for (const auto& [token, id] : s.vocab) {
    if (std::size_t{id} >= bound) {
      return r.bad("model.vocab",
                   fmt::format("id {} of '{}' is outside {}", id, text_excerpt(token), why));
    }
    size = std::max<std::size_t>(size, std::size_t{id} + 1);
  }
  for (const auto& token : s.added) {
    if (std::size_t{token.id} >= bound) {
      return r.bad("added_tokens", fmt::format("id {} of '{}' is outside {}", token.id,
                                               text_excerpt(token.content), why));
    }
    size = std::max<std::size_t>(size, std::size_t{token.id} + 1);
  }
  return size;
}

// Decode tables; every vocab spelling must be byte-level (code points of the table).
result<void> build_id_tables(const reporter& r, state& s, const std::vector<token_id>& special_ids,
                             std::int64_t vocab_size) {
  const auto checked = check_ids(r, s, s.added.size(), vocab_size);
  if (!checked)
    return checked.error();
  const std::size_t size = *checked;
  std::vector<bool> special(size);
  for (const token_id id : special_ids)
    special[id] = true;
  s.id_text.assign(size, {});
  s.id_kind.assign(size, state::kind::none);
  for (const auto& [token, id] : s.vocab) {
    std::string bytes;
    for (std::size_t at = 0; at < token.size();) {
      const auto [code_point, length] = internal::decode_utf8(token, at);
      const auto byte = internal::code_point_to_byte(code_point);
      if (!byte)
        return r.bad("model.vocab",
                     fmt::format("'{}' is not byte-level text", text_excerpt(token)));
      bytes.push_back(static_cast<char>(*byte));
      at += length;
    }
    s.id_text[id] = std::move(bytes);
    s.id_kind[id] = state::kind::vocab;
  }
  for (const auto& token : s.added) {
    s.id_text[token.id] = token.content;
    s.id_kind[token.id] = special[token.id] ? state::kind::special : state::kind::added;
  }
  return {};
}

result<void> check_alphabet(const reporter& r, const state& s) {
  if (s.unk)
    return {};
  for (const char32_t code_point : internal::byte_to_code_point()) {
    std::string symbol;
    internal::append_utf8(symbol, code_point);
    if (!s.vocab.contains(symbol)) {
      return r.bad("model.vocab", fmt::format("lacks the byte symbol '{}' and there is no "
                                              "unk_token",
                                              symbol));
    }
  }
  return {};
}

}  // namespace

result<bpe_tokenizer> bpe_tokenizer::parse(std::string_view json_text, std::string_view label,
                                           std::int64_t vocab_size) {
  auto doc = internal::parse_json(json_text, label);
  if (!doc)
    return doc.error();
  const reporter r{std::string{label}};
  if (!doc->is_object())
    return make_error(errc::parse_error, fmt::format("{}: not a JSON object", label));
  auto tables = std::make_unique<state>();
  std::vector<token_id> special;
  if (auto ok = read_pre_tokenizer(r, *doc, *tables); !ok)
    return ok.error();
  if (auto ok = read_model(r, *doc, *tables); !ok)
    return ok.error();
  if (auto ok = read_added(r, *doc, *tables, special); !ok)
    return ok.error();
  if (auto ok = build_id_tables(r, *tables, special, vocab_size); !ok)
    return ok.error();
  if (auto ok = check_alphabet(r, *tables); !ok)
    return ok.error();
  return bpe_tokenizer{std::move(tables)};
}

result<bpe_tokenizer> bpe_tokenizer::load(const std::filesystem::path& path,
                                          std::int64_t vocab_size) {
  auto text = internal::read_text_file(path);
  if (!text)
    return text.error();
  return parse(*text, path.string(), vocab_size);
}

}  // namespace mstar::models
