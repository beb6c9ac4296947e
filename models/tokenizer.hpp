#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace mstar::models {

/// U+FFFD REPLACEMENT CHARACTER in UTF-8: what decoding writes for a token
/// (or byte run) that is not valid UTF-8 on its own.
inline constexpr std::string_view utf8_replacement = "\xEF\xBF\xBD";

/// A token id; the same width page keys encode (`resources::token_id`).
using token_id = std::uint32_t;

/// Turns text into token ids and back. Implementations are immutable after
/// construction, so one instance may serve several threads.
class tokenizer {
 public:
  virtual ~tokenizer() = default;

  /// The ids of `text`; adds no BOS or EOS (the caller decides).
  [[nodiscard]] virtual std::vector<token_id> encode(std::string_view text) const = 0;

  /// The text of `ids`. Never fails: an id that stands for no text becomes
  /// U+FFFD, and special tokens are dropped when `skip_special` is set. Bytes
  /// are concatenated as they decode, so cutting a multi-byte character in
  /// half yields invalid UTF-8 (dump JSON with a replacing error handler).
  [[nodiscard]] virtual std::string decode(std::span<const token_id> ids,
                                           bool skip_special = false) const = 0;

  /// One past the largest id this tokenizer produces or understands.
  [[nodiscard]] virtual std::int64_t vocab_size() const noexcept = 0;
};

/// Byte-level ids: byte b is id b + offset; ids below the offset are special
/// (pad, bos, eos...) and decode to nothing when skipped, to U+FFFD otherwise,
/// as do ids at or above offset + 256.
///
/// A model declares it in config.json as `"mstar_tokenizer": "bytes"` (offset
/// 0) or `"mstar_tokenizer": {"type": "bytes", "offset": 3}`.
class byte_tokenizer final : public tokenizer {
 public:
  /// Fails unless 0 <= offset and offset + 256 <= vocab_size.
  [[nodiscard]] static result<byte_tokenizer> make(std::int64_t offset, std::int64_t vocab_size);

  [[nodiscard]] std::vector<token_id> encode(std::string_view text) const override;
  [[nodiscard]] std::string decode(std::span<const token_id> ids,
                                   bool skip_special = false) const override;
  [[nodiscard]] std::int64_t vocab_size() const noexcept override { return vocab_size_; }

  /// The id of byte 0.
  [[nodiscard]] std::int64_t offset() const noexcept { return offset_; }

 private:
  byte_tokenizer(std::int64_t offset, std::int64_t vocab_size)
      : offset_(offset), vocab_size_(vocab_size) {}

  std::int64_t offset_;
  std::int64_t vocab_size_;
};

/// A byte-level BPE tokenizer read from a Hugging Face `tokenizer.json`
/// (GPT-2, Llama-3 and Qwen2 / Qwen3 style: a "BPE" model with vocab and
/// merges, a byte-level pre-tokenizer and decoder, added/special tokens),
/// encoding as the `tokenizers` package does.
///
/// Supported: normalizer null, NFC, NFD, NFKC, NFKD or a Sequence of them
/// (utf8proc); pre_tokenizer ByteLevel (`add_prefix_space`, `use_regex`: the
/// GPT-2 pattern) or a Sequence of Split steps ending with ByteLevel, each
/// Split a `{"Regex": ...}` (compiled once, with Oniguruma, the engine
/// `tokenizers` uses) or `{"String": ...}` pattern with any behaviour
/// (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous) and
/// `invert`; decoder null or ByteLevel; merges as "a b" strings or
/// ["a", "b"] pairs; `ignore_merges`; `unk_token`. Added tokens are matched
/// as `tokenizers` matches them: those with `normalized` false in the raw
/// text, the others in the normalized text between those, leftmost and
/// longest first, with `single_word`, `lstrip` and `rstrip`; an added token
/// decodes as the ByteLevel decoder decodes it. Refused with an
/// "unsupported" error naming the field: other normalizers and
/// pre-tokenizers, a step after ByteLevel, byte_fallback, subword
/// prefixes/suffixes. Bytes of the input that are not UTF-8 (`tokenizers`
/// only sees Unicode strings) are kept: normalizers leave them alone and
/// each run of them is a pre-token of its own. Known gaps: Unicode tables
/// are Debian 12's Oniguruma 6.9.8 and utf8proc 2.8 (`tokenizers` bundles
/// its own versions, so code points assigned in recent Unicode versions may
/// classify or normalize differently). As in `tokenizers`, an added token's
/// id is its vocab id when the vocab spells it, else the next one after the
/// vocab's entries in the file's order; the listed `id` must be well formed
/// but is not used (in real files the two agree).
class bpe_tokenizer final : public tokenizer {
 public:
  /// Reads and checks a tokenizer.json file (see parse for `vocab_size`).
  [[nodiscard]] static result<bpe_tokenizer> load(const std::filesystem::path& path,
                                                  std::int64_t vocab_size = 0);

  /// Parses tokenizer.json text; `label` names it in errors. Every id must be
  /// below `vocab_size` (the model's vocabulary) when it is positive, else
  /// below twice the number of entries the file lists: the decode table is
  /// as large as the largest id, so a sparse id is an error, not a giant table.
  [[nodiscard]] static result<bpe_tokenizer> parse(std::string_view json_text,
                                                   std::string_view label = "tokenizer.json",
                                                   std::int64_t vocab_size = 0);

  /// Move-only; the tables move with the handle.
  bpe_tokenizer(bpe_tokenizer&&) noexcept;
  /// As the move constructor.
  bpe_tokenizer& operator=(bpe_tokenizer&&) noexcept;
  ~bpe_tokenizer() override;

  [[nodiscard]] std::vector<token_id> encode(std::string_view text) const override;
  [[nodiscard]] std::string decode(std::span<const token_id> ids,
                                   bool skip_special = false) const override;
  [[nodiscard]] std::int64_t vocab_size() const noexcept override;

  /// The id of a vocab entry (in its byte-level spelling) or added token.
  [[nodiscard]] std::optional<token_id> find(std::string_view token) const;

  struct state;  ///< the tables; defined in the .cpp

 private:
  explicit bpe_tokenizer(std::unique_ptr<const state> tables);

  std::unique_ptr<const state> state_;
};

/// The tokenizer of a model folder: the one config.json declares under
/// `mstar_tokenizer` when present, else `tokenizer.json`, whose ids must be
/// below `vocab_size` when it is positive (the model's vocabulary). Fails
/// (not_found) when the folder has neither, and with the reader's message
/// when the declaration or file is malformed.
[[nodiscard]] result<std::unique_ptr<tokenizer>> load_tokenizer(const std::filesystem::path& folder,
                                                                std::int64_t vocab_size = 0);

}  // namespace mstar::models
