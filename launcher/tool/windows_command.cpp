// `mstar-tool windows`: one window schedule as one JSON line.
#include <cstdint>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "launcher/tool/commands.hpp"
#include "resources/windowing/window_schedule.hpp"

namespace mstar::tool {
namespace {

// Keys print in the order the help text documents them.
using json = nlohmann::ordered_json;

constexpr auto windows_details =
    R"(A unit is an abstract sequence unit: a latent frame for video models, or
whatever the model generates one window at a time. --total units are
generated in windows of --window units; each window after the first starts
--window minus --overlap units after the previous one and re-pins the
previous window's last --overlap units as conditioning. Every unit is
committed by exactly one window, and only the last window may be short.

Prints one JSON line:
  {"stride":s,"num_windows":n,
   "windows":[{"index","start","end","cond_units","commit_start","commit_end",
               "units","released_end"}...],
   "retention":{"context_budget":tokens,"protected_prefix":tokens} | null}
[start, end) is the window's span and [commit_start, commit_end) what it newly
commits; released_end is how many committed units (after the protected head)
are older than --context once that window has committed. "retention" is the
KV policy each window commit declares (null when --context is 0) and appears
only when --tokens-per-unit and --prefix-tokens are both given.

At most 100,000 windows are printed; a schedule with more is refused.
Invalid arguments print the reason on stderr and exit with status 2.)";

// One line of output for at most this many windows (about 150 bytes each).
constexpr std::int64_t max_windows = 100'000;

struct windows_options {
  std::int64_t total = 0;
  std::int64_t window = 0;
  std::int64_t context = 0;
  std::int64_t overlap = 0;
  std::int64_t tokens_per_unit = 0;
  std::int64_t prefix_tokens = 0;
  CLI::Option* tokens_per_unit_option = nullptr;
  CLI::Option* prefix_tokens_option = nullptr;
};

json policy_json(const std::optional<resources::retention_policy>& policy) {
  if (!policy)
    return nullptr;
  return json{{"context_budget", policy->context_budget},
              {"protected_prefix", policy->protected_prefix}};
}

result<json> describe(const windows_options& opts) {
  const bool want_tokens = opts.tokens_per_unit_option->count() > 0;
  if (want_tokens != (opts.prefix_tokens_option->count() > 0)) {
    return make_error(errc::invalid_argument,
                      "--tokens-per-unit and --prefix-tokens go together: give both to see the "
                      "retention policy, or neither");
  }
  auto schedule =
      resources::window_schedule::make(opts.total, opts.window, opts.context, opts.overlap);
  if (!schedule)
    return schedule.error();
  if (schedule->num_windows() > max_windows) {
    return make_error(
        errc::out_of_range,
        fmt::format("--total {} in windows of {} with --overlap {} makes {} windows, "
                    "more than the {} this command prints",
                    opts.total, opts.window, opts.overlap, schedule->num_windows(), max_windows));
  }
  json windows = json::array();
  for (const auto& plan : schedule->windows()) {
    auto released = schedule->released_end(plan.index);
    if (!released)
      return released.error();
    windows.push_back({{"index", plan.index},
                       {"start", plan.start},
                       {"end", plan.end},
                       {"cond_units", plan.cond_units},
                       {"commit_start", plan.commit_start()},
                       {"commit_end", plan.commit_end()},
                       {"units", plan.units()},
                       {"released_end", *released}});
  }
  json out{{"stride", schedule->stride()},
           {"num_windows", schedule->num_windows()},
           {"windows", std::move(windows)}};
  if (want_tokens) {
    auto policy = schedule->retention(opts.tokens_per_unit, opts.prefix_tokens);
    if (!policy)
      return policy.error();
    out["retention"] = policy_json(*policy);
  }
  return out;
}

}  // namespace

void add_windows_command(CLI::App& app, int& exit_code) {
  // The options outlive this call: CLI11 writes into them during parse and
  // the callback reads them afterwards, so the callback shares ownership.
  auto opts = std::make_shared<windows_options>();
  auto* cmd = app.add_subcommand(
      "windows", "Show how a long generation is cut into windows of sequence units");
  // The short line is what `mstar-tool --help` lists; the details follow the
  // options in `mstar-tool windows --help`.
  cmd->footer(windows_details);
  cmd->add_option("--total", opts->total,
                  "Units in the whole sequence (>= 1), e.g. latent frames of the video")
      ->required();
  cmd->add_option("--window", opts->window, "Units one window covers, conditioning included (>= 1)")
      ->required();
  cmd->add_option("--context", opts->context,
                  "Committed units kept in the KV cache behind the commit frontier; older ones "
                  "are released. 0 (default) keeps everything");
  cmd->add_option("--overlap", opts->overlap,
                  "Units each window re-pins from the previous window's tail as conditioning, "
                  "in [0, window). Default 0");
  opts->tokens_per_unit_option =
      cmd->add_option("--tokens-per-unit", opts->tokens_per_unit,
                      "KV cache tokens per unit (>= 1), e.g. latent tokens per frame; with "
                      "--prefix-tokens, adds the retention policy to the output");
  opts->prefix_tokens_option =
      cmd->add_option("--prefix-tokens", opts->prefix_tokens,
                      "Tokens at the head of the stream (a text prompt, say) that are never "
                      "released (>= 0); goes with --tokens-per-unit");
  cmd->callback([opts, &exit_code] {
    auto out = describe(*opts);
    if (!out) {
      std::cerr << "mstar-tool windows: " << out.error().message() << '\n';
      exit_code = 2;
      return;
    }
    std::cout << out->dump() << '\n';
    exit_code = 0;
  });
}

}  // namespace mstar::tool
