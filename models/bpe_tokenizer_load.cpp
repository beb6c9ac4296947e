#include <algorithm>
#include <fmt/format.h>
#include <unordered_map>

#include "core/untrusted_json.hpp"
#include "models/internal/bpe_state.hpp"
#include "models/internal/json_text.hpp"
#include "models/internal/pipeline_load.hpp"
#include "models/internal/pretokenize.hpp"
#include "models/internal/tokenizer_json.hpp"
#include "models/tokenizer.hpp"

namespace mstar::models {
namespace {

using json = nlohmann::json;
using state = bpe_tokenizer::state;

using reporter = internal::tokenizer_json_reporter;
using internal::read_flag;
using internal::type_of;

bool is_unset(const json& node, std::string_view key) {
  const auto it = node.find(key);
  return it == node.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()) ||
         (it->is_boolean() && !it->get<bool>()) || (it->is_number() && it->get<double>() == 0);
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
    token_id ids[3] = {};
    const std::string parts[3] = {pair->first, pair->second, pair->first + pair->second};
    for (int k = 0; k < 3; ++k) {
      const auto it = s.vocab.find(parts[k]);
      if (it == s.vocab.end())
        return r.bad(field, fmt::format("'{}' is not in the vocab", text_excerpt(parts[k])));
      ids[k] = it->second;
    }
    s.merges.add(ids[0], ids[1], {static_cast<std::uint32_t>(i), ids[2]});
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
  const auto ignore = read_flag(r, *model, "ignore_merges", false, "model");
  if (!ignore)
    return ignore.error();
  s.ignore_merges = *ignore;
  if (auto ok = read_vocab(r, *model, s); !ok)
    return ok;
  if (auto ok = read_merges(r, *model, s); !ok)
    return ok;
  for (unsigned b = 0; b < 256; ++b) {
    std::string symbol;
    internal::append_utf8(symbol, internal::byte_to_code_point()[b]);
    if (const auto it = s.vocab.find(symbol); it != s.vocab.end())
      s.byte_ids[b] = it->second;
  }
  const auto unk = model->find("unk_token");
  if (unk != model->end() && unk->is_string()) {
    const auto it = s.vocab.find(unk->get<std::string>());
    if (it == s.vocab.end())
      return r.bad("model.unk_token", "is not in the vocab");
    s.unk = it->second;
  }
  return {};
}

// One entry of added_tokens as the file gives it.
struct listed_added {
  internal::added_token_rule rule;  // content as listed; id as listed
  bool special = false;
  bool normalized = false;
};

// `normalized` defaults to the opposite of `special`, as in `tokenizers`.
result<listed_added> read_added_token(const reporter& r, const json& item,
                                      const std::string& field) {
  if (!item.is_object() || !item.contains("id") || !item["id"].is_number_unsigned() ||
      !item.contains("content") || !item["content"].is_string() ||
      item["content"].get<std::string>().empty()) {
    return r.bad(field, "needs a non-negative 'id' and a non-empty 'content'");
  }
  if (item["id"].get<std::uint64_t>() > 0x7FFFFFFFU)
    return r.bad(field, "'id' is too large");
  const auto special = read_flag(r, item, "special", false, field);
  if (!special)
    return special.error();
  const auto normalized = read_flag(r, item, "normalized", !*special, field);
  const auto single_word = read_flag(r, item, "single_word", false, field);
  const auto lstrip = read_flag(r, item, "lstrip", false, field);
  const auto rstrip = read_flag(r, item, "rstrip", false, field);
  for (const auto* read : {&normalized, &single_word, &lstrip, &rstrip}) {
    if (!*read)
      return read->error();
  }
  return listed_added{
      {item["content"].get<std::string>(), static_cast<token_id>(item["id"].get<std::uint64_t>()),
       *single_word, *lstrip, *rstrip},
      *special,
      *normalized};
}

// added_tokens, after the model and the normalizer. Each token takes the id
// `tokenizers` gives it when it loads the file: its vocab id when the vocab
// spells its content, else the next id after the vocab's entries, in the
// file's order (the listed id only has to be well formed: real files agree).
// A content listed twice keeps its first id and its last flags. A normalized
// token is matched, and decodes, as its normalized content.
result<void> read_added(const reporter& r, const json& doc, state& s) {
  const auto added = doc.find("added_tokens");
  if (added == doc.end() || added->is_null())
    return {};
  if (!added->is_array())
    return r.bad("added_tokens", "not a list");
  std::vector<listed_added> tokens;
  std::unordered_map<std::string, std::size_t> index;  // content -> position in tokens
  auto next_id = static_cast<token_id>(s.vocab.size());
  for (std::size_t i = 0; i < added->size(); ++i) {
    auto token = read_added_token(r, (*added)[i], fmt::format("added_tokens[{}]", i));
    if (!token)
      return token.error();
    if (const auto seen = index.find(token->rule.content); seen != index.end()) {
      listed_added& first = tokens[seen->second];
      token->rule.id = first.rule.id;
      token->special = token->special || first.special;
      first = std::move(*token);
      continue;
    }
    const auto in_vocab = s.vocab.find(token->rule.content);
    token->rule.id = in_vocab != s.vocab.end() ? in_vocab->second : next_id++;
    index.emplace(token->rule.content, tokens.size());
    tokens.push_back(std::move(*token));
  }
  std::vector<internal::added_token_rule> raw;
  std::vector<internal::added_token_rule> normalized;
  for (auto& token : tokens) {
    std::string listed = token.rule.content;
    if (token.normalized && !s.normalizers.empty())
      token.rule.content = internal::normalize(token.rule.content, s.normalizers);
    s.added.push_back({std::move(listed), token.rule.id,
                       internal::byte_level_decode(token.rule.content), token.special});
    (token.normalized ? normalized : raw).push_back(std::move(token.rule));
  }
  s.raw_added = internal::added_matcher{std::move(raw)};
  s.normalized_added = internal::added_matcher{std::move(normalized)};
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
result<void> build_id_tables(const reporter& r, state& s, std::int64_t vocab_size) {
  const auto checked = check_ids(r, s, s.added.size(), vocab_size);
  if (!checked)
    return checked.error();
  const std::size_t size = *checked;
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
    s.id_text[token.id] = token.decoded;
    s.id_kind[token.id] = token.special ? state::kind::special : state::kind::added;
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
  if (auto ok = internal::read_normalizer(r, *doc, tables->normalizers); !ok)
    return ok.error();
  if (auto ok = internal::read_pre_tokenizer(r, *doc, tables->pre_tokenizer); !ok)
    return ok.error();
  if (auto ok = internal::read_decoder(r, *doc); !ok)
    return ok.error();
  if (auto ok = read_model(r, *doc, *tables); !ok)
    return ok.error();
  if (auto ok = read_added(r, *doc, *tables); !ok)
    return ok.error();
  if (auto ok = build_id_tables(r, *tables, vocab_size); !ok)
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
