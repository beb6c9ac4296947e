// mstar-run: generate text with a model through the engine's actors
// (conductor, pool actors, worker, preprocess stage), in one process.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "actors/runtime.hpp"
#include "core/input_file.hpp"
#include "engine/preprocess.hpp"
#include "launcher/common/engine_cli.hpp"
#include "launcher/common/guarded_main.hpp"
#include "launcher/common/images.hpp"
#include "models/load.hpp"

namespace {

using mstar::engine::completion;
using mstar::engine::request_spec;

struct options {
  std::string model = MSTAR_EMBEDDED_MODEL_DIR;
  std::vector<std::string> prompts;
  std::vector<std::string> prompt_ids;
  std::string prompts_file;
  std::vector<std::string> images;
  std::int32_t max_tokens = 32;
  mstar::engine::sampling_params sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json = false;
  bool logits = false;
  bool allow_long_prompt = false;
  // Windowed generation (0: off).
  std::int64_t window_units = 0;
  std::int64_t context_units = 0;
  std::int64_t overlap_units = 0;
  std::int64_t tokens_per_unit = 1;
  mstar::launcher::engine_cli engine;
};

// "5,17,301" -> ids, or an error naming the bad entry.
mstar::result<std::vector<mstar::resources::token_id>> parse_ids(const std::string& text) {
  std::vector<mstar::resources::token_id> ids;
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto comma = std::min(text.find(',', at), text.size());
    const std::string_view part{text.data() + at, comma - at};
    std::uint32_t v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc{} || end != part.data() + part.size()) {
      return mstar::make_error(
          mstar::errc::invalid_argument,
          fmt::format("--prompt-ids: '{}' is not a token id (in \"{}\")", part, text));
    }
    ids.push_back(v);
    at = comma + 1;
  }
  return ids;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "mstar-run: %s\n", message.c_str());
  return 2;
}

void print_text(const options& opt, const mstar::models::causal_lm& model,
                const std::vector<completion>& results) {
  const auto* tok = model.tok();
  for (const auto& r : results) {
    for (std::size_t i = 0; i < r.tokens.size(); ++i) {
      if (opt.json) {
        nlohmann::json line{{"prompt_ids", r.prompt},
                            {"generated_ids", r.tokens[i]},
                            {"text", r.text[i]},
                            {"finish_reason", mstar::engine::to_string(r.finished[i])},
                            {"matched_tokens", r.counts.cached_tokens},
                            {"kv_pages_peak", r.counts.kv_pages_peak}};
        if (r.tokens.size() > 1)
          line["index"] = i;
        if (!r.errors[i].empty())
          line["error"] = r.errors[i];
        if (opt.logits)
          line["step_logits"] = r.logits[i];
        std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
      } else {
        if (tok != nullptr)
          std::cout << tok->decode(r.prompt, true);
        std::cout << r.text[i] << "\n";
      }
    }
  }
}

void print_summary(const std::vector<completion>& results, double wall_s) {
  std::size_t prompt = 0, generated = 0;
  std::int64_t matched = 0, peak = 0;
  double ttft = 0, decode = 0;
  for (const auto& r : results) {
    prompt += r.prompt.size();
    for (const auto& t : r.tokens)
      generated += t.size();
    matched += r.counts.cached_tokens;
    peak = std::max(peak, r.counts.kv_pages_peak);
    ttft += r.time_to_first_token_s;
    decode += r.duration_s - r.time_to_first_token_s;
  }
  const double n = static_cast<double>(results.size());
  const double tpot =
      generated > results.size() ? decode / static_cast<double>(generated - results.size()) : 0.0;
  std::fprintf(stderr,
               "--- %zu prompt(s): %zu prompt tokens (%lld from cached pages), %zu generated\n"
               "--- time to first token %.2f ms (mean), time per output token %.3f ms, "
               "%.1f tokens/s overall, at most %lld KV pages held by one sequence\n",
               results.size(), prompt, static_cast<long long>(matched), generated, 1e3 * ttft / n,
               1e3 * tpot, static_cast<double>(generated) / wall_s, static_cast<long long>(peak));
}

// The prompts of a --prompts file, one per non-empty line; a file that
// cannot be read or holds none is an error.
mstar::result<std::vector<std::string>> read_prompts(const std::string& path) {
  auto text = mstar::read_input_file(path);
  if (!text)
    return text.error().with_context("--prompts");
  std::vector<std::string> prompts;
  std::string_view rest = *text;
  while (!rest.empty()) {
    const auto newline = std::min(rest.find('\n'), rest.size());
    if (newline > 0)
      prompts.emplace_back(rest.substr(0, newline));
    rest.remove_prefix(std::min(newline + 1, rest.size()));
  }
  if (prompts.empty()) {
    return mstar::make_error(mstar::errc::invalid_argument,
                             fmt::format("--prompts: {}: holds no prompt (one per line)", path));
  }
  return prompts;
}

// The --image files, read, decoded and preprocessed for `model` in order.
mstar::result<std::vector<mstar::models::image_input>> read_images(
    const options& opt, const mstar::models::causal_lm& model) {
  std::vector<mstar::models::image_input> out;
  if (opt.images.empty())
    return out;
  auto reader = mstar::launcher::image_reader::load(opt.model, model);
  if (!reader)
    return reader.error().with_context("--image");
  for (const auto& path : opt.images) {
    auto bytes = mstar::read_input_file(path);
    if (!bytes)
      return bytes.error().with_context("--image");
    auto im = reader->read(std::as_bytes(std::span{bytes->data(), bytes->size()}));
    if (!im)
      return im.error().with_context(fmt::format("--image {}", path));
    out.push_back(std::move(*im));
  }
  return out;
}

// Gives every request the images; a prompt that does not mark them gets one
// marker block (vision start, placeholder, vision end) per image before its
// text, as Qwen's chat template puts images before the text of a turn.
void attach_images(std::vector<request_spec>& requests,
                   const std::vector<mstar::models::image_input>& images,
                   const mstar::models::causal_lm& model) {
  if (images.empty())
    return;
  const auto facts = *model.vision();  // read_images checked it
  const auto block = mstar::launcher::image_marker_ids(facts);
  for (auto& r : requests) {
    r.images = images;
    if (r.text) {
      const auto* tok = model.tok();
      const auto placeholder = tok->decode(std::span{&facts.image_token, 1});
      if (r.text->find(placeholder) != std::string::npos)
        continue;
      std::string marks;
      for (std::size_t i = 0; i < images.size(); ++i)
        marks += tok->decode(block);
      r.text = marks + *r.text;
    } else if (std::find(r.prompt.begin(), r.prompt.end(), facts.image_token) == r.prompt.end()) {
      std::vector<mstar::resources::token_id> marked;
      for (std::size_t i = 0; i < images.size(); ++i)
        marked.insert(marked.end(), block.begin(), block.end());
      r.prompt.insert(r.prompt.begin(), marked.begin(), marked.end());
    }
  }
}

// Refuses a prompt longer than the model's context unless asked not to.
mstar::result<void> check_context(const options& opt, const mstar::models::causal_lm& model,
                                  const std::vector<request_spec>& requests) {
  const std::int64_t ctx = model.max_context();
  if (ctx <= 0 || opt.allow_long_prompt)
    return {};
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto n = static_cast<std::int64_t>(requests[i].prompt.size());
    if (n > ctx) {
      return mstar::make_error(
          mstar::errc::out_of_range,
          fmt::format("prompt {} has {} tokens, more than the model's context of {} "
                      "(max_position_embeddings); --allow-long-prompt runs it anyway",
                      i + 1, n, ctx));
    }
  }
  return {};
}

// The requests of the flags (prompts, --prompt-ids, else one default text),
// images attached, tokenized with `model`'s tokenizer and checked against
// its context.
mstar::result<std::vector<request_spec>> make_requests(
    const options& opt, const mstar::models::causal_lm& model,
    const std::vector<mstar::models::image_input>& images) {
  std::vector<request_spec> requests;
  auto base = [&] {
    request_spec r;
    r.stop.max_tokens = opt.max_tokens;
    r.stop.ignore_eos = opt.ignore_eos;
    r.stop.stop_strings = opt.stop;
    r.sampling = opt.sampling;
    r.keep_logits = opt.logits;
    if (opt.window_units > 0) {
      r.window = mstar::engine::window_params{opt.window_units, opt.context_units,
                                              opt.overlap_units, opt.tokens_per_unit};
    }
    return r;
  };
  for (const auto& p : opt.prompts) {
    auto r = base();
    r.text = p;
    requests.push_back(std::move(r));
  }
  for (const auto& p : opt.prompt_ids) {
    auto ids = parse_ids(p);
    if (!ids)
      return ids.error();
    auto r = base();
    r.prompt = std::move(*ids);
    requests.push_back(std::move(r));
  }
  if (requests.empty()) {
    if (model.tok() == nullptr)
      return mstar::make_error(mstar::errc::invalid_argument,
                               "this model has no tokenizer: pass --prompt-ids");
    auto r = base();
    r.text = "Once upon a time";
    requests.push_back(std::move(r));
  }
  attach_images(requests, images, model);
  for (auto& r : requests) {
    if (auto ok = mstar::engine::tokenize(r, model.tok()); !ok)
      return ok.error();
  }
  if (auto ok = check_context(opt, model, requests); !ok)
    return ok.error();
  return requests;
}

// Prints what `results` hold (text or JSON, then the summary), or fails
// with a request's error.
int report(const options& opt, const mstar::models::causal_lm& model,
           const std::vector<completion>& results, double wall_s) {
  for (const auto& r : results) {
    for (const auto& e : r.errors) {
      if (!e.empty())
        return fail(e);
    }
  }
  print_text(opt, model, results);
  print_summary(results, wall_s);
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{
      "mstar-run: generate with a model through mstar-cpp's KV and recurrent pools, in one "
      "process.\nWithout --model it runs the embedded default (an 8 M-parameter Nemotron-H "
      "trained on public-domain novels: it continues text, it does not follow instructions)."};
  options opt;
  app.add_option("--model", opt.model, "Model folder (config.json, *.safetensors, tokenizer)");
  app.add_option("--prompt", opt.prompts, "A prompt (repeatable)");
  app.add_option("--prompt-ids", opt.prompt_ids, "A prompt as token ids: 5,17,301 (repeatable)");
  app.add_option("--prompts", opt.prompts_file,
                 "A file with one prompt per line (empty lines are skipped; a file with no "
                 "prompt is an error)");
  app.add_option("--image", opt.images,
                 "An image file (PNG or JPEG) for every prompt (repeatable, in order); a prompt "
                 "without image markers gets one marker block per image before its text");
  app.add_flag("--allow-long-prompt", opt.allow_long_prompt,
               "Run prompts longer than the model's context (max_position_embeddings) instead of "
               "refusing them");
  app.add_option("--max-tokens", opt.max_tokens, "Tokens to generate per prompt")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--temperature", opt.sampling.temperature, "0 is greedy")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--top-k", opt.sampling.top_k, "Keep the k most likely tokens (0: all)")
      ->check(mstar::launcher::whole_number_at_least(0));
  app.add_option("--top-p", opt.sampling.top_p, "Nucleus mass in (0, 1]")
      ->check(CLI::Range(1e-6, 1.0));
  app.add_option("--seed", opt.sampling.seed, "Sampling seed, a whole number >= 0")
      ->check(mstar::launcher::whole_number_at_least(0));
  app.add_option("--presence-penalty", opt.sampling.presence_penalty, "OpenAI presence penalty")
      ->check(CLI::Range(-2.0, 2.0));
  app.add_option("--frequency-penalty", opt.sampling.frequency_penalty, "OpenAI frequency penalty")
      ->check(CLI::Range(-2.0, 2.0));
  app.add_option("--repetition-penalty", opt.sampling.repetition_penalty,
                 "Multiplicative penalty on seen tokens (1: off)")
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("-n,--n", opt.sampling.n, "Samples per prompt")->check(CLI::Range(1, 128));
  app.add_option("--stop", opt.stop, "Stop at this text (repeatable; not returned)");
  app.add_flag("--ignore-eos", opt.ignore_eos, "Keep generating past end-of-sequence ids");
  auto* window =
      app.add_option("--window-units", opt.window_units,
                     "Windowed generation: windows of this many units; when a window ends, the "
                     "KV cache keeps only the prompt and the last --context-units units, so "
                     "the pages held stay bounded however long the output")
          ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  app.add_option("--context-units", opt.context_units,
                 "With --window-units: units of output kept behind each window's end (0: all)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 24))
      ->needs(window);
  app.add_option("--overlap-units", opt.overlap_units,
                 "With --window-units: units each window shares with the one before (windows "
                 "end every window - overlap units)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 24))
      ->needs(window);
  app.add_option("--tokens-per-unit", opt.tokens_per_unit,
                 "With --window-units: tokens per unit (default 1)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))
      ->needs(window);
  mstar::launcher::add_engine_options(app, opt.engine);
  app.add_flag("--json", opt.json, "One JSON object per prompt instead of text");
  app.add_flag("--logits", opt.logits, "With --json: the logits row of every generated token");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (opt.logits && !opt.json)
    return fail("--logits needs --json");
  if (!opt.prompts_file.empty()) {
    auto prompts = read_prompts(opt.prompts_file);
    if (!prompts)
      return fail(prompts.error().message());
    opt.prompts.insert(opt.prompts.end(), prompts->begin(), prompts->end());
  }
  auto run = mstar::launcher::run_options_of(opt.engine);
  if (!run)
    return fail(run.error().message());
  auto loaded = mstar::models::load_causal_lm(opt.model, *run);
  if (!loaded)
    return fail(loaded.error().message());
  auto images = read_images(opt, **loaded);  // before the engine starts: bad files fail fast
  if (!images)
    return fail(images.error().message());
  auto fitted = mstar::launcher::fit_pools_to_device(opt.model, **loaded, opt.engine.device,
                                                     mstar::launcher::memory_fit_of(opt.engine),
                                                     opt.engine.engine);
  if (!fitted)
    return fail(fitted.error().message());
  if (!fitted->empty())
    std::fprintf(stderr, "--- %s\n", fitted->c_str());
  auto made = mstar::actors::runtime::start(std::move(*loaded), opt.engine.engine);
  if (!made)
    return fail(made.error().message());
  auto& engine = **made;
  const auto& model = engine.model();
  std::fprintf(
      stderr, "--- model %s on %s (%s), %lld parameters%s\n", opt.model.c_str(),
      model.device_name().c_str(), std::string{mstar::to_string(model.compute_dtype())}.c_str(),
      static_cast<long long>(model.num_parameters()),
      opt.engine.tensor_parallel > 1
          ? fmt::format(" over {} tensor-parallel ranks (replicated ones counted each time)",
                        opt.engine.tensor_parallel)
                .c_str()
          : "");
  if (auto warmed = engine.warm_up(); !warmed)
    return fail(warmed.error().message());
  const auto t0 = std::chrono::steady_clock::now();
  auto requests = make_requests(opt, model, *images);
  if (!requests)
    return fail(requests.error().message());
  auto results = mstar::actors::complete(engine, std::move(*requests));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report(opt, model, results, wall);
}

}  // namespace

int main(int argc, char** argv) {
  return mstar::launcher::guarded_main("mstar-run", [&] { return run(argc, argv); });
}
