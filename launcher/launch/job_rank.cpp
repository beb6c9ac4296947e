#include "launcher/launch/job_rank.hpp"

#include <charconv>
#include <cstdlib>
#include <fmt/format.h>

namespace mstar::launch {
namespace {

result<std::size_t> number_var(const env_lookup& env, std::string_view name) {
  const auto text = env(name);
  if (!text)
    return make_error(errc::not_found, fmt::format("{} is not set", name));
  std::size_t value = 0;
  const auto* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc{} || ptr != end || text->empty())
    return make_error(errc::invalid_argument,
                      fmt::format("{}='{}' is not a non-negative integer", name, *text));
  return value;
}

result<std::size_t> parse_index(std::string_view text) {
  std::size_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty())
    return make_error(errc::parse_error, fmt::format("'{}' is not a number", text));
  return value;
}

// "01-03,07" inside the brackets of "gpu[01-03,07]", zero padding kept.
result<void> expand_ranges(std::string_view prefix, std::string_view ranges,
                           std::string_view suffix, std::vector<std::string>& hosts) {
  while (!ranges.empty()) {
    const auto comma = ranges.find(',');
    const auto item = ranges.substr(0, comma);
    ranges = comma == std::string_view::npos ? std::string_view{} : ranges.substr(comma + 1);
    const auto dash = item.find('-');
    const auto low_text = item.substr(0, dash);
    auto low = parse_index(low_text);
    auto high = dash == std::string_view::npos ? low : parse_index(item.substr(dash + 1));
    if (!low || !high)
      return (!low ? low.error() : high.error());
    if (*high < *low || *high - *low > 100000)
      return make_error(errc::parse_error, fmt::format("range '{}' is empty or too large", item));
    for (std::size_t i = *low; i <= *high; ++i)
      hosts.push_back(fmt::format("{}{:0{}}{}", prefix, i, low_text.size(), suffix));
  }
  return {};
}

result<std::optional<job_rank>> slurm_rank(std::size_t node_count, const env_lookup& env) {
  auto rank = number_var(env, "SLURM_PROCID");
  auto tasks = number_var(env, "SLURM_NTASKS");
  if (!rank || !tasks)
    return (!rank ? rank.error() : tasks.error()).with_context("slurm");
  if (*tasks != node_count)
    return make_error(errc::invalid_argument,
                      fmt::format("slurm: SLURM_NTASKS={} but the deployment has {} nodes: run "
                                  "one task per node (srun --ntasks={}), or --rank-env none to "
                                  "start every node from one process",
                                  *tasks, node_count, node_count));
  job_rank out{"slurm", *rank, {}};
  if (const auto list = env("SLURM_NODELIST"); list && !list->empty()) {
    auto hosts = expand_hostlist(*list);
    if (!hosts)
      return hosts.error().with_context("slurm: SLURM_NODELIST");
    if (hosts->size() > node_count)
      return make_error(errc::invalid_argument,
                        fmt::format("slurm: SLURM_NODELIST={} names {} hosts but the "
                                    "deployment has {} nodes",
                                    *list, hosts->size(), node_count));
    out.detail = fmt::format("SLURM_NODELIST={} ({} hosts)", *list, hosts->size());
  }
  return std::optional<job_rank>{std::move(out)};
}

result<std::optional<job_rank>> torchrun_rank(std::size_t node_count, const env_lookup& env) {
  auto rank = number_var(env, "NODE_RANK");
  auto world = number_var(env, "WORLD_SIZE");
  if (!rank || !world)
    return (!rank ? rank.error() : world.error()).with_context("torchrun");
  if (*world != node_count)
    return make_error(errc::invalid_argument,
                      fmt::format("torchrun: WORLD_SIZE={} but the deployment has {} nodes: "
                                  "start one process per node",
                                  *world, node_count));
  job_rank out{"torchrun", *rank, {}};
  if (const auto master = env("MASTER_ADDR"))
    out.detail = fmt::format("MASTER_ADDR={} (unused: nodes meet at their control ports)", *master);
  return std::optional<job_rank>{std::move(out)};
}

}  // namespace

std::optional<rank_source> parse_rank_source(std::string_view text) noexcept {
  if (text == "auto")
    return rank_source::automatic;
  if (text == "none")
    return rank_source::none;
  if (text == "slurm")
    return rank_source::slurm;
  if (text == "torchrun")
    return rank_source::torchrun;
  return std::nullopt;
}

env_lookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string{name}.c_str());
    return value ? std::optional<std::string>{value} : std::nullopt;
  };
}

result<std::optional<job_rank>> detect_rank(rank_source source, std::size_t node_count,
                                            const env_lookup& env) {
  if (source == rank_source::automatic)
    source = env("SLURM_PROCID") ? rank_source::slurm
             : env("NODE_RANK")  ? rank_source::torchrun
                                 : rank_source::none;
  result<std::optional<job_rank>> found = std::optional<job_rank>{};
  switch (source) {
    case rank_source::none:
    case rank_source::automatic:
      return std::optional<job_rank>{};
    case rank_source::slurm:
      found = slurm_rank(node_count, env);
      break;
    case rank_source::torchrun:
      found = torchrun_rank(node_count, env);
      break;
  }
  if (found && *found && (*found)->rank >= node_count)
    return make_error(errc::out_of_range,
                      fmt::format("{}: rank {} is past the last of the deployment's {} nodes",
                                  (*found)->scheduler, (*found)->rank, node_count));
  return found;
}

result<std::vector<std::string>> expand_hostlist(std::string_view list) {
  std::vector<std::string> hosts;
  while (!list.empty()) {
    // The next top-level comma ends a host expression; commas inside [] do not.
    std::size_t end = 0;
    int depth = 0;
    for (; end < list.size() && (depth > 0 || list[end] != ','); ++end)
      depth += list[end] == '[' ? 1 : list[end] == ']' ? -1 : 0;
    const auto item = list.substr(0, end);
    list = end < list.size() ? list.substr(end + 1) : std::string_view{};
    const auto open = item.find('[');
    if (open == std::string_view::npos) {
      if (!item.empty())
        hosts.emplace_back(item);
      continue;
    }
    const auto close = item.find(']', open);
    if (close == std::string_view::npos)
      return make_error(errc::parse_error, fmt::format("'{}' has no closing ']'", item));
    auto done = expand_ranges(item.substr(0, open), item.substr(open + 1, close - open - 1),
                              item.substr(close + 1), hosts);
    if (!done)
      return done.error().with_context(std::string{item});
  }
  return hosts;
}

}  // namespace mstar::launch
