#include "serve/metrics.hpp"

#include <fmt/format.h>

#include "serve/generation.hpp"

namespace mstar::serve {
namespace {

std::vector<double> latency_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
          0.75,  1.0,    2.5,   5.0,  7.5,  10,   20,   40,   80,  160,  640};
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void sample(std::string& out, const std::string& name, double v) {
  out += fmt::format("{} {}\n", name, v);
}

}  // namespace

histogram::histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(bounds_.size(), 0) {}

void histogram::observe(double v) {
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (v <= bounds_[i]) {
      ++buckets_[i];
      break;
    }
  }
  sum_ += v;
  ++count_;
}

void histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name,
                     sum_, name, count_);
}

metrics::metrics() : ttft_(latency_bounds()), itl_(latency_bounds()), e2e_(latency_bounds()) {}

void metrics::finished(const generation& g) {
  const std::lock_guard lock{mutex_};
  const auto& u = g.usage();
  ++finished_[g.finish_reason().empty() ? "abort" : g.finish_reason()];
  prompt_tokens_ += static_cast<std::uint64_t>(u.prompt_tokens);
  generation_tokens_ += static_cast<std::uint64_t>(u.completion_tokens);
  images_ += g.request().images.size();
  cache_queried_ += static_cast<std::uint64_t>(u.prompt_tokens);
  cache_hit_ += static_cast<std::uint64_t>(u.cached_tokens);
  const auto& t = g.timing();
  if (t.ttft_s)
    ttft_.observe(*t.ttft_s);
  for (const auto gap : t.inter_token_s)
    itl_.observe(gap);
  if (t.e2e_s > 0)
    e2e_.observe(t.e2e_s);
}

void metrics::responded(int status) {
  const std::lock_guard lock{mutex_};
  ++responses_[status];
}

std::string metrics::render(const engine_gauges* engine) const {
  std::string out;
  out.reserve(8192);
  {
    const std::lock_guard lock{mutex_};
    header(out, "mstar:request_success_total", "counter",
           "Generation requests that ended, by finish reason.");
    for (const char* reason : {"stop", "length", "abort", "error"}) {
      const auto it = finished_.find(reason);
      out += fmt::format("mstar:request_success_total{{finished_reason=\"{}\"}} {}\n", reason,
                         it == finished_.end() ? 0 : it->second);
    }
    header(out, "mstar:http_responses_total", "counter", "HTTP responses, by status code.");
    for (const auto& [status, count] : responses_)
      out += fmt::format("mstar:http_responses_total{{code=\"{}\"}} {}\n", status, count);
    header(out, "mstar:prompt_tokens_total", "counter", "Prompt tokens of ended requests.");
    sample(out, "mstar:prompt_tokens_total", static_cast<double>(prompt_tokens_));
    header(out, "mstar:generation_tokens_total", "counter", "Generated tokens of ended requests.");
    sample(out, "mstar:generation_tokens_total", static_cast<double>(generation_tokens_));
    header(out, "mstar:request_images_total", "counter", "Images of ended chat requests.");
    sample(out, "mstar:request_images_total", static_cast<double>(images_));
    header(out, "mstar:prefix_cache_queries_total", "counter",
           "Prompt tokens looked up in the prefix cache.");
    sample(out, "mstar:prefix_cache_queries_total", static_cast<double>(cache_queried_));
    header(out, "mstar:prefix_cache_hits_total", "counter",
           "Prompt tokens served from cached KV pages.");
    sample(out, "mstar:prefix_cache_hits_total", static_cast<double>(cache_hit_));
    ttft_.render(out, "mstar:time_to_first_token_seconds",
                 "Time from request arrival to its first token.");
    itl_.render(out, "mstar:inter_token_latency_seconds",
                "Time between two deltas of one sequence.");
    e2e_.render(out, "mstar:e2e_request_latency_seconds",
                "Time from request arrival to its last token.");
  }
  if (engine != nullptr) {
    const auto& s = *engine;
    auto gauge = [&](const char* name, const char* help, std::int64_t v) {
      header(out, name, "gauge", help);
      sample(out, name, static_cast<double>(v));
    };
    gauge("mstar:num_requests_running", "Sequences in the running batch.", s.running);
    gauge("mstar:num_requests_waiting", "Sequences waiting to start.", s.waiting);
    gauge("mstar:kv_pages_total", "KV pages in the pool.", s.kv_pages);
    // The sink page and the sink slot (always reserved) count as neither
    // used nor free.
    gauge("mstar:kv_pages_used", "KV pages held by sequences.",
          std::max<std::int64_t>(
              s.kv_pages - s.kv_free_pages - s.kv_evictable_pages - (s.kv_pages > 0 ? s.nodes : 0),
              0));
    gauge("mstar:kv_pages_cached", "KV pages only the prefix cache holds (reusable, evictable).",
          s.kv_evictable_pages);
    gauge("mstar:kv_pages_free", "KV pages on the free list.", s.kv_free_pages);
    gauge("mstar:recurrent_slots_total", "Recurrent state slots.", s.slots);
    gauge("mstar:recurrent_slots_used", "Recurrent state slots held by sequences.",
          std::max<std::int64_t>(s.slots - s.free_slots - (s.slots > 0 ? s.nodes : 0), 0));
    gauge("mstar:recurrent_slots_free", "Recurrent state slots free.", s.free_slots);
    gauge("mstar:recurrent_checkpoints",
          "Recurrent-state checkpoints held for prefix reuse (hybrid models).", s.checkpoints);
    header(out, "mstar:prefix_cache_checkpoint_hits_total", "counter",
           "Prompt tokens whose recurrent state came from a checkpoint (hybrid models; their "
           "KV pages count in mstar:prefix_cache_hits_total).");
    sample(out, "mstar:prefix_cache_checkpoint_hits_total",
           static_cast<double>(s.checkpoint_hit_tokens));
    header(out, "mstar:engine_steps_total", "counter", "Engine steps run.");
    sample(out, "mstar:engine_steps_total", static_cast<double>(s.steps));
    header(out, "mstar:preemptions_total", "counter", "Sequences preempted for memory.");
    sample(out, "mstar:preemptions_total", static_cast<double>(s.preemptions));
    if (s.router) {
      gauge("mstar:deployment_nodes_alive", "Nodes of the deployment the router can reach.",
            s.router->nodes_alive);
      header(out, "mstar:handoffs_total", "counter",
             "Requests handed from a prefill node to a decode node.");
      sample(out, "mstar:handoffs_total", static_cast<double>(s.router->handoffs));
      header(out, "mstar:handoffs_adopted_total", "counter",
             "Handoffs whose decode node adopted the published KV pages and slots (the rest "
             "recomputed the prompt).");
      sample(out, "mstar:handoffs_adopted_total", static_cast<double>(s.router->adopted));
      header(out, "mstar:reroutes_total", "counter", "Requests moved off a node that left.");
      sample(out, "mstar:reroutes_total", static_cast<double>(s.router->reroutes));
      const auto& r = *s.router;
      auto counter = [&](const char* name, const char* help, double v) {
        header(out, name, "counter", help);
        sample(out, name, v);
      };
      counter("mstar:transfer_pulls_total",
              "Published prompts a decode node read from a prefill node and verified.",
              static_cast<double>(r.pulls));
      counter("mstar:transfer_mapped_pulls_total",
              "Pulls through a mapped shared-memory segment (nodes on one host).",
              static_cast<double>(r.mapped_pulls));
      counter("mstar:transfer_failed_total",
              "Adoptions given up (transfer error, checksum mismatch, timeout): the decode node "
              "recomputed the prompt.",
              static_cast<double>(r.failed_adoptions));
      counter("mstar:transfer_pages_fetched_total", "KV pages read from a prefill node.",
              static_cast<double>(r.pages_fetched));
      counter("mstar:transfer_pages_local_total",
              "KV pages a decode node already held under the same keys (adopted, no copy).",
              static_cast<double>(r.pages_local));
      counter("mstar:transfer_slots_total", "Recurrent slots read from a prefill node.",
              static_cast<double>(r.slots_fetched));
      counter("mstar:transfer_bytes_total", "Bytes read from prefill nodes.",
              static_cast<double>(r.bytes));
      counter("mstar:transfer_seconds_total",
              "Wall time of the pulls, from start to verified checksums.", r.transfer_seconds);
      counter("mstar:transfer_copy_seconds_total",
              "Of the pulls' time, moving the bytes (start to landed).", r.copy_seconds);
      counter("mstar:transfer_verify_seconds_total",
              "Of the pulls' time, checking the per-page and per-slot checksums.",
              r.verify_seconds);
    }
  }
  return out;
}

}  // namespace mstar::serve
