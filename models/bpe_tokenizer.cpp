#include "models/internal/bpe_state.hpp"
#include "models/internal/pretokenize.hpp"
#include "models/tokenizer.hpp"

namespace mstar::models {
namespace {

void encode_piece(const bpe_tokenizer::state& s, std::string_view piece,
                  std::vector<token_id>& out) {
  if (s.ignore_merges) {
    std::string whole;
    for (const char c : piece)
      internal::append_utf8(whole, internal::byte_to_code_point()[static_cast<unsigned char>(c)]);
    if (const auto it = s.vocab.find(whole); it != s.vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<token_id> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) {
    if (const auto id = s.byte_ids[static_cast<unsigned char>(c)]) {
      symbols.push_back(*id);
    } else if (s.unk) {  // load() guarantees an unk whenever a byte symbol is missing
      symbols.push_back(*s.unk);
    }
  }
  internal::apply_merges(s.merges, symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

// Runs the pre-tokenizer steps over `text` (normalized, no added tokens) and
// encodes each piece.
void encode_text(const bpe_tokenizer::state& s, std::string_view text, std::vector<token_id>& out) {
  std::vector<std::string> pieces{std::string{text}};
  std::vector<std::string> next;
  for (const auto& step : s.pre_tokenizer) {
    next.clear();
    for (auto& piece : pieces) {
      if (step.add_prefix_space && !piece.starts_with(' '))
        piece.insert(0, 1, ' ');
      if (!step.split) {
        next.push_back(std::move(piece));
        continue;
      }
      for (const std::string_view part : internal::split(*step.split, piece))
        next.emplace_back(part);
    }
    pieces.swap(next);
  }
  for (const auto& piece : pieces)
    encode_piece(s, piece, out);
}

// Normalizes a stretch of input between raw added tokens, finds the
// normalized added tokens in it and encodes the rest.
void encode_segment(const bpe_tokenizer::state& s, std::string_view segment,
                    std::vector<token_id>& out) {
  std::string normalized;
  if (!s.normalizers.empty()) {
    normalized = internal::normalize(segment, s.normalizers);
    segment = normalized;
  }
  for (const auto& part : s.normalized_added.split(segment)) {
    if (part.token) {
      out.push_back(*part.token);
    } else {
      encode_text(s, part.text, out);
    }
  }
}

}  // namespace

bpe_tokenizer::bpe_tokenizer(std::unique_ptr<const state> tables) : state_(std::move(tables)) {}
bpe_tokenizer::bpe_tokenizer(bpe_tokenizer&&) noexcept = default;
bpe_tokenizer& bpe_tokenizer::operator=(bpe_tokenizer&&) noexcept = default;
bpe_tokenizer::~bpe_tokenizer() = default;

std::vector<token_id> bpe_tokenizer::encode(std::string_view text) const {
  std::vector<token_id> out;
  for (const auto& part : state_->raw_added.split(text)) {
    if (part.token) {
      out.push_back(*part.token);
    } else {
      encode_segment(*state_, part.text, out);
    }
  }
  return out;
}

std::string bpe_tokenizer::decode(std::span<const token_id> ids, bool skip_special) const {
  std::string out;
  for (const token_id id : ids) {
    const bool known = id < state_->id_kind.size() && state_->id_kind[id] != state::kind::none;
    if (!known) {
      out.append(utf8_replacement);
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
