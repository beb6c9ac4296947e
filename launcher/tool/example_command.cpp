// `mstar-tool example`: the README's main job until the serving runtime
// lands. Keys a sample multimodal prompt (text, an image, text) the way a
// preprocess stage would, and plans a windowed generation with its cache
// retention, so a newcomer sees both core modules at work.
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/hex.hpp"
#include "launcher/tool/commands.hpp"
#include "launcher/tool/json_args.hpp"
#include "resources/kv/item_digest.hpp"
#include "resources/kv/layout.hpp"
#include "resources/windowing/window_schedule.hpp"

namespace mstar::tool {
namespace {

struct example_options {
  std::int64_t page_size = 16;
  bool as_json = false;
};

// The sample image and how it is digested (the Python stage's recipe, §1.8).
struct sample_image {
  resources::digest256 file_sha256{};
  std::vector<resources::preprocess_param> params;
  resources::digest256 digest{};
};

sample_image make_sample_image() {
  const std::string image_bytes = "sample image: a 64x64 RGB picture would be here";
  sample_image out;
  out.file_sha256 = resources::sha256_of(
      {reinterpret_cast<const std::uint8_t*>(image_bytes.data()), image_bytes.size()});
  out.params = {std::int64_t{64}, std::string{"bicubic"}, true};
  // Digest = fingerprint(sha256(file), modality, preprocess fingerprint,
  // advance, repr(p) per processor parameter); these params always repr.
  out.digest =
      resources::item_digest(out.file_sha256, "image", "example-preprocess-v1", 30, out.params)
          .value();
  return out;
}

std::string params_text(const sample_image& image) {
  std::string out;
  for (const auto& p : image.params)
    out += (out.empty() ? "" : ", ") + resources::python_repr(p).value();
  return out;
}

// The upstream layout test's shape: 20 text ids, a 30-slot image, 25 ids.
std::vector<resources::prompt_span> sample_prompt(const sample_image& sample) {
  const auto& image = sample.digest;
  std::vector<resources::token_id> head(20), tail(25);
  for (std::size_t i = 0; i < head.size(); ++i)
    head[i] = static_cast<resources::token_id>(1 + i);
  for (std::size_t i = 0; i < tail.size(); ++i)
    tail[i] = static_cast<resources::token_id>(100 + i);
  return {resources::id_span{head}, resources::item_span{30, {image.begin(), image.end()}},
          resources::id_span{tail}};
}

int run_example(const example_options& opt) {
  const auto image = make_sample_image();
  const auto spans = sample_prompt(image);
  auto keyed = resources::key_prompt(spans, opt.page_size);
  if (!keyed) {
    std::cerr << "mstar-tool example: " << keyed.error().message() << '\n';
    return 2;
  }
  // A windowed generation: 48 units in windows of 8, keeping 16 units of
  // context at 4 cache tokens per unit behind a 24-token text prefix.
  auto schedule = resources::window_schedule::make(48, 8, 16, 0);
  auto retention = schedule->retention(4, 24);
  if (opt.as_json) {
    json windows = json::array();
    for (const auto& w : schedule->windows()) {
      windows.push_back({{"index", w.index},
                         {"commit_start", w.commit_start()},
                         {"commit_end", w.commit_end()},
                         {"released_end", *schedule->released_end(w.index)}});
    }
    json out{{"prompt",
              {{"page_size", opt.page_size},
               {"total_slots", keyed->total_slots},
               {"image",
                {{"file_sha256", to_hex(image.file_sha256)},
                 {"modality", "image"},
                 {"preprocess_fingerprint", "example-preprocess-v1"},
                 {"advance", 30},
                 {"params", params_text(image)},
                 {"digest", to_hex(image.digest)}}},
               {"keys", keys_json(keyed->keys)},
               {"tail", keyed->tail},
               {"items_by_page", items_by_page_json(keyed->items)}}},
             {"windows", windows},
             {"retention",
              {{"context_budget", (*retention)->context_budget},
               {"protected_prefix", (*retention)->protected_prefix}}}};
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  fmt::print("Prompt: 20 text ids, a 30-slot image, 25 text ids ({} slots), page size {}\n",
             keyed->total_slots, opt.page_size);
  fmt::print("image: sha256(file) {}\n", to_hex(image.file_sha256));
  fmt::print(
      "       digest = fingerprint(sha256(file), \"image\", \"example-preprocess-v1\", 30, "
      "{})\n       = {}\n",
      params_text(image), to_hex(image.digest));
  fmt::print("{:>4}  {:<64}  {}\n", "page", "unrooted key (what a preprocess stage sends)",
             "items");
  for (std::size_t p = 0; p < keyed->keys.size(); ++p) {
    std::string items;
    if (auto it = keyed->items.find(p); it != keyed->items.end()) {
      for (const auto& item : it->second) {
        items += fmt::format("image start={} offset={} length={} ", item.start, item.offset,
                             item.length);
      }
    }
    fmt::print("{:>4}  {}  {}\n", p, to_hex(keyed->keys[p]), items);
  }
  fmt::print("tail ids on the partial last page: {}\n\n", json(keyed->tail).dump());
  fmt::print("Window plan: 48 units, window 8, context 16 units, 4 tokens/unit, prefix 24\n");
  fmt::print("{:>6} {:>12} {:>13}\n", "window", "commits", "released_end");
  for (const auto& w : schedule->windows()) {
    fmt::print("{:>6} {:>5}..{:<5} {:>13}\n", w.index, w.commit_start(), w.commit_end(),
               *schedule->released_end(w.index));
  }
  fmt::print("retention per commit: context_budget={} tokens, protected_prefix={} tokens\n",
             (*retention)->context_budget, (*retention)->protected_prefix);
  return 0;
}

}  // namespace

void add_example_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "example",
      "Key a sample prompt with an image span and plan a windowed generation (the README's main "
      "job until serving lands)");
  auto opt = std::make_shared<example_options>();
  cmd->add_option("--page-size", opt->page_size, "Slots per KV page")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", opt->as_json, "Print one JSON document instead of tables");
  cmd->callback([opt, &exit_code] { exit_code = run_example(*opt); });
}

}  // namespace mstar::tool
