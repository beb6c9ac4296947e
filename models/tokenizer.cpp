#include "models/tokenizer.hpp"

#include <fmt/format.h>

#include "core/checked.hpp"
#include "core/untrusted_json.hpp"
#include "models/internal/json_fields.hpp"
#include "models/internal/json_text.hpp"

namespace mstar::models {
namespace {

// The byte tokenizer a config's `mstar_tokenizer` declares.
result<std::unique_ptr<tokenizer>> declared_tokenizer(const nlohmann::json& config,
                                                      const std::string& label) {
  const nlohmann::json& declared = config["mstar_tokenizer"];
  const internal::json_fields fields{config, label};
  const auto bad = [&](std::string_view why) { return fields.fail("mstar_tokenizer", why); };
  std::int64_t offset = 0;
  if (declared.is_object()) {
    const internal::json_fields inner{declared, label + ": mstar_tokenizer"};
    auto type = inner.string("type", "");
    if (!type)
      return type.error();
    if (*type != "bytes")
      return bad(fmt::format("type '{}' is not \"bytes\"", text_excerpt(*type)));
    auto read = inner.integer("offset", 0);
    if (!read)
      return read.error();
    offset = *read;
  } else if (!declared.is_string() || declared.get<std::string>() != "bytes") {
    return bad(fmt::format("{} is neither \"bytes\" nor {{\"type\": \"bytes\", \"offset\": n}}",
                           json_excerpt(declared)));
  }
  const auto fallback = checked_add<std::int64_t>(offset, 256);
  if (!fallback)
    return bad(fmt::format("offset {} leaves no room for 256 byte ids", offset));
  auto vocab = fields.integer("vocab_size", *fallback);
  if (!vocab)
    return vocab.error();
  auto made = byte_tokenizer::make(offset, *vocab);
  if (!made)
    return made.error().with_context(label);
  return std::unique_ptr<tokenizer>{std::make_unique<byte_tokenizer>(std::move(*made))};
}

}  // namespace

result<byte_tokenizer> byte_tokenizer::make(std::int64_t offset, std::int64_t vocab_size) {
  constexpr std::int64_t max_ids = std::int64_t{1} << 32;  // what a token_id can name
  if (vocab_size > max_ids) {
    return make_error(errc::invalid_argument,
                      fmt::format("a byte tokenizer's vocabulary of {} is more than the 2^32 ids "
                                  "a token id can name",
                                  vocab_size));
  }
  // Written so no sum can overflow: offset near INT64_MAX is refused here.
  if (offset < 0 || vocab_size < 256 || offset > vocab_size - 256) {
    const auto last = checked_add<std::int64_t>(offset, 255);
    return make_error(errc::invalid_argument,
                      fmt::format("byte tokenizer with offset {} needs ids up to {}, but the "
                                  "vocabulary has {}",
                                  offset, last ? fmt::to_string(*last) : "past 2^63", vocab_size));
  }
  return byte_tokenizer{offset, vocab_size};
}

std::vector<token_id> byte_tokenizer::encode(std::string_view text) const {
  std::vector<token_id> out;
  out.reserve(text.size());
  for (const char c : text) {
    out.push_back(static_cast<token_id>(static_cast<unsigned char>(c) + offset_));
  }
  return out;
}

std::string byte_tokenizer::decode(std::span<const token_id> ids, bool skip_special) const {
  std::string out;
  out.reserve(ids.size());
  for (const token_id id : ids) {
    const auto value = static_cast<std::int64_t>(id);
    if (value >= offset_ && value < offset_ + 256) {
      out.push_back(static_cast<char>(value - offset_));
    } else if (!(skip_special && value < offset_)) {
      out.append(utf8_replacement);
    }
  }
  return out;
}

result<std::unique_ptr<tokenizer>> load_tokenizer(const std::filesystem::path& folder,
                                                  std::int64_t vocab_size) {
  const auto config_path = folder / "config.json";
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    auto config = internal::load_json_file(config_path);
    if (!config)
      return config.error();
    if (config->is_object() && config->contains("mstar_tokenizer")) {
      return declared_tokenizer(*config, config_path.string());
    }
  }
  const auto json_path = folder / "tokenizer.json";
  if (!std::filesystem::exists(json_path, ec)) {
    return make_error(errc::not_found,
                      fmt::format("{}: no tokenizer.json and config.json declares no "
                                  "mstar_tokenizer",
                                  folder.string()));
  }
  auto bpe = bpe_tokenizer::load(json_path, vocab_size);
  if (!bpe)
    return bpe.error();
  return std::unique_ptr<tokenizer>{std::make_unique<bpe_tokenizer>(std::move(*bpe))};
}

}  // namespace mstar::models
