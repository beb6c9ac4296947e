#include "engine/local_engine.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "engine/pool_memory.hpp"
#include "engine/preprocess.hpp"
#include "engine/prompt_layout.hpp"

namespace mstar::engine {

local_engine::local_engine() = default;

schedule_mode default_schedule(const models::causal_lm& model) noexcept {
  return model.on_gpu() ? schedule_mode::overlap : schedule_mode::sync;
}

namespace {

std::optional<resources::kv_prefix_seed> front_end_keys(const prefix_wire* prefix,
                                                        std::span<const token_id> tokens,
                                                        std::int64_t ps) {
  // A front end's keys (checked at submit) name the prompt as it keyed it.
  if (prefix == nullptr || ps <= 0)
    return std::nullopt;
  auto s = seed_from_wire(*prefix, tokens, ps);
  return s ? std::optional{std::move(*s)} : std::nullopt;
}

std::int64_t register_keys(pool_set& pools, const request_id& rid,
                           const std::optional<resources::kv_prefix_seed>& keys) {
  const auto cached = pools.ingest(rid, keys ? &*keys : nullptr).value_or(0);
  return pools.agree_cached_prefix(rid, cached);
}

}  // namespace

std::int64_t register_sequence(pool_set& pools, const request_id& rid,
                               std::span<const token_id> tokens, std::string_view cache_salt,
                               const prefix_wire* prefix) {
  const auto ps = pools.key_page_size();
  const auto given = front_end_keys(prefix, tokens, ps);
  return register_keys(pools, rid,
                       sequence_keys(ps, tokens, cache_salt, given ? &*given : nullptr));
}

std::int64_t register_sequence(pool_set& pools, const request_id& rid,
                               std::span<const token_id> tokens,
                               std::span<const resources::prompt_span> layout,
                               std::string_view cache_salt, const prefix_wire* prefix) {
  const auto ps = pools.key_page_size();
  const auto given = front_end_keys(prefix, tokens, ps);
  return register_keys(pools, rid,
                       sequence_keys(ps, layout, cache_salt, given ? &*given : nullptr));
}

void apply_actions(const pool_actions& actions, pool_set& pools, scheduler& sched,
                   models::causal_lm& model) {
  for (const auto& rid : actions.release) {
    pools.remove(rid);
    model.end_sequence(rid);
  }
  for (const auto& r : actions.registrations) {
    model.begin_sequence(r.rid, r.prompt, r.images);
    if (r.images.empty()) {
      sched.set_cached(r.rid, register_sequence(pools, r.rid, r.tokens, r.cache_salt, r.prefix));
      continue;
    }
    // Images are keyed as items; a layout that cannot be made keys nothing
    // rather than keying placeholder ids that every image shares.
    auto layout = layout_prompt(model, r.tokens, r.prompt, r.images);
    const std::vector<resources::prompt_span> none;
    if (layout)
      sched.set_item_ends(r.rid, item_ends(layout->spans, pools.key_page_size()));
    sched.set_cached(r.rid, register_sequence(pools, r.rid, r.tokens, layout ? layout->spans : none,
                                              r.cache_salt, r.prefix));
  }
}

result<std::unique_ptr<local_engine>> local_engine::make(std::unique_ptr<models::causal_lm> model,
                                                         engine_config config) {
  auto spec = model->pools(config.pools);
  if (spec && !spec->memory)
    spec->memory = config.host_memory;
  if (!spec)
    return spec.error();
  if (auto ok = check_pool_memory(*spec, !model->on_gpu(), config.pools.max_memory); !ok)
    return ok.error();
  auto pools = pool_set::make(*spec);
  if (!pools)
    return pools.error();
  if (auto ok = model->bind((*pools)->kv(), (*pools)->recurrent()); !ok)
    return ok.error();
  auto e = std::unique_ptr<local_engine>(new local_engine);
  e->config_ = config;
  e->config_.schedule = config.schedule.value_or(default_schedule(*model));
  const auto* rec = (*pools)->recurrent();
  model_facts facts{
      model->vocab_size(),
      {model->eos_token_ids().begin(), model->eos_token_ids().end()},
      model->tok(),
      (*pools)->kv() != nullptr && (*pools)->kv()->prefix_cache_open(),
      rec != nullptr && rec->config().checkpoint_slots > 0 ? rec->config().checkpoint_stride : 0,
      model->supports_windows()};
  e->model_ = std::move(model);
  e->pools_ = std::move(*pools);
  e->sched_ = std::make_unique<scheduler>(config.scheduler, std::move(facts));
  return e;
}

local_engine::~local_engine() {
  if (cur_)
    abandon(*cur_);  // no forward runs past here
}

void local_engine::abandon(in_flight& f) {
  (void)model_->finish(f.ticket);
  if (!f.committed)
    pools_->rollback(f.rec);
}

namespace {

// The forward's rows of `step` (views into its tokens), and `rec` made
// ready for the pools: the rows' ids and the model's typed steps.
std::vector<models::step_row> declare_step(const models::causal_lm& model,
                                           const scheduled_step& step, step_record& rec) {
  std::vector<models::step_row> rows;
  rows.reserve(step.rows.size());
  for (const auto& r : step.rows) {
    rows.push_back({r.rid, r.tokens});
    rec.ctx.request_ids.push_back(r.rid);
  }
  auto request = model.declare(rows);
  declare_retention(step, request);
  rec.request = std::make_shared<const models::step_request>(std::move(request));
  return rows;
}

}  // namespace

result<request_id> local_engine::submit(request_spec spec) {
  if (spec.id.empty())
    spec.id = fmt::format("req-{}", next_id_++);
  if (auto ok = tokenize(spec, model_->tok()); !ok)
    return ok.error();
  if (auto ok = sched_->validate(spec); !ok)
    return ok.error();
  if (auto ok = model_->place_images(spec.prompt, spec.images); !ok)
    return ok.error();
  const auto image_runs = model_->image_spans(spec.prompt, spec.images);
  if (auto ok = front_end_seed(spec, pools_->key_page_size(), image_runs); !ok)
    return ok.error();
  const auto id = spec.id;
  if (auto ok = sched_->add(std::move(spec)); !ok)
    return ok.error();
  return id;
}

bool local_engine::cancel(const request_id& id) {
  return sched_->cancel(id);
}

void local_engine::collect(step_result res, std::vector<delta>& out) {
  for (const auto& [rid, ids] : res.extend)
    pools_->extend(rid, ids);
  apply_actions(res.actions, *pools_, *sched_, *model_);
  for (const auto& d : res.deltas)
    counters_.generated_tokens += static_cast<std::int64_t>(d.tokens.size());
  if (out.empty()) {
    out = std::move(res.deltas);
  } else {
    out.insert(out.end(), std::make_move_iterator(res.deltas.begin()),
               std::make_move_iterator(res.deltas.end()));
  }
}

namespace {

std::span<const models::row_sampling> draws_of(const scheduled_step& step) {
  return step.want_logits ? std::span<const models::row_sampling>{}
                          : std::span<const models::row_sampling>{step.draws};
}

}  // namespace

result<void> local_engine::launch_next(std::vector<delta>& out) {
  // Each refusal shrinks the step or frees a sequence, so this ends.
  for (std::size_t attempt = 0;; ++attempt) {
    apply_actions(sched_->admissions(), *pools_, *sched_, *model_);
    auto step = sched_->schedule();
    collect(sched_->take_pending(), out);
    if (step.empty())
      return {};
    in_flight f;
    const auto rows = declare_step(*model_, step, f.rec);
    const auto admitted = pools_->admit(f.rec);
    if (!admitted.ok()) {
      ++counters_.refused_steps;
      const auto why = fmt::format("{} pool refused: {}", admitted.failed_resource,
                                   resources::refusal_message(*admitted.outcome.reason));
      apply_actions(sched_->on_refused(step, why), *pools_, *sched_, *model_);
      collect(sched_->take_pending(), out);
      if (attempt > 4 * (sched_->num_running() + sched_->num_waiting()) + 8) {
        return make_error(errc::internal, "the scheduler kept proposing refused steps: " + why);
      }
      continue;
    }
    auto plans = pools_->plan(f.rec);
    if (!plans) {
      collect(sched_->on_failed(step, plans.error().message()), out);
      return {};
    }
    sched_->note_plans(step, *plans);
    auto ticket = model_->launch(rows, *plans, draws_of(step), {});
    if (!ticket) {
      pools_->rollback(f.rec);
      collect(sched_->on_failed(step, ticket.error().message()), out);
      return {};
    }
    f.step = std::move(step);
    f.plans = std::move(*plans);
    f.ticket = *ticket;
    cur_ = std::move(f);
    return {};
  }
}

result<void> local_engine::commit(in_flight& f) {
  if (f.committed)
    return {};
  // A request cancelled while its step ran keeps nothing of it: the next
  // schedule ends it, as in sync mode before the step.
  pools_->rollback_rows(f.rec, sched_->cancelled_rows(f.step));
  f.committed = true;
  return pools_->commit(f.rec);
}

auto local_engine::launch_ahead() -> result<std::optional<in_flight>> {
  std::optional<in_flight> none;
  if (config_.schedule != schedule_mode::overlap)
    return none;
  auto next = sched_->speculate();
  // Host draws need the running step's token on the host; a step cut by
  // the budget would differ from sync's once a row ends.
  if (next.empty() || next.want_logits || !next.unbounded)
    return none;
  // Admitted before the running step's releases, the next step must not
  // make the prefix cache evict pages sync mode would keep: it goes ahead
  // only when free pages cover its rows' growth, whatever their lengths.
  if (const auto* kv = pools_->kv()) {
    std::int64_t need = 0;
    for (const auto& row : next.rows)
      need += static_cast<std::int64_t>(row.tokens.size()) / pools_->page_size() + 1;
    if (kv->num_free_pages() < need)
      return none;
  }
  // A decode row continuing a row of the running step that draws feeds that
  // draw, on the device.
  auto loopback = loopback_rows(next, cur_->step);
  // The running step's lengths are what the next one's addressing starts
  // from: it commits now, before its kernels finish (only host bookkeeping).
  if (auto ok = commit(*cur_); !ok)
    return ok.error();
  in_flight f;
  const auto rows = declare_step(*model_, next, f.rec);
  if (!pools_->admit(f.rec).ok())
    return none;  // refused and unwound: the next step is scheduled the sync way
  auto plans = pools_->plan(f.rec);
  if (!plans)
    return none;  // rolled back
  sched_->note_plans(next, *plans);
  auto ticket = model_->launch(rows, *plans, draws_of(next), loopback);
  if (!ticket) {
    pools_->rollback(f.rec);
    return none;
  }
  f.step = std::move(next);
  f.plans = std::move(*plans);
  f.ticket = *ticket;
  f.ahead = true;
  f.loopback = std::move(loopback);
  return std::optional<in_flight>{std::move(f)};
}

result<std::vector<delta>> local_engine::step() {
  std::vector<delta> out;
  if (!cur_) {
    if (auto ok = launch_next(out); !ok)
      return ok.error();
    if (!cur_)
      return out;
  }
  auto ahead = launch_ahead();
  if (!ahead) {
    abandon(*cur_);
    collect(sched_->on_failed(cur_->step, ahead.error().message()), out);
    cur_.reset();
    return ahead.error();  // a commit failed: the pools' state is in question
  }
  auto next = std::move(*ahead);
  auto fwd = model_->finish(cur_->ticket);
  if (!fwd) {
    if (next) {
      abandon(*next);
      collect(sched_->on_failed(next->step, fwd.error().message()), out);
    }
    if (!cur_->committed)
      pools_->rollback(cur_->rec);
    collect(sched_->on_failed(cur_->step, fwd.error().message()), out);
    cur_.reset();
    return out;
  }
  if (auto ok = commit(*cur_); !ok) {
    if (next)
      abandon(*next);
    collect(sched_->on_failed(cur_->step, ok.error().message()), out);
    cur_.reset();
    return ok.error();  // the pools' state is in question: stop
  }
  auto& f = *cur_;
  if (config_.on_step) {
    if (f.rec.ctx.padding_rows.empty()) {
      config_.on_step({f.step.serial, f.step.rows, &f.plans, &*fwd, f.ahead, 0, {}});
    } else {
      // The rows that count, and their output.
      std::vector<scheduled_row> rows;
      std::vector<std::size_t> at;
      models::forward_output kept;
      const auto V = fwd->logits.size() / std::max<std::size_t>(1, f.step.rows.size());
      for (std::size_t r = 0; r < f.step.rows.size(); ++r) {
        if (f.rec.ctx.is_padding_row(f.step.rows[r].rid))
          continue;
        rows.push_back(f.step.rows[r]);
        at.push_back(r);
        if (!fwd->sampled.empty())
          kept.sampled.push_back(fwd->sampled[r]);
        if (!fwd->logits.empty()) {
          kept.logits.insert(kept.logits.end(), fwd->logits.begin() + static_cast<long>(r * V),
                             fwd->logits.begin() + static_cast<long>((r + 1) * V));
        }
      }
      config_.on_step({f.step.serial, rows, &f.plans, &kept, f.ahead, f.dropped, at});
    }
  }
  ++counters_.steps;
  for (const auto& r : f.step.rows) {
    if (!r.samples || r.tokens.size() > 1)
      counters_.prompt_tokens += static_cast<std::int64_t>(r.tokens.size());
  }
  if (next && !fwd->sampled.empty()) {
    // The host learns the looped-back ids now, one step late (the device
    // fed them already): the next step's rows read them from here on.
    for (std::size_t i = 0; i < next->loopback.size(); ++i) {
      if (const auto j = next->loopback[i]; j >= 0)
        next->step.rows[i].tokens[0] =
            static_cast<token_id>(fwd->sampled[static_cast<std::size_t>(j)]);
    }
  }
  auto ran = sched_->on_ran(f.step, *fwd);
  if (next) {
    // Rows of the next step whose sequence just ended over-ran by one step:
    // their part of it is rolled back before the sequence leaves the pools.
    const auto over = overrun_rows(next->step, ran);
    pools_->rollback_rows(next->rec, over);
    next->dropped = over.size();
    ++counters_.ahead_steps;
    counters_.dropped_rows += static_cast<std::int64_t>(over.size());
    if (over.size() == next->step.rows.size()) {
      // Nothing of it counts: wait it out here, so an idle engine has no
      // forward outstanding.
      (void)model_->finish(next->ticket);
      auto done = pools_->commit(next->rec);  // every row passed over
      next.reset();
      if (!done) {
        collect(std::move(ran), out);
        return done.error();
      }
    } else if (auto ok = sched_->adopt(next->step); !ok) {
      abandon(*next);
      collect(std::move(ran), out);
      collect(sched_->on_failed(next->step, ok.error().message()), out);
      cur_.reset();
      return ok.error();
    }
  }
  collect(std::move(ran), out);
  cur_ = std::move(next);
  return out;
}

result<void> local_engine::warm_up() {
  if (!model_->on_gpu())
    return {};
  request_spec spec;
  spec.id = "mstar-warm-up";
  spec.prompt = {0};
  spec.stop.max_tokens = 2;
  spec.stop.ignore_eos = true;
  auto done = run_to_completion(*this, {std::move(spec)});
  if (!done)
    return done.error().with_context("GPU warm-up");
  if (done->front().finished.front() == finish_reason::error) {
    return make_error(errc::internal, "GPU warm-up: " + done->front().errors.front());
  }
  return {};
}

void completion_collector::expect(const request_spec& spec) {
  index_[spec.id] = done_.size();
  started_[spec.id] = std::chrono::steady_clock::now();
  completion c;
  c.id = spec.id;
  c.prompt = spec.prompt;
  const auto n = static_cast<std::size_t>(std::max(1, spec.sampling.n));
  c.tokens.resize(n);
  c.text.resize(n);
  c.finished.resize(n, finish_reason::error);
  c.logits.resize(n);
  c.errors.resize(n);
  done_.push_back(std::move(c));
}

void completion_collector::add(const delta& d) {
  const auto it = index_.find(d.id);
  if (it == index_.end())
    return;
  auto& c = done_[it->second];
  const auto i = static_cast<std::size_t>(d.index);
  if (i >= c.tokens.size())
    return;
  c.tokens[i].insert(c.tokens[i].end(), d.tokens.begin(), d.tokens.end());
  c.text[i] += d.text;
  for (const auto& row : d.logits)
    c.logits[i].push_back(row);
  if (d.time_to_first_token_s > 0 && i == 0)
    c.time_to_first_token_s = d.time_to_first_token_s;
  if (d.finished) {
    c.finished[i] = *d.finished;
    c.errors[i] = d.error;
    const auto peak = std::max(c.counts.kv_pages_peak, d.counts.kv_pages_peak);
    c.counts.kv_pages_peak = peak;
    if (i == 0) {
      c.counts = d.counts;
      c.counts.kv_pages_peak = peak;
      c.duration_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started_[d.id]).count();
    }
  }
}

std::vector<completion> completion_collector::take() {
  return std::exchange(done_, {});
}

result<std::vector<completion>> run_to_completion(local_engine& engine,
                                                  std::vector<request_spec> requests) {
  completion_collector collector;
  for (auto& r : requests) {
    auto id = engine.submit(r);
    if (!id)
      return id.error();
    r.id = *id;
    if (auto ok = tokenize(r, engine.model().tok()); !ok)
      return ok.error();
    collector.expect(r);
  }
  while (!engine.idle()) {
    auto deltas = engine.step();
    if (!deltas)
      return deltas.error();
    for (const auto& d : *deltas)
      collector.add(d);
  }
  return collector.take();
}

}  // namespace mstar::engine
