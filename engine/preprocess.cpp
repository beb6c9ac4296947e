#include "engine/preprocess.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "core/hex.hpp"
#include "resources/kv/layout.hpp"

namespace mstar::engine {

result<void> tokenize(request_spec& spec, const models::tokenizer* tok) {
  if (!spec.text)
    return {};
  if (tok == nullptr) {
    return make_error(errc::invalid_argument,
                      fmt::format("request {}: this model has no tokenizer; send the prompt as "
                                  "token ids",
                                  spec.id));
  }
  spec.prompt = tok->encode(*spec.text);
  spec.text.reset();
  if (spec.prompt.empty()) {
    return make_error(errc::invalid_argument,
                      fmt::format("request {}: the prompt text encodes to no tokens", spec.id));
  }
  return {};
}

result<resources::kv_prefix_seed> page_keys(std::span<const token_id> tokens,
                                            std::int64_t page_size, std::string_view cache_salt) {
  const resources::prompt_span spans[] = {resources::id_span{{tokens.begin(), tokens.end()}}};
  return page_keys(spans, page_size, cache_salt);
}

result<resources::kv_prefix_seed> page_keys(std::span<const resources::prompt_span> spans,
                                            std::int64_t page_size, std::string_view cache_salt) {
  // Unsalted keys stay unrooted (the pools root them); a salt roots the
  // chain first, so no salted key can equal an unsalted or other-salt one.
  resources::digest256 salted{};
  resources::byte_view root;
  if (!cache_salt.empty()) {
    salted = resources::fingerprint(std::string_view{"mstar-cache-salt/1"}, cache_salt);
    root = salted;
  }
  auto keyed = resources::key_prompt(spans, page_size, root);
  if (!keyed)
    return keyed.error();
  // The root travels too: generated ids that fill a salted prompt's first
  // page fold the salt like the prompt's own keys.
  return resources::make_prefix_seed(std::move(*keyed), page_size, root);
}

namespace {

result<resources::digest256> digest_of(const std::string& hex, const std::string& field) {
  auto bytes = from_hex(hex);
  if (!bytes || bytes->size() != 32) {
    return make_error(errc::invalid_argument, fmt::format("{}: '{}' is not a key of 64 hex digits",
                                                          field, hex.substr(0, 80)));
  }
  resources::digest256 d{};
  std::copy(bytes->begin(), bytes->end(), d.begin());
  return d;
}

}  // namespace

result<resources::kv_prefix_seed> seed_from_wire(const prefix_wire& wire,
                                                 std::span<const token_id> prompt,
                                                 std::int64_t page_size) {
  std::vector<resources::digest256> keys;
  keys.reserve(wire.keys.size());
  for (std::size_t i = 0; i < wire.keys.size(); ++i) {
    auto d = digest_of(wire.keys[i], fmt::format("prefix_keys[{}]", i));
    if (!d)
      return d.error();
    keys.push_back(*d);
  }
  std::vector<resources::prefix_span> rows;
  if (wire.layout.empty())
    rows.push_back({prompt.size(), prompt.size(), "prefill", std::nullopt, std::nullopt});
  std::uint64_t slots = 0;
  const auto ps = static_cast<std::uint64_t>(std::max<std::int64_t>(page_size, 1));
  const auto partial_from = prompt.size() / ps * ps;
  std::vector<token_id> partial;  // the ids on the prompt's last partial page
  for (std::size_t i = 0; i < wire.layout.size(); ++i) {
    const auto& r = wire.layout[i];
    resources::prefix_span span{r.length, r.advance, r.walk, std::nullopt, std::nullopt};
    if (!r.digest.empty()) {
      auto bytes = from_hex(r.digest);
      if (!bytes) {
        return make_error(errc::invalid_argument,
                          fmt::format("prefix_layout[{}].digest: {}", i, bytes.error().message()));
      }
      span.digest = std::move(*bytes);
    } else {
      for (auto k = std::max(slots, partial_from);
           k < std::min<std::uint64_t>(slots + r.length, prompt.size()); ++k)
        partial.push_back(prompt[k]);
    }
    if (!r.end_key.empty()) {
      auto d = digest_of(r.end_key, fmt::format("prefix_layout[{}].end_key", i));
      if (!d)
        return d.error();
      span.end_key = *d;
    }
    slots += r.length;
    rows.push_back(std::move(span));
  }
  if (wire.layout.empty()) {
    slots = prompt.size();
    partial.assign(prompt.begin() + static_cast<long>(partial_from), prompt.end());
  }
  if (slots != prompt.size()) {
    return make_error(errc::invalid_argument,
                      fmt::format("prefix_layout: its rows cover {} slots but the prompt has {} "
                                  "tokens",
                                  slots, prompt.size()));
  }
  if (wire.tail != partial) {
    return make_error(errc::invalid_argument,
                      fmt::format("prefix_tail: {} ids that are not the prompt's last partial "
                                  "page of {} ids",
                                  wire.tail.size(), partial.size()));
  }
  auto seed = resources::prefix_seed_from_rows(std::move(keys), wire.tail, rows, page_size);
  if (!seed)
    return seed.error().with_context("prefix_keys / prefix_tail / prefix_layout");
  return seed;
}

std::optional<resources::kv_prefix_seed> sequence_keys(std::int64_t page_size,
                                                       std::span<const token_id> tokens,
                                                       std::string_view cache_salt,
                                                       const resources::kv_prefix_seed* given) {
  if (page_size <= 0)
    return std::nullopt;
  if (given != nullptr)
    return *given;
  auto keys = page_keys(tokens, page_size, cache_salt);
  return keys ? std::optional{std::move(*keys)} : std::nullopt;
}

std::optional<resources::kv_prefix_seed> sequence_keys(
    std::int64_t page_size, std::span<const resources::prompt_span> spans,
    std::string_view cache_salt, const resources::kv_prefix_seed* given) {
  if (page_size <= 0)
    return std::nullopt;
  if (given != nullptr)
    return *given;
  if (spans.empty())
    return std::nullopt;
  auto keys = page_keys(spans, page_size, cache_salt);
  return keys ? std::optional{std::move(*keys)} : std::nullopt;
}

namespace {

std::string slot_range(std::uint64_t from, std::uint64_t to) {
  return fmt::format("[{}, {})", from, to);
}

std::string run_of(std::size_t k, const models::image_span& im) {
  return fmt::format("image {}'s placeholder run {}", k,
                     slot_range(static_cast<std::uint64_t>(im.start),
                                static_cast<std::uint64_t>(im.start + im.length)));
}

}  // namespace

result<void> check_layout_rows(const prefix_wire& wire, std::uint64_t prompt_slots,
                               std::span<const models::image_span> images) {
  if (wire.layout.empty()) {
    if (!images.empty()) {
      return make_error(errc::invalid_argument,
                        fmt::format("prefix_layout: no rows (one ids row over the prompt) but "
                                    "the prompt has {} image(s); each image must be an item row "
                                    "over its placeholder run, starting with {}",
                                    images.size(), run_of(0, images[0])));
    }
    return {};
  }
  std::uint64_t at = 0;
  std::size_t next = 0;  // the first image no row has covered yet
  for (std::size_t i = 0; i < wire.layout.size(); ++i) {
    const auto& r = wire.layout[i];
    const auto end = at + r.length;
    const auto* im = next < images.size() ? &images[next] : nullptr;
    const bool reaches_image = im != nullptr && static_cast<std::uint64_t>(im->start) < end;
    const auto row = fmt::format("prefix_layout[{}]", i);
    if (r.digest.empty() && reaches_image) {
      return make_error(errc::invalid_argument,
                        fmt::format("{}: an ids row over slots {} holds {}; an image must be an "
                                    "item row of its own",
                                    row, slot_range(at, end), run_of(next, *im)));
    }
    if (!r.digest.empty()) {
      if (im != nullptr && static_cast<std::uint64_t>(im->start) == at) {
        if (r.length != static_cast<std::uint64_t>(im->length)) {
          return make_error(errc::invalid_argument,
                            fmt::format("{}: an item row of {} slots at slot {}, but {} has {} "
                                        "slots",
                                        row, r.length, at, run_of(next, *im), im->length));
        }
        ++next;
      } else if (reaches_image) {
        return make_error(errc::invalid_argument,
                          fmt::format("{}: an item row over slots {} does not line up with {}", row,
                                      slot_range(at, end), run_of(next, *im)));
      } else {
        return make_error(errc::invalid_argument,
                          fmt::format("{}: an item row over slots {}, where the prompt has token "
                                      "ids, not an image's placeholder run",
                                      row, slot_range(at, std::min(end, prompt_slots))));
      }
    }
    at = end;
  }
  if (at != prompt_slots) {
    return make_error(errc::invalid_argument,
                      fmt::format("prefix_layout: its {} rows cover {} slots but the prompt has {} "
                                  "tokens",
                                  wire.layout.size(), at, prompt_slots));
  }
  return {};
}

result<std::optional<resources::kv_prefix_seed>> front_end_seed(
    const request_spec& spec, std::int64_t page_size, std::span<const models::image_span> images) {
  if (!spec.prefix || page_size <= 0)
    return std::optional<resources::kv_prefix_seed>{};
  auto seed = [&]() -> result<resources::kv_prefix_seed> {
    if (auto ok = check_layout_rows(*spec.prefix, spec.prompt.size(), images); !ok)
      return ok.error();
    return seed_from_wire(*spec.prefix, spec.prompt, page_size);
  }();
  if (!seed)
    return seed.error().with_context(fmt::format("request {}", spec.id));
  return std::optional<resources::kv_prefix_seed>{std::move(*seed)};
}

}  // namespace mstar::engine
