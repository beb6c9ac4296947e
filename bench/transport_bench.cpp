// Transport bandwidth between two processes: a realistic set of KV pages
// (256 of 2 MiB, 4,096 of 64 KiB, in scattered order so no run coalesces)
// pulled and pushed over UCX's `tcp` and `sm` transports, and copied from a
// mapped same-host segment. Baselines measured in the same run:
// `ucx_perftest` put bandwidth for the same transport and message size, and
// memcpy of the same pages inside one process.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <numeric>
#include <unistd.h>

#include "bench/harness.hpp"
#include "bench/transport_bench_support.hpp"
#include "kernels/host_arena.hpp"
#include "transport/agent.hpp"
#include "transport/shm.hpp"

namespace {

using namespace mstar::transport;
using mstar::bench::line_pipe;
using seconds = std::chrono::duration<double>;

struct page_set {
  std::uint64_t pages;
  std::uint64_t page_bytes;
  [[nodiscard]] std::string name() const {
    return page_bytes >= (1U << 20) ? fmt::format("{}x{}MiB", pages, page_bytes >> 20)
                                    : fmt::format("{}x{}KiB", pages, page_bytes >> 10);
  }
  [[nodiscard]] arena_layout layout() const {
    return arena_layout{arena_kind::kv_pages, "kv", 1, pages, page_bytes};
  }
};

// The bytes every page of the source holds, and what the destination pushes
// back: every transfer is checked to have moved them (a bench that moves the
// wrong bytes, or none, fails instead of reporting a rate).
constexpr unsigned char source_byte = 0x5A;
constexpr unsigned char pushed_byte = 0xA5;

bool all_bytes(const std::byte* p, std::uint64_t n, unsigned char value) {
  return std::all_of(p, p + n, [value](std::byte b) { return b == std::byte{value}; });
}

void must(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "transport bench: %s failed\n", what.c_str());
    std::exit(1);
  }
}

agent_options options_for(const std::string& tls, const std::string& name) {
  agent_options o;
  o.name = name;
  o.ucx.config = {{"TLS", tls}, {"NET_DEVICES", "lo"}};
  o.detect_peer_failure = tls != "sm";
  return o;
}

// Every page once, destination = source * stride + 1 mod pages (stride odd,
// not 1 and prime to `pages`, so the map is a permutation), so neighbouring
// pages never stay neighbours: one operation each.
std::vector<unit_pair> scattered(std::uint64_t pages) {
  std::vector<unit_pair> pairs;
  std::uint64_t stride = 1;
  if (pages > 4) {
    stride = 3;
    while (std::gcd(stride, pages) != 1)
      stride += 2;
  }
  for (std::uint64_t p = 0; p < pages; ++p)
    pairs.push_back(
        {static_cast<std::int32_t>(p), static_cast<std::int32_t>((p * stride + 1) % pages)});
  return pairs;
}

// The serving process: an arena (in a segment when `deployment` is set), its
// descriptor on `out`, served until "done" (nothing was pushed: the arena
// still holds source_byte) or "done-pushed" (every page holds pushed_byte)
// arrives on `in`; exit 14 when the arena holds anything else.
// Where the arenas of a case live.
enum class memory { plain, segment, ucx };

int serve(const std::string& tls, page_set set, memory where, line_pipe& out, line_pipe& in) {
  auto a = agent::make(options_for(tls, "bench-source"));
  if (!a)
    return 10;
  std::optional<mstar::kernels::shm_arena> segment;
  std::optional<mstar::kernels::host_arena> plain;
  const auto layout = set.layout();
  caf::expected<local_arena_id> id = local_arena_id{0};
  if (where == memory::segment) {
    auto s = create_segment("bench" + std::to_string(::getppid()), "kv", layout.bytes());
    if (!s)
      return 11;
    segment.emplace(std::move(*s));
    id = (*a)->register_segment(*segment, layout);
  } else if (where == memory::ucx) {
    id = (*a)->allocate_arena(layout);
  } else {
    plain.emplace(layout.bytes());
    id = (*a)->register_arena(plain->data(), layout);
  }
  if (!id)
    return 12;
  std::byte* base = (*a)->arena_base(*id);
  std::memset(base, source_byte, layout.bytes());
  if (!(*a)->start_progress_thread() || !out.send(to_json(*(*a)->describe(*id))))
    return 12;
  const auto done = in.receive(std::chrono::minutes{10});
  if (done != "done" && done != "done-pushed")
    return 13;
  return all_bytes(base, layout.bytes(), done == "done" ? source_byte : pushed_byte) ? 0 : 14;
}

// Seconds per transfer of `set`, `rounds` times, against a forked peer:
// scattered pages both ways, and the same page put `pages` times over
// (cache-hot, as ucx_perftest reuses one buffer).
struct peer_run {
  std::vector<double> pull_s, push_s, push_hot_s;
};

transfer_plan same_page_repeated(page_set set) {
  transfer_plan plan;
  plan.num_arenas = 1;
  plan.ranges.assign(set.pages, byte_range{0, 0, 0, set.page_bytes});
  plan.total_bytes = set.pages * set.page_bytes;
  return plan;
}

peer_run measure(const std::string& tls, page_set set, int rounds, memory where) {
  line_pipe to_parent, to_child;
  const bool mapped = where == memory::segment;
  const pid_t child = ::fork();
  if (child == 0)
    ::_exit(serve(tls, set, where, to_parent, to_child));
  must(child > 0, "fork");
  peer_run run;
  {
    auto b = agent::make(options_for(tls, "bench-destination"));
    must(static_cast<bool>(b), "agent");
    const auto layout = set.layout();
    mstar::kernels::host_arena dst{where == memory::ucx ? 0 : layout.bytes()};
    auto local = where == memory::ucx ? (*b)->allocate_arena(layout)
                                      : (*b)->register_arena(dst.data(), layout);
    must(static_cast<bool>(local), "destination arena");
    std::memset((*b)->arena_base(*local), 1, layout.bytes());
    const auto text = to_parent.receive(std::chrono::seconds{60});
    must(local && text, "peer start-up (" + tls + ")");
    auto remote = (*b)->attach(*descriptor_from_json(*text));
    must(remote && (*b)->is_mapped(*remote) == mapped, "attach");
    const auto plan = plan_pages(layout, layout, scattered(set.pages));
    const auto hot = same_page_repeated(set);
    const auto time = [&](direction dir, const transfer_plan& p) {
      const auto t0 = clock::now();
      auto h = (*b)->start(dir, p, {{*local, *remote}}, t0 + std::chrono::minutes{2});
      must(h && (*b)->wait(*h), "transfer over " + tls);
      return seconds{clock::now() - t0}.count();
    };
    std::byte* dst_base = (*b)->arena_base(*local);
    for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms up
      // What the source holds: its own bytes until the first push replaced
      // them with ours (a mapped segment is never pushed to).
      const unsigned char expect = r == 0 || mapped ? source_byte : pushed_byte;
      std::memset(dst_base, 1, layout.bytes());
      const double pull = time(direction::read, *plan);
      must(all_bytes(dst_base, layout.bytes(), expect),
           "pull over " + tls + " (the pages arrived with other bytes)");
      std::memset(dst_base, pushed_byte, layout.bytes());
      const double push = mapped ? 0 : time(direction::write, *plan);
      const double push_hot = mapped ? 0 : time(direction::write, hot);
      if (r > 0) {
        run.pull_s.push_back(pull);
        run.push_s.push_back(push);
        run.push_hot_s.push_back(push_hot);
      }
    }
  }
  to_child.send(mapped ? "done" : "done-pushed");
  const int peer = mstar::bench::wait_exit(child, std::chrono::seconds{30});
  must(peer != 14, "push over " + tls + " (the peer's pages hold other bytes)");
  must(peer == 0, fmt::format("peer exit (status {})", peer));
  return run;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// memcpy of the same scattered pages between two pre-faulted arenas.
double memcpy_rate(page_set set, int rounds) {
  mstar::kernels::host_arena src{set.layout().bytes()}, dst{set.layout().bytes()};
  std::memset(src.data(), 3, src.size());
  const auto pairs = scattered(set.pages);
  std::vector<double> rates;
  for (int r = 0; r < rounds + 1; ++r) {
    const auto t0 = clock::now();
    for (const auto& p : pairs)
      std::memcpy(dst.data() + p.dst * set.page_bytes, src.data() + p.src * set.page_bytes,
                  set.page_bytes);
    const seconds dt = clock::now() - t0;
    if (r > 0)
      rates.push_back(static_cast<double>(src.size()) / dt.count());
  }
  return median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "transport benchmark: KV pages between two processes over UCX tcp / sm and a "
      "mapped segment, against ucx_perftest put bandwidth and memcpy"};
  bool as_json = false;
  int rounds = 5;
  std::uint64_t large = 256, small = 4096;
  std::vector<std::string> transports{"tcp", "sm"};
  app.add_flag("--json", as_json, "One JSON object per line");
  app.add_option("--rounds", rounds, "Measured rounds (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--large-pages", large, "Pages of 2 MiB")->check(CLI::PositiveNumber);
  app.add_option("--small-pages", small, "Pages of 64 KiB")->check(CLI::PositiveNumber);
  app.add_option("--transports", transports, "UCX transports to measure (tcp, sm)");
  CLI11_PARSE(app, argc, argv);

  std::vector<mstar::bench::comparison> results;
  const auto gbps = [](double bytes_per_s) { return bytes_per_s / 1e9; };
  for (const page_set set : {page_set{large, 2U << 20}, page_set{small, 64U << 10}}) {
    const double bytes = static_cast<double>(set.layout().bytes());
    const double copy = memcpy_rate(set, rounds);
    for (const auto& tls : transports) {
      std::vector<double> perf;
      for (int r = 0; r < std::max(1, rounds / 2); ++r) {
        if (auto bw = mstar::bench::perftest_put_bandwidth(tls, set.page_bytes, set.pages))
          perf.push_back(*bw);
      }
      must(!perf.empty(), "ucx_perftest over " + tls);
      const double perf_bw = median(perf);
      // UCX-allocated arenas let the shared-memory transports map the peer's
      // memory instead of copying through the kernel (cma).
      for (const auto where : {memory::plain, memory::ucx}) {
        if (where == memory::ucx && tls != "sm")
          continue;
        const auto run = measure(tls, set, rounds, where);
        const std::string prefix = tls + (where == memory::ucx ? "_ucxmem" : "");
        for (const auto& [what, times] :
             {std::pair{"pull", run.pull_s}, {"push", run.push_s}, {"push_hot", run.push_hot_s}}) {
          mstar::bench::comparison c{
              "transport",        fmt::format("{}_{}_{}", prefix, what, set.name()),
              "GB_per_s",         "GB/s",
              "ucx_perftest_put", gbps(bytes / median(times)),
              gbps(perf_bw),      {}};
          c.extra = {{"memcpy_GB_per_s", gbps(copy)},
                     {"ratio_to_memcpy", bytes / median(times) / copy}};
          results.push_back(c);
        }
      }
    }
    const auto mapped = measure("tcp", set, rounds, memory::segment);
    results.push_back({"transport",
                       fmt::format("shm_map_pull_{}", set.name()),
                       "GB_per_s",
                       "GB/s",
                       "memcpy",
                       gbps(bytes / median(mapped.pull_s)),
                       gbps(copy),
                       {}});
  }
  mstar::bench::report(results, as_json);
  return 0;
}
