// `mstar-tool sim`: drive the pools from a trace. JSON Lines in (a config
// line, then ops), one JSON line out per input line. Every op is parsed and
// checked in full before the pools are touched, so a bad line leaves them
// exactly as they were.
#include <fmt/format.h>

#include <iostream>
#include <limits>
#include <memory>
#include <set>
#include <string>

#include "core/hex.hpp"
#include "launcher/tool/commands.hpp"
#include "launcher/tool/json_args.hpp"
#include "resources/kv/kv_pool.hpp"
#include "resources/step/step_runner.hpp"

namespace mstar::tool {
namespace {

using namespace mstar::resources;

constexpr auto sim_help = R"(Replays a trace against the pools: JSON Lines on stdin, one line out per line.

First line, the pools:
  {"config":{"kv":{"page_size":8,"max_num_pages":64,"num_layers":1,"num_kv_heads":1,
                   "head_dim":8,"prefix_cache":true,"prefix_cache_salt":"","dtype":"bfloat16",
                   "model":"<fingerprint of the weights>"}}}
Ops:
  {"op":"step","kv":{"segments":[{"rid":"a","label":"main","span":16}],"commit":true,
     "pre_forks":[["main","draft"]],"post_forks":[],"fork_rids":["a"],
     "retention":[{"rid":"a","label":"main","context_budget":32,"protected_prefix":24}]},
   "padding_rows":0,"capture":false}
      admit, plan and commit (admit then rollback when refused)
  {"op":"ingest","rid":"a","prefix":{"main":{"keys":["<hex>"...],"tail":[ids]}},"prefix_cache":true}
  {"op":"probe","rid":"a"}          cached-prefix probe (takes a lease)
  {"op":"extend","rid":"a","label":"main","ids":[...]}   sampled ids, for generation keying
  {"op":"remove","rid":"a"}   {"op":"reset","rid":"a","free":true}
  {"op":"protect_prefix","rid":"a","label":"main","tokens":n}
  {"op":"release_oldest","rid":"a","label":"main","tokens":n}
Output: {"ok":..,"reason":..,"matched_tokens":n,"plan":{label:{qo_indptr,kv_indptr,kv_indices,
last_page_len}},"kv":{"free_pages","cached_pages","streams":{"a/main":{"stored_len","released",
"protected_prefix","pages"}}}}; a bad line gets {"ok":false,"error":".."} and changes nothing.
Exit code 1 when any line was invalid (refusals are outcomes, not errors).)";

constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();

result<std::string> get_string(const json& obj, std::string_view name, std::string_view what) {
  auto f = field(obj, name);
  if (!f) return f.error().with_context(what);
  if (!(*f)->is_string()) {
    return make_error(errc::invalid_argument, fmt::format("{}.{} must be a string", what, name));
  }
  return (*f)->get<std::string>();
}

result<std::int64_t> get_int(const json& obj, std::string_view name, std::string_view what,
                             std::int64_t lo, std::int64_t hi) {
  auto f = field(obj, name);
  if (!f) return f.error().with_context(what);
  return to_int(**f, fmt::format("{}.{}", what, name), lo, hi);
}

result<kv_pool_config> parse_kv_config(const json& c, std::string& model) {
  if (auto ok = check_fields(c, "config.kv",
                             {"page_size", "max_num_pages", "num_layers", "num_kv_heads",
                              "head_dim", "prefix_cache", "prefix_cache_salt", "dtype", "model"});
      !ok) {
    return ok.error();
  }
  kv_pool_config cfg;
  cfg.dtype = dtype::float32;
  std::pair<const char*, std::int64_t*> ints[] = {{"page_size", &cfg.page_size},
                                                  {"max_num_pages", &cfg.max_num_pages},
                                                  {"num_layers", &cfg.num_layers},
                                                  {"num_kv_heads", &cfg.num_kv_heads},
                                                  {"head_dim", &cfg.head_dim}};
  for (auto& [name, out] : ints) {
    if (!c.contains(name)) continue;
    auto v = to_int(c.at(name), fmt::format("config.kv.{}", name), 1, i64_max);
    if (!v) return v.error();
    *out = *v;
  }
  if (c.contains("prefix_cache")) {
    if (!c.at("prefix_cache").is_boolean()) {
      return make_error(errc::invalid_argument, "config.kv.prefix_cache must be true or false");
    }
    cfg.prefix_cache = c.at("prefix_cache").get<bool>();
  }
  if (c.contains("prefix_cache_salt")) {
    auto s = get_string(c, "prefix_cache_salt", "config.kv");
    if (!s) return s.error();
    cfg.prefix_cache_salt = *s;
  }
  if (c.contains("dtype")) {
    auto s = get_string(c, "dtype", "config.kv");
    if (!s) return s.error();
    auto d = parse_dtype(*s);
    if (!d) return d.error().with_context("config.kv.dtype");
    cfg.dtype = *d;
  }
  model = "mstar-tool-sim";
  if (c.contains("model")) {
    auto s = get_string(c, "model", "config.kv");
    if (!s) return s.error();
    model = *s;
  }
  if (auto ok = cfg.validate(); !ok) return ok.error().with_context("config.kv");
  return cfg;
}

result<std::vector<fork>> parse_forks(const json& arr, const std::string& what) {
  if (!arr.is_array()) return make_error(errc::invalid_argument, what + " must be an array");
  std::vector<fork> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const auto& f = arr[i];
    if (!f.is_array() || f.size() != 2 || !f[0].is_string() || !f[1].is_string()) {
      return make_error(errc::invalid_argument,
                        fmt::format("{}[{}] must be [\"from_label\", \"to_label\"]", what, i));
    }
    out.emplace_back(f[0].get<std::string>(), f[1].get<std::string>());
  }
  return out;
}

result<std::shared_ptr<kv_step>> parse_kv_step(const json& k) {
  if (auto ok = check_fields(k, "kv", {"segments", "commit", "pre_forks", "post_forks",
                                       "fork_rids", "retention"});
      !ok) {
    return ok.error();
  }
  auto step = std::make_shared<kv_step>();
  auto segs = field(k, "segments");
  if (!segs) return segs.error().with_context("kv");
  if (!(*segs)->is_array()) return make_error(errc::invalid_argument, "kv.segments must be an array");
  for (std::size_t i = 0; i < (*segs)->size(); ++i) {
    const json& s = (**segs)[i];
    const std::string what = fmt::format("kv.segments[{}]", i);
    if (auto ok = check_fields(s, what, {"rid", "label", "span"}); !ok) return ok.error();
    auto rid = get_string(s, "rid", what);
    if (!rid) return rid.error();
    std::string label = "main";
    if (s.contains("label")) {
      auto l = get_string(s, "label", what);
      if (!l) return l.error();
      label = *l;
    }
    auto span = get_int(s, "span", what, 0, std::numeric_limits<std::int32_t>::max());
    if (!span) return span.error();
    step->segments.push_back({*rid, label, *span});
  }
  if (k.contains("commit")) {
    if (!k.at("commit").is_boolean()) return make_error(errc::invalid_argument, "kv.commit must be a boolean");
    step->commit = k.at("commit").get<bool>();
  }
  for (const char* name : {"pre_forks", "post_forks"}) {
    if (!k.contains(name)) continue;
    auto forks = parse_forks(k.at(name), std::string{"kv."} + name);
    if (!forks) return forks.error();
    (std::string_view{name} == "pre_forks" ? step->pre_forks : step->post_forks) = *forks;
  }
  if (k.contains("fork_rids")) {
    const auto& r = k.at("fork_rids");
    if (!r.is_array()) return make_error(errc::invalid_argument, "kv.fork_rids must be an array");
    std::vector<request_id> rids;
    for (const auto& x : r) {
      if (!x.is_string()) return make_error(errc::invalid_argument, "kv.fork_rids holds strings");
      rids.push_back(x.get<std::string>());
    }
    step->fork_rids = rids;
  }
  if (k.contains("retention")) {
    const auto& r = k.at("retention");
    if (!r.is_array()) return make_error(errc::invalid_argument, "kv.retention must be an array");
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::string what = fmt::format("kv.retention[{}]", i);
      if (auto ok = check_fields(r[i], what, {"rid", "label", "context_budget", "protected_prefix"});
          !ok) {
        return ok.error();
      }
      auto rid = get_string(r[i], "rid", what);
      if (!rid) return rid.error();
      std::string label = "main";
      if (r[i].contains("label")) {
        auto l = get_string(r[i], "label", what);
        if (!l) return l.error();
        label = *l;
      }
      auto budget = get_int(r[i], "context_budget", what, std::numeric_limits<std::int64_t>::min(), i64_max);
      if (!budget) return budget.error();
      std::int64_t prefix = 0;
      if (r[i].contains("protected_prefix")) {
        auto p = get_int(r[i], "protected_prefix", what, std::numeric_limits<std::int64_t>::min(), i64_max);
        if (!p) return p.error();
        prefix = *p;
      }
      auto policy = retention_policy::make(*budget, prefix);
      if (!policy) return policy.error().with_context(what);
      step->retention[{*rid, label}] = *policy;
    }
  }
  return step;
}

json plan_json(const kv_plan& plan) {
  json out = json::object();
  for (const auto& [label, lp] : plan.labels) {
    out[label] = json{{"qo_indptr", lp.qo_indptr},
                      {"kv_indptr", lp.kv_indptr},
                      {"kv_indices", lp.kv_indices},
                      {"last_page_len", lp.last_page_len}};
  }
  return out;
}

std::string refusal_text(const admit_refusal& why) {
  if (const auto* a = std::get_if<allocation_failed>(&why)) {
    return fmt::format("allocation failed ({} pages short): {}", a->pages_short, a->message);
  }
  return refusal_message(why);
}

/// The pools a trace drives and the runner over them.
class simulator {
 public:
  static result<std::unique_ptr<simulator>> make(const json& line) {
    if (auto ok = check_fields(line, "the first line", {"config"}); !ok) return ok.error();
    auto config = field(line, "config");
    if (!config) return make_error(errc::invalid_argument,
                                   "the first line must be {\"config\":{\"kv\":{...}}}");
    if (auto ok = check_fields(**config, "config", {"kv"}); !ok) return ok.error();
    auto kv = field(**config, "kv");
    if (!kv) return kv.error().with_context("config");
    std::string model;
    auto cfg = parse_kv_config(**kv, model);
    if (!cfg) return cfg.error();
    auto sim = std::unique_ptr<simulator>(new simulator);
    auto pool = kv_pool::make("kv", *cfg, model);
    if (!pool) return pool.error();
    sim->kv_ = std::move(*pool);
    auto runner = step_runner::make({sim->kv_.get()});
    if (!runner) return runner.error();
    sim->runner_ = std::make_unique<step_runner>(std::move(*runner));
    return sim;
  }

  result<json> run(const json& op);

  json state() const {
    json streams = json::object();
    for (const auto& [name, s] : kv_->streams()) {
      streams[name] = json{{"stored_len", s.stored_len},
                           {"released", s.released},
                           {"protected_prefix", s.protected_prefix},
                           {"pages", s.pages}};
    }
    return json{{"free_pages", kv_->num_free_pages()},
                {"cached_pages", kv_->num_cached_pages()},
                {"streams", streams}};
  }

 private:
  simulator() = default;
  result<json> step(const json& op);
  result<json> ingest(const json& op);

  std::unique_ptr<kv_pool> kv_;
  std::unique_ptr<step_runner> runner_;
};

result<json> simulator::step(const json& op) {
  if (auto ok = check_fields(op, "step", {"op", "kv", "padding_rows", "capture"}); !ok) {
    return ok.error();
  }
  auto k = field(op, "kv");
  if (!k) return k.error().with_context("step");
  auto parsed = parse_kv_step(**k);
  if (!parsed) return parsed.error();
  auto kv = *parsed;
  step_context ctx;
  if (op.contains("padding_rows")) {
    auto n = to_int(op.at("padding_rows"), "padding_rows", 0, 4096);
    if (!n) return n.error();
    const std::string label = kv->segments.empty() ? "main" : kv->segments.front().label;
    for (std::int64_t i = 0; i < *n; ++i) {
      const std::string rid = fmt::format("__pad{}", i);
      kv->segments.push_back({rid, label, 1});
      ctx.padding_rows.insert(rid);
    }
  }
  if (op.contains("capture")) {
    if (!op.at("capture").is_boolean()) return make_error(errc::invalid_argument, "capture must be a boolean");
    ctx.capture = op.at("capture").get<bool>();
  }
  for (const auto& s : kv->segments) ctx.request_ids.push_back(s.rid);
  const step_bundle bundle{{"kv", kv}};
  const auto admitted = runner_->admit(bundle, ctx);
  if (!admitted.ok()) {
    return json{{"ok", false},
                {"reason", fmt::format("{} refused: {}", admitted.failed_resource,
                                       refusal_text(*admitted.outcome.reason))}};
  }
  if (auto planned = runner_->plan(bundle, ctx); !planned) {
    kv_->rollback_admit(*kv, ctx);
    return planned.error();
  }
  const auto plan = std::static_pointer_cast<const kv_plan>(ctx.plan_results.at("kv"));
  if (auto committed = runner_->commit(bundle, ctx); !committed) {
    kv_->rollback_admit(*kv, ctx);
    return committed.error();
  }
  return json{{"ok", true}, {"plan", plan_json(*plan)}};
}

result<json> simulator::ingest(const json& op) {
  if (auto ok = check_fields(op, "ingest", {"op", "rid", "prefix", "prefix_cache"}); !ok) {
    return ok.error();
  }
  auto rid = get_string(op, "rid", "ingest");
  if (!rid) return rid.error();
  std::map<std::string, kv_prefix_seed> seeds;
  if (op.contains("prefix")) {
    const auto& p = op.at("prefix");
    if (!p.is_object()) return make_error(errc::invalid_argument, "prefix must be an object of label -> {keys, tail}");
    for (const auto& [label, s] : p.items()) {
      const std::string what = "prefix." + label;
      if (auto ok = check_fields(s, what, {"keys", "tail"}); !ok) return ok.error();
      kv_prefix_seed seed;
      auto keys = field(s, "keys");
      if (!keys || !(*keys)->is_array()) {
        return make_error(errc::invalid_argument, what + ".keys must be an array of hex keys");
      }
      for (std::size_t i = 0; i < (*keys)->size(); ++i) {
        auto b = to_bytes((**keys)[i], fmt::format("{}.keys[{}]", what, i));
        if (!b) return b.error();
        if (b->size() != 32) {
          return make_error(errc::invalid_argument,
                            fmt::format("{}.keys[{}] has {} bytes, a page key has 32", what, i, b->size()));
        }
        digest256 d;
        std::copy(b->begin(), b->end(), d.begin());
        seed.keys.push_back(d);
      }
      if (s.contains("tail")) {
        auto tail = to_tokens(s.at("tail"), what + ".tail");
        if (!tail) return tail.error();
        seed.tail = *tail;
      }
      seeds[label] = std::move(seed);
    }
  }
  bool prefix_cache = true;
  if (op.contains("prefix_cache")) {
    if (!op.at("prefix_cache").is_boolean()) return make_error(errc::invalid_argument, "prefix_cache must be a boolean");
    prefix_cache = op.at("prefix_cache").get<bool>();
  }
  kv_->ingest_request(*rid, std::move(seeds), prefix_cache);
  return json{{"ok", true}};
}

result<json> simulator::run(const json& op) {
  if (!op.is_object()) return make_error(errc::invalid_argument, "an op must be a JSON object");
  auto name = get_string(op, "op", "line");
  if (!name) return name.error();
  if (*name == "step") return step(op);
  if (*name == "ingest") return ingest(op);
  static const std::set<std::string> others = {"probe", "extend", "remove", "reset",
                                               "protect_prefix", "release_oldest"};
  if (!others.contains(*name)) {
    return make_error(errc::invalid_argument,
                      fmt::format("unknown op '{}' (step, ingest, probe, extend, remove, reset, "
                                  "protect_prefix, release_oldest)",
                                  *name));
  }
  const bool labelled = *name == "protect_prefix" || *name == "release_oldest" || *name == "extend";
  if (auto ok = labelled ? check_fields(op, *name, {"op", "rid", "label", "tokens", "ids"})
                         : check_fields(op, *name, {"op", "rid", "free"});
      !ok) {
    return ok.error();
  }
  auto rid = get_string(op, "rid", *name);
  if (!rid) return rid.error();
  std::string label = "main";
  if (op.contains("label")) {
    auto l = get_string(op, "label", *name);
    if (!l) return l.error();
    label = *l;
  }
  if (*name == "probe") {
    const auto hit = runner_->resolve_cached_prefix(*rid);
    return json{{"ok", true}, {"matched_tokens", hit.value_or(0)}};
  }
  if (*name == "remove") {
    runner_->remove_request(*rid);
    return json{{"ok", true}};
  }
  if (*name == "reset") {
    bool free = false;
    if (op.contains("free")) {
      if (!op.at("free").is_boolean()) return make_error(errc::invalid_argument, "free must be a boolean");
      free = op.at("free").get<bool>();
    }
    runner_->reset_request(*rid, free);
    return json{{"ok", true}};
  }
  if (*name == "extend") {
    auto ids = field(op, "ids");
    if (!ids) return ids.error().with_context("extend");
    auto tokens = to_tokens(**ids, "ids");
    if (!tokens) return tokens.error();
    kv_->extend_prefix_chain(*rid, label, *tokens);
    return json{{"ok", true}};
  }
  if (*name == "protect_prefix" || *name == "release_oldest") {
    auto tokens = get_int(op, "tokens", *name, 0, i64_max);
    if (!tokens) return tokens.error();
    if (*name == "protect_prefix") {
      if (auto ok = kv_->protect_prefix(*rid, label, *tokens); !ok) {
        return json{{"ok", false}, {"reason", ok.error().message()}};
      }
      return json{{"ok", true}};
    }
    auto freed = kv_->release_oldest(*rid, label, *tokens);
    if (!freed) return json{{"ok", false}, {"reason", freed.error().message()}};
    return json{{"ok", true}, {"released_tokens", *freed}};
  }
  return make_error(errc::invalid_argument, "unreachable op " + *name);
}

void emit(const json& line) {
  std::cout << line.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
}

}  // namespace

void add_sim_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("sim", "Replay a trace of steps and requests against the pools");
  cmd->footer(sim_help);
  cmd->callback([&exit_code] {
    std::unique_ptr<simulator> sim;
    std::string text;
    for (std::size_t number = 1; std::getline(std::cin, text); ++number) {
      const json line = json::parse(text, nullptr, /*allow_exceptions=*/false);
      result<json> out = line.is_discarded()
                             ? result<json>{make_error(errc::parse_error, "the line is not valid JSON")}
                             : result<json>{json{}};
      if (out && !sim) {
        auto made = simulator::make(line);
        if (made) {
          sim = std::move(*made);
          out = json{{"ok", true}};
        } else {
          out = made.error();
        }
      } else if (out) {
        out = sim->run(line);
      }
      if (!out) {
        exit_code = 1;
        emit(json{{"ok", false}, {"error", fmt::format("line {}: {}", number, out.error().message())}});
        continue;
      }
      if (sim) (*out)["kv"] = sim->state();
      emit(*out);
    }
    std::cout.flush();
  });
}

}  // namespace mstar::tool
