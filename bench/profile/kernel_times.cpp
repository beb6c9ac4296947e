// A CUPTI injection library: loaded into any CUDA process through
// CUDA_INJECTION64_PATH, it records every kernel (graph launches included)
// and every memcpy / memset with its device start and end, and at exit
// writes one line per kernel name (calls, total, mean, share of the summed
// kernel time) to $MSTAR_KERNEL_PROFILE (default stderr), biggest first, and
// with $MSTAR_KERNEL_PROFILE_JSON set, the same as JSON lines. With
// $MSTAR_KERNEL_TIMELINE set, the last $MSTAR_KERNEL_TIMELINE_N (default
// 600) kernels too, one JSON line each in start order (name, start and end
// in ns from the first of them): a decode step's kernels as they ran, with
// chained launches overlapping (bench/profile/timeline.py reads them). For the
// per-kernel time shares of a benchmark run on a machine without Nsight:
//   bash bench/profile/build.sh            # needs CUPTI's headers (pip wheel)
//   CUDA_INJECTION64_PATH=$PWD/.profile/libmstar_kernel_times.so
//     MSTAR_KERNEL_PROFILE=out.txt mstar-bench-model-gpu ...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cupti.h>
#include <cxxabi.h>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct totals {
  std::uint64_t calls = 0, ns = 0;
};

std::mutex guard;
std::map<std::string, totals>& by_name() {
  static auto* m = new std::map<std::string, totals>;  // outlives atexit handlers
  return *m;
}

struct span {
  std::string name;
  std::uint64_t start = 0, end = 0;
};

// The last timeline_n() kernels seen, a ring (CUPTI hands buffers over in
// completion order, so the ring is sorted by start before it is written).
std::size_t timeline_n() {
  static const std::size_t n = [] {
    const char* e = std::getenv("MSTAR_KERNEL_TIMELINE_N");
    const long v = e != nullptr ? std::atol(e) : 600;
    return static_cast<std::size_t>(v > 0 ? v : 600);
  }();
  return n;
}
std::vector<span>& ring() {
  static auto* r = new std::vector<span>;
  return *r;
}
std::size_t ring_next = 0;

std::string short_name(const char* mangled) {
  if (mangled == nullptr)
    return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  // "(anonymous namespace)::" would end the name at its parenthesis.
  for (auto at = s.find("(anonymous namespace)::"); at != std::string::npos;
       at = s.find("(anonymous namespace)::"))
    s.erase(at, 23);
  // Drop the parameter list; keep the template arguments (they name the
  // variant), casts in them included: "(prologue)2" is inside the brackets.
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<')
      ++depth;
    else if (s[i] == '>')
      --depth;
    else if (s[i] == '(' && depth == 0 && i > 0) {
      s.resize(i);
      break;
    }
  }
  for (const char* prefix : {"void ", "mstar::kernels::cuda::detail::", "mstar::kernels::cuda::"}) {
    for (auto at = s.find(prefix); at != std::string::npos; at = s.find(prefix))
      s.erase(at, std::char_traits<char>::length(prefix));
  }
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr std::size_t bytes = 16 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer != nullptr ? bytes : 0;
  *max_records = 0;
}

void add(const std::string& name, std::uint64_t start, std::uint64_t end) {
  std::lock_guard lock(guard);
  auto& t = by_name()[name];
  ++t.calls;
  t.ns += end > start ? end - start : 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      std::string name = short_name(k->name);
      static const bool timeline = std::getenv("MSTAR_KERNEL_TIMELINE") != nullptr;
      if (timeline) {
        std::lock_guard lock(guard);
        auto& r = ring();
        if (r.size() < timeline_n())
          r.push_back({name, k->start, k->end});
        else
          r[ring_next] = {name, k->start, k->end};
        ring_next = (ring_next + 1) % timeline_n();
      }
      add(name, k->start, k->end);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      static const char* kinds[] = {"?",    "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                    "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
      const unsigned kind = m->copyKind < 11 ? m->copyKind : 0;
      add(std::string("[memcpy ") + kinds[kind] + "]", m->start, m->end);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      add("[memset]", m->start, m->end);
    }
  }
  std::free(buffer);
}

std::string json_escaped(const std::string& name) {
  std::string escaped;
  for (const char c : name) {
    if (c == '"' || c == '\\')
      escaped += '\\';
    escaped += c;
  }
  return escaped;
}

void write_timeline(const char* path) {
  std::vector<span> r;
  {
    std::lock_guard lock(guard);
    r = ring();
  }
  std::sort(r.begin(), r.end(), [](const span& a, const span& b) { return a.start < b.start; });
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr || r.empty()) {
    if (f != nullptr)
      std::fclose(f);
    return;
  }
  const std::uint64_t t0 = r.front().start;
  for (const span& s : r) {
    std::fprintf(f, "{\"kernel\": \"%s\", \"start_ns\": %llu, \"end_ns\": %llu}\n",
                 json_escaped(s.name).c_str(), static_cast<unsigned long long>(s.start - t0),
                 static_cast<unsigned long long>(s.end - t0));
  }
  std::fclose(f);
}

void report() {
  cuptiActivityFlushAll(1);
  if (const char* path = std::getenv("MSTAR_KERNEL_TIMELINE"))
    write_timeline(path);
  std::vector<std::pair<std::string, totals>> rows;
  std::uint64_t kernel_ns = 0;
  {
    std::lock_guard lock(guard);
    rows.assign(by_name().begin(), by_name().end());
  }
  for (const auto& [name, t] : rows)
    kernel_ns += t.ns;
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  const char* path = std::getenv("MSTAR_KERNEL_PROFILE");
  std::FILE* out = path != nullptr ? std::fopen(path, "w") : stderr;
  if (out == nullptr)
    out = stderr;
  std::fprintf(out, "%-8s %10s %12s %10s  %s\n", "share", "calls", "total us", "mean us", "kernel");
  for (const auto& [name, t] : rows) {
    std::fprintf(
        out, "%7.2f%% %10llu %12.1f %10.2f  %s\n",
        kernel_ns > 0 ? 100.0 * static_cast<double>(t.ns) / static_cast<double>(kernel_ns) : 0.0,
        static_cast<unsigned long long>(t.calls), static_cast<double>(t.ns) / 1e3,
        static_cast<double>(t.ns) / 1e3 / static_cast<double>(std::max<std::uint64_t>(t.calls, 1)),
        name.c_str());
  }
  std::fprintf(out, "%7.2f%% %10s %12.1f %10s  (all device activity)\n", 100.0, "",
               static_cast<double>(kernel_ns) / 1e3, "");
  if (out != stderr)
    std::fclose(out);
  if (const char* json = std::getenv("MSTAR_KERNEL_PROFILE_JSON")) {
    if (std::FILE* j = std::fopen(json, "w")) {
      for (const auto& [name, t] : rows) {
        std::fprintf(
            j, "{\"kernel\": \"%s\", \"calls\": %llu, \"total_us\": %.3f, \"share\": %.6f}\n",
            json_escaped(name).c_str(), static_cast<unsigned long long>(t.calls),
            static_cast<double>(t.ns) / 1e3,
            kernel_ns > 0 ? static_cast<double>(t.ns) / static_cast<double>(kernel_ns) : 0.0);
      }
      std::fclose(j);
    }
  }
}

}  // namespace

extern "C" int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS)
    return 0;
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  std::atexit(report);
  return 1;
}
