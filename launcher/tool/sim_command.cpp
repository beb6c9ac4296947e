// `mstar-tool sim`: drive the pools from a trace. JSON Lines in (a config
// line, then ops), one JSON line out per input line. Every op is parsed and
// checked in full before the pools are touched, so a bad line leaves them
// exactly as they were.
#include <fmt/format.h>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/hex.hpp"
#include "core/untrusted_json.hpp"
#include "launcher/tool/commands.hpp"
#include "launcher/tool/json_args.hpp"
#include "launcher/tool/sim_parse.hpp"
#include "resources/step/step_runner.hpp"

namespace mstar::tool {
namespace {

using namespace mstar::resources;

constexpr auto sim_help =
    R"(Replays a trace against the pools: JSON Lines on stdin, one line out per line.

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
    return fmt::format("allocation failed ({} short): {}", a->pages_short, a->message);
  }
  return refusal_message(why);
}

/// The most bytes the pools of one trace may hold, and pages or slots each
/// pool may count (their bookkeeping is per page or slot): a trace is for
/// looking at the bookkeeping, and the arenas are real memory.
constexpr std::uint64_t max_pool_bytes = std::uint64_t{1} << 30;
constexpr std::int64_t max_pool_units = std::int64_t{1} << 20;

// Refuses a pool past the bounds above, naming them.
result<void> check_pool_bytes(std::string_view what, std::uint64_t bytes, std::int64_t units) {
  if (units > max_pool_units) {
    return make_error(errc::out_of_range,
                      fmt::format("{}: {} pages or slots are more than the {} a sim pool may have",
                                  what, units, max_pool_units));
  }
  if (bytes > max_pool_bytes) {
    return make_error(errc::out_of_range,
                      fmt::format("{}: the pool needs {} bytes, more than the {} bytes (1 GiB) a "
                                  "sim pool may have",
                                  what, bytes, max_pool_bytes));
  }
  return {};
}

/// The pools a trace drives and the runner over them.
class simulator {
 public:
  static result<std::unique_ptr<simulator>> make(const json& line) {
    if (auto ok = check_fields(line, "the first line", {"config"}); !ok)
      return ok.error();
    auto config = field(line, "config");
    if (!config) {
      return make_error(errc::invalid_argument,
                        "the first line must be {\"config\":{\"kv\":{...},\"recurrent\":{...}}}");
    }
    if (auto ok = check_fields(**config, "config", {"kv", "recurrent"}); !ok)
      return ok.error();
    if (!(*config)->contains("kv") && !(*config)->contains("recurrent")) {
      return make_error(errc::invalid_argument, "config names no pool (kv, recurrent)");
    }
    auto sim = std::unique_ptr<simulator>(new simulator);
    std::vector<resource*> resources;
    if ((*config)->contains("kv")) {
      std::string model;
      auto cfg = parse_kv_config((*config)->at("kv"), model);
      if (!cfg)
        return cfg.error();
      if (auto ok = check_pool_bytes("config.kv", cfg->total_bytes(), cfg->max_num_pages); !ok)
        return ok.error();
      auto pool = kv_pool::make("kv", *cfg, model);
      if (!pool)
        return pool.error();
      sim->kv_ = std::move(*pool);
      resources.push_back(sim->kv_.get());
    }
    if ((*config)->contains("recurrent")) {
      auto cfg = parse_recurrent_config((*config)->at("recurrent"));
      if (!cfg)
        return cfg.error();
      if (auto ok = check_pool_bytes("config.recurrent", cfg->total_bytes(), cfg->max_slots); !ok) {
        return ok.error();
      }
      auto pool = recurrent_state_pool::make("recurrent", *cfg);
      if (!pool)
        return pool.error();
      sim->rec_ = std::move(*pool);
      resources.push_back(sim->rec_.get());
    }
    auto runner = step_runner::make(resources);
    if (!runner)
      return runner.error();
    sim->runner_ = std::make_unique<step_runner>(std::move(*runner));
    return sim;
  }

  result<json> run(const json& op);

  /// Both pools' state, as every output line carries it.
  void add_state(json& out) const {
    if (kv_) {
      json streams = json::object();
      for (const auto& [name, s] : kv_->streams()) {
        streams[name] = json{{"stored_len", s.stored_len},
                             {"released", s.released},
                             {"protected_prefix", s.protected_prefix},
                             {"pages", s.pages}};
      }
      out["kv"] = json{{"free_pages", kv_->num_free_pages()},
                       {"cached_pages", kv_->num_cached_pages()},
                       {"streams", streams}};
    }
    if (rec_) {
      json streams = json::object();
      for (const auto& [rid, labels] : rec_names_) {
        for (const auto& label : labels) {
          if (const auto slot = rec_->slot_of(rid, label)) {
            streams[rid + "/" + label] =
                json{{"slot", *slot}, {"has_state", rec_->has_state(rid, label)}};
          }
        }
      }
      json part{{"free_slots", rec_->num_free_slots()}, {"streams", streams}};
      if (rec_plan_)
        part["plan"] = *rec_plan_;
      out["recurrent"] = std::move(part);
    }
  }

 private:
  simulator() = default;
  result<json> step(const json& op);
  result<json> ingest(const json& op);
  [[nodiscard]] result<void> check_capture_pages(const kv_step* kv, const step_context& ctx) const;

  std::unique_ptr<kv_pool> kv_;
  std::unique_ptr<recurrent_state_pool> rec_;
  std::unique_ptr<step_runner> runner_;
  // Streams the recurrent pool was asked about, to report them (the pool is
  // looked up by name; it keeps no list for tools).
  std::map<std::string, std::set<std::string>> rec_names_;
  std::optional<json> rec_plan_;  ///< the last step's recurrent plan, for its output line
};

json recurrent_plan_json(const recurrent_plan& plan) {
  json out = json::object();
  for (const auto& [label, a] : plan.labels) {
    const auto rows = static_cast<std::size_t>(a.num_rows);
    std::vector<bool> has(a.has_state.begin(), a.has_state.begin() + static_cast<long>(rows));
    out[label] = json{{"slot_indices",
                       std::vector<std::int32_t>(a.slot_indices.begin(),
                                                 a.slot_indices.begin() + static_cast<long>(rows))},
                      {"has_state", has},
                      {"num_rows", a.num_rows}};
  }
  return out;
}

// Capture and padding rows address the sink page once per page of their
// span, so a capture step's plan grows with its spans, not the pool: bound
// it by the pages the pool has.
result<void> simulator::check_capture_pages(const kv_step* kv, const step_context& ctx) const {
  if (kv == nullptr || !ctx.capture)
    return {};
  const auto ps = static_cast<std::uint64_t>(kv_->config().geometry.page_size);
  const auto pool_pages = static_cast<std::uint64_t>(kv_->config().max_num_pages);
  std::uint64_t pages = 0;
  for (const auto& seg : kv->segments)
    pages += (static_cast<std::uint64_t>(seg.span) + ps - 1) / ps;  // spans < 2^31: no overflow
  if (pages <= pool_pages)
    return {};
  return make_error(errc::out_of_range,
                    fmt::format("the capture step's rows span {} pages, more than the pool's {}",
                                pages, pool_pages));
}

result<json> simulator::step(const json& op) {
  if (auto ok = check_fields(op, "step", {"op", "kv", "recurrent", "padding_rows", "capture"});
      !ok) {
    return ok.error();
  }
  step_context ctx;
  std::shared_ptr<kv_step> kv;
  std::shared_ptr<recurrent_step> rec;
  if (op.contains("kv")) {
    if (!kv_)
      return make_error(errc::invalid_argument, "step has a kv part but no kv pool is configured");
    auto parsed = parse_kv_step(op.at("kv"));
    if (!parsed)
      return parsed.error();
    kv = *parsed;
  }
  if (op.contains("recurrent")) {
    if (!rec_) {
      return make_error(errc::invalid_argument,
                        "step has a recurrent part but no recurrent pool is configured");
    }
    auto parsed = parse_recurrent_step(op.at("recurrent"), ctx.capture);
    if (!parsed)
      return parsed.error();
    rec = *parsed;
  }
  if (!kv && !rec)
    return make_error(errc::invalid_argument, "step has neither a kv nor a recurrent part");
  if (op.contains("capture")) {
    if (!op.at("capture").is_boolean())
      return make_error(errc::invalid_argument, "capture must be a boolean");
    ctx.capture = ctx.capture || op.at("capture").get<bool>();
  }
  if (op.contains("padding_rows")) {
    auto n = to_int(op.at("padding_rows"), "padding_rows", 0, 4096);
    if (!n)
      return n.error();
    for (std::int64_t i = 0; i < *n; ++i) {
      const std::string rid = fmt::format("__pad{}", i);
      ctx.padding_rows.insert(rid);
      for (resource_step* part :
           {static_cast<resource_step*>(kv.get()), static_cast<resource_step*>(rec.get())}) {
        if (part == nullptr)
          continue;
        const std::string label = part->segments.empty() ? "main" : part->segments.front().label;
        part->segments.push_back({rid, label, 1});
      }
    }
  }
  step_bundle bundle;
  if (kv)
    bundle["kv"] = kv;
  if (rec) {
    bundle["recurrent"] = rec;
    for (const auto& s : rec->segments) {
      if (!ctx.is_padding_row(s.rid))
        rec_names_[s.rid].insert(s.label);
    }
    for (const auto& f : rec->pre_forks)
      for (const auto& s : rec->segments)
        rec_names_[s.rid].insert(f.second);
    for (const auto& f : rec->post_forks)
      for (const auto& s : rec->segments)
        rec_names_[s.rid].insert(f.second);
  }
  for (const auto& [key, part] : bundle) {
    for (const auto& s : part->segments)
      ctx.request_ids.push_back(s.rid);
  }
  if (auto ok = check_capture_pages(kv.get(), ctx); !ok)
    return ok.error();
  rec_plan_.reset();
  const auto admitted = runner_->admit(bundle, ctx);
  if (!admitted.ok()) {
    return json{{"ok", false},
                {"reason", fmt::format("{} refused: {}", admitted.failed_resource,
                                       refusal_text(*admitted.outcome.reason))}};
  }
  auto unwind = [&] { runner_->rollback(bundle, ctx); };
  if (auto planned = runner_->plan(bundle, ctx); !planned) {
    unwind();
    return planned.error();
  }
  json out{{"ok", true}};
  if (kv)
    out["plan"] = plan_json(*std::static_pointer_cast<const kv_plan>(ctx.plan_results.at("kv")));
  if (rec) {
    rec_plan_ = recurrent_plan_json(
        *std::static_pointer_cast<const recurrent_plan>(ctx.plan_results.at("recurrent")));
  }
  if (auto committed = runner_->commit(bundle, ctx); !committed) {
    unwind();
    rec_plan_.reset();
    return committed.error();
  }
  return out;
}

result<json> simulator::ingest(const json& op) {
  if (auto ok = check_fields(op, "ingest", {"op", "rid", "prefix", "prefix_cache"}); !ok) {
    return ok.error();
  }
  auto rid = get_string(op, "rid", "ingest");
  if (!rid)
    return rid.error();
  std::map<std::string, kv_prefix_seed> seeds;
  if (op.contains("prefix")) {
    const auto& p = op.at("prefix");
    if (!p.is_object())
      return make_error(errc::invalid_argument,
                        "prefix must be an object of label -> {keys, tail}");
    for (const auto& [label, s] : p.items()) {
      const std::string what = "prefix." + label;
      if (auto ok = check_fields(s, what, {"keys", "tail"}); !ok)
        return ok.error();
      kv_prefix_seed seed;
      auto keys = field(s, "keys");
      if (!keys || !(*keys)->is_array()) {
        return make_error(errc::invalid_argument, what + ".keys must be an array of hex keys");
      }
      for (std::size_t i = 0; i < (*keys)->size(); ++i) {
        auto b = to_bytes((**keys)[i], fmt::format("{}.keys[{}]", what, i));
        if (!b)
          return b.error();
        if (b->size() != 32) {
          return make_error(
              errc::invalid_argument,
              fmt::format("{}.keys[{}] has {} bytes, a page key has 32", what, i, b->size()));
        }
        digest256 d;
        std::copy(b->begin(), b->end(), d.begin());
        seed.keys.push_back(d);
      }
      if (s.contains("tail")) {
        auto tail = to_tokens(s.at("tail"), what + ".tail");
        if (!tail)
          return tail.error();
        seed.tail = *tail;
      }
      seeds[label] = std::move(seed);
    }
  }
  if (!seeds.empty() && !kv_) {
    return make_error(errc::invalid_argument,
                      "ingest names page keys but no kv pool is configured");
  }
  bool prefix_cache = true;
  if (op.contains("prefix_cache")) {
    if (!op.at("prefix_cache").is_boolean())
      return make_error(errc::invalid_argument, "prefix_cache must be a boolean");
    prefix_cache = op.at("prefix_cache").get<bool>();
  }
  if (kv_)
    kv_->ingest_request(*rid, std::move(seeds), prefix_cache);
  if (rec_)
    rec_->ingest_request(*rid);
  return json{{"ok", true}};
}

result<json> simulator::run(const json& op) {
  if (!op.is_object())
    return make_error(errc::invalid_argument, "an op must be a JSON object");
  auto name = get_string(op, "op", "line");
  if (!name)
    return name.error();
  if (*name == "step")
    return step(op);
  if (*name == "ingest")
    return ingest(op);
  static const std::set<std::string> others = {"probe", "extend",         "remove",
                                               "reset", "protect_prefix", "release_oldest"};
  if (!others.contains(*name)) {
    return make_error(errc::invalid_argument,
                      fmt::format("unknown op '{}' (step, ingest, probe, extend, remove, reset, "
                                  "protect_prefix, release_oldest)",
                                  text_excerpt(*name)));
  }
  const bool labelled = *name == "protect_prefix" || *name == "release_oldest" || *name == "extend";
  if (auto ok = labelled ? check_fields(op, *name, {"op", "rid", "label", "tokens", "ids"})
                         : check_fields(op, *name, {"op", "rid", "free"});
      !ok) {
    return ok.error();
  }
  auto rid = get_string(op, "rid", *name);
  if (!rid)
    return rid.error();
  std::string label = "main";
  if (op.contains("label")) {
    auto l = get_string(op, "label", *name);
    if (!l)
      return l.error();
    label = *l;
  }
  if (*name == "probe") {
    const auto hit = runner_->resolve_cached_prefix(*rid);
    return json{{"ok", true}, {"matched_tokens", hit.value_or(0)}};
  }
  if (*name == "remove") {
    runner_->remove_request(*rid);
    rec_names_.erase(*rid);
    return json{{"ok", true}};
  }
  if (*name == "reset") {
    bool free = false;
    if (op.contains("free")) {
      if (!op.at("free").is_boolean())
        return make_error(errc::invalid_argument, "free must be a boolean");
      free = op.at("free").get<bool>();
    }
    runner_->reset_request(*rid, free);
    return json{{"ok", true}};
  }
  const bool kv_op = *name == "extend" || *name == "protect_prefix" || *name == "release_oldest";
  if (kv_op && !kv_)
    return make_error(errc::invalid_argument, *name + " needs a kv pool");
  if (*name == "extend") {
    auto ids = field(op, "ids");
    if (!ids)
      return ids.error().with_context("extend");
    auto tokens = to_tokens(**ids, "ids");
    if (!tokens)
      return tokens.error();
    kv_->extend_prefix_chain(*rid, label, *tokens);
    return json{{"ok", true}};
  }
  if (*name == "protect_prefix" || *name == "release_oldest") {
    auto tokens = get_int(op, "tokens", *name, 0, std::numeric_limits<std::int64_t>::max());
    if (!tokens)
      return tokens.error();
    if (*name == "protect_prefix") {
      if (auto ok = kv_->protect_prefix(*rid, label, *tokens); !ok) {
        return json{{"ok", false}, {"reason", ok.error().message()}};
      }
      return json{{"ok", true}};
    }
    auto freed = kv_->release_oldest(*rid, label, *tokens);
    if (!freed)
      return json{{"ok", false}, {"reason", freed.error().message()}};
    return json{{"ok", true}, {"released_tokens", *freed}};
  }
  return make_error(errc::invalid_argument, "unreachable op " + *name);
}

void emit(const json& line) {
  std::cout << line.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
}

}  // namespace

struct sim_session::state {
  std::unique_ptr<simulator> sim;
  std::size_t lines = 0;
};

sim_session::sim_session() : state_(std::make_unique<state>()) {}
sim_session::~sim_session() = default;

json sim_session::answer(const std::string& text, bool too_long, bool& valid) {
  const std::size_t number = ++state_->lines;
  auto& sim = state_->sim;
  result<json> parsed = too_long ? result<json>{line_too_long()} : parse_line(text);
  result<json> out = parsed ? result<json>{json{}} : result<json>{parsed.error()};
  static const json none;
  const json& line = parsed ? *parsed : none;
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
  valid = static_cast<bool>(out);
  if (!out)
    return json{{"ok", false},
                {"error", fmt::format("line {}: {}", number, out.error().message())}};
  if (sim)
    sim->add_state(*out);
  return std::move(*out);
}

void add_sim_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("sim", "Replay a trace of steps and requests against the pools");
  cmd->footer(sim_help);
  cmd->callback([&exit_code] {
    sim_session session;
    std::string text;
    bool too_long = false;
    while (read_line(std::cin, text, too_long)) {
      bool valid = true;
      emit(session.answer(text, too_long, valid));
      if (!valid)
        exit_code = 1;
    }
    std::cout.flush();
  });
}

}  // namespace mstar::tool
