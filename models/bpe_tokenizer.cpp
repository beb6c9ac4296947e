#include <algorithm>
#include <limits>

#include "models/internal/bpe_state.hpp"
#include "models/internal/pretokenize.hpp"
#include "models/tokenizer.hpp"

namespace mstar::models {
namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

// Applies the merges to one pre-token's symbols, lowest rank (then leftmost) first.
void merge_symbols(const bpe_tokenizer::state& s, std::vector<std::string>& symbols) {
  while (symbols.size() > 1) {
    std::uint32_t best = std::numeric_limits<std::uint32_t>::max();
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = s.merge_ranks.find(internal::merge_key(symbols[i], symbols[i + 1]));
      if (it != s.merge_ranks.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == std::numeric_limits<std::uint32_t>::max())
      return;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
}

void encode_piece(const bpe_tokenizer::state& s, std::string_view piece,
                  std::vector<token_id>& out) {
  const auto& table = internal::byte_to_code_point();
  std::vector<std::string> symbols;
  symbols.reserve(piece.size());
  std::string whole;
  for (const char c : piece) {
    std::string symbol;
    internal::append_utf8(symbol, table[static_cast<unsigned char>(c)]);
    whole += symbol;
    symbols.push_back(std::move(symbol));
  }
  if (s.ignore_merges) {
    if (const auto it = s.vocab.find(whole); it != s.vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  merge_symbols(s, symbols);
  for (const auto& symbol : symbols) {
    if (const auto it = s.vocab.find(symbol); it != s.vocab.end()) {
      out.push_back(it->second);
    } else if (s.unk) {  // load() guarantees an unk whenever a byte symbol is missing
      out.push_back(*s.unk);
    }
  }
}

void encode_segment(const bpe_tokenizer::state& s, std::string_view segment,
                    std::vector<token_id>& out) {
  std::string prefixed;
  if (s.add_prefix_space && !segment.starts_with(' ')) {
    prefixed = " ";
    prefixed.append(segment);
    segment = prefixed;
  }
  if (!s.use_regex) {
    encode_piece(s, segment, out);
    return;
  }
  for (const std::string_view piece : internal::split_gpt2(segment))
    encode_piece(s, piece, out);
}

// The added token starting at text[at], longest first, or nullptr.
const bpe_tokenizer::state::added_token* added_at(const bpe_tokenizer::state& s,
                                                  std::string_view text, std::size_t at) {
  for (const auto& token : s.added) {
    if (text.substr(at).starts_with(token.content))
      return &token;
  }
  return nullptr;
}

}  // namespace

bpe_tokenizer::bpe_tokenizer(std::unique_ptr<const state> tables) : state_(std::move(tables)) {}
bpe_tokenizer::bpe_tokenizer(bpe_tokenizer&&) noexcept = default;
bpe_tokenizer& bpe_tokenizer::operator=(bpe_tokenizer&&) noexcept = default;
bpe_tokenizer::~bpe_tokenizer() = default;

std::vector<token_id> bpe_tokenizer::encode(std::string_view text) const {
  std::vector<token_id> out;
  std::size_t start = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto* token = added_at(*state_, text, at);
    if (token == nullptr) {
      ++at;
      continue;
    }
    if (at > start)
      encode_segment(*state_, text.substr(start, at - start), out);
    out.push_back(token->id);
    at += token->content.size();
    start = at;
  }
  if (text.size() > start)
    encode_segment(*state_, text.substr(start), out);
  return out;
}

std::string bpe_tokenizer::decode(std::span<const token_id> ids, bool skip_special) const {
  std::string out;
  for (const token_id id : ids) {
    const bool known = id < state_->id_kind.size() && state_->id_kind[id] != state::kind::none;
    if (!known) {
      out.append(replacement);
    } else if (!(skip_special && state_->id_kind[id] == state::kind::special)) {
      out.append(state_->id_text[id]);
    }
  }
  return out;
}

std::int64_t bpe_tokenizer::vocab_size() const noexcept {
  return static_cast<std::int64_t>(state_->id_kind.size());
}

std::optional<token_id> bpe_tokenizer::find(std::string_view token) const {
  for (const auto& added : state_->added) {
    if (added.content == token)
      return added.id;
  }
  const auto it = state_->vocab.find(std::string{token});
  if (it == state_->vocab.end())
    return std::nullopt;
  return it->second;
}

}  // namespace mstar::models
