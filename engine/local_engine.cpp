#include "engine/local_engine.hpp"

#include <algorithm>
#include <condition_variable>
#include <fmt/format.h>
#include <future>
#include <mutex>
#include <thread>

#include "engine/pool_memory.hpp"
#include "engine/preprocess.hpp"

namespace mstar::engine {

/// One thread that runs one forward at a time (the model is not
/// thread-safe; only this thread calls `forward` in overlap mode).
class local_engine::forward_thread {
 public:
  using task = std::packaged_task<result<models::forward_output>()>;
  forward_thread() : thread_([this] { loop(); }) {}
  ~forward_thread() {
    {
      std::lock_guard lock{mutex_};
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  forward_thread(const forward_thread&) = delete;
  forward_thread& operator=(const forward_thread&) = delete;

  std::future<result<models::forward_output>> run(task t) {
    auto f = t.get_future();
    {
      std::lock_guard lock{mutex_};
      next_ = std::move(t);
      has_next_ = true;
    }
    cv_.notify_all();
    return f;
  }

 private:
  void loop() {
    for (;;) {
      task t;
      {
        std::unique_lock lock{mutex_};
        cv_.wait(lock, [&] { return stop_ || has_next_; });
        if (!has_next_)
          return;
        t = std::move(next_);
        has_next_ = false;
      }
      t();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  task next_;
  bool has_next_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it reads
};

local_engine::local_engine() = default;

std::int64_t register_sequence(pool_set& pools, const request_id& rid,
                               std::span<const token_id> tokens, std::string_view cache_salt) {
  std::optional<resources::kv_prefix_seed> keys;
  if (pools.kv() != nullptr && pools.kv()->prefix_cache_open()) {
    if (auto k = page_keys(tokens, pools.page_size(), cache_salt))
      keys = std::move(*k);
  }
  const auto cached = pools.ingest(rid, keys ? &*keys : nullptr).value_or(0);
  pools.apply_cached_prefix(rid, cached);
  return cached;
}

void apply_actions(const pool_actions& actions, pool_set& pools, scheduler& sched) {
  for (const auto& rid : actions.release)
    pools.remove(rid);
  for (const auto& r : actions.registrations) {
    sched.set_cached(r.rid, register_sequence(pools, r.rid, r.tokens, r.cache_salt));
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
  if (config.schedule == schedule_mode::overlap)
    e->forward_ = std::make_unique<forward_thread>();
  model_facts facts{model->vocab_size(),
                    {model->eos_token_ids().begin(), model->eos_token_ids().end()},
                    model->tok(),
                    (*pools)->kv() != nullptr && (*pools)->kv()->prefix_cache_open()};
  e->model_ = std::move(model);
  e->pools_ = std::move(*pools);
  e->sched_ = std::make_unique<scheduler>(config.scheduler, std::move(facts));
  return e;
}

local_engine::~local_engine() {
  forward_.reset();  // no forward runs past here
  drop_stage();
}

void local_engine::drop_stage() {
  guess_.reset();
  if (!staged_)
    return;
  pools_->clear_preplan();
  staged_.reset();
  staged_rows_.clear();
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
  rec.request = std::make_shared<const models::step_request>(model.declare(rows));
  return rows;
}

}  // namespace

void local_engine::guess_next() {
  guess_.reset();
  auto next = sched_->speculate();
  if (next.empty())
    return;
  step_record rec;
  (void)declare_step(*model_, next, rec);
  guess_.emplace(std::move(rec), std::move(next.rows));
}

void local_engine::stage_guess(const std::vector<request_id>& released) {
  if (!guess_)
    return;
  auto [rec, rows] = std::move(*guess_);
  guess_.reset();
  // A row that ended (eos, a stop, an error) will not run: the guess is off.
  for (const auto& r : rows) {
    if (std::find(released.begin(), released.end(), r.rid) != released.end())
      return;
  }
  if (!pools_->pre_admit(rec).ok())
    return;  // nothing staged: the next step admits inline
  if (!pools_->pre_plan(rec))
    return;  // pre_plan dropped the stage
  ++counters_.staged_steps;
  staged_ = std::move(rec);
  staged_rows_ = std::move(rows);
}

result<models::forward_output> local_engine::run_forward(
    std::span<const models::step_row> rows, const models::step_plans& plans,
    std::span<const models::row_sampling> draws) {
  if (!forward_)
    return model_->forward(rows, plans, draws);
  auto done = forward_->run(forward_thread::task{
      [this, rows, &plans, draws] { return model_->forward(rows, plans, draws); }});
  guess_next();  // host work of step N+1 while step N runs
  return done.get();
}

result<request_id> local_engine::submit(request_spec spec) {
  if (spec.id.empty())
    spec.id = fmt::format("req-{}", next_id_++);
  if (auto ok = tokenize(spec, model_->tok()); !ok)
    return ok.error();
  if (auto ok = sched_->validate(spec); !ok)
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
  // A sequence leaving the pools ends any guess that counted on it.
  if (staged_) {
    for (const auto& rid : res.actions.release) {
      if (std::any_of(staged_rows_.begin(), staged_rows_.end(),
                      [&](const scheduled_row& r) { return r.rid == rid; })) {
        drop_stage();
        break;
      }
    }
  }
  for (const auto& [rid, ids] : res.extend)
    pools_->extend(rid, ids);
  apply_actions(res.actions, *pools_, *sched_);
  for (const auto& d : res.deltas)
    counters_.generated_tokens += static_cast<std::int64_t>(d.tokens.size());
  if (out.empty()) {
    out = std::move(res.deltas);
  } else {
    out.insert(out.end(), std::make_move_iterator(res.deltas.begin()),
               std::make_move_iterator(res.deltas.end()));
  }
}

result<std::vector<delta>> local_engine::step() {
  std::vector<delta> out;
  // Each refusal shrinks the step or frees a sequence, so this ends.
  for (std::size_t attempt = 0;; ++attempt) {
    apply_actions(sched_->admissions(), *pools_, *sched_);
    auto step = sched_->schedule();
    collect(sched_->take_pending(), out);
    if (step.empty())
      return out;
    step_record rec;
    const auto rows = declare_step(*model_, step, rec);
    // A stage is this step's when the guess was right: the pools compare
    // and promote it (or discard it) in admit and plan.
    const bool staged = staged_.has_value();
    bool promoted = false;
    if (staged) {
      promoted = staged_rows_.size() == step.rows.size() &&
                 std::equal(step.rows.begin(), step.rows.end(), staged_rows_.begin(),
                            [](const scheduled_row& a, const scheduled_row& b) {
                              return a.rid == b.rid && a.tokens.size() == b.tokens.size();
                            });
      if (!promoted)
        pools_->clear_preplan();
      staged_.reset();
      staged_rows_.clear();
      counters_.promoted_steps += promoted ? 1 : 0;
    }
    const auto admitted = pools_->admit(rec);
    if (!admitted.ok()) {
      ++counters_.refused_steps;
      const auto why = fmt::format("{} pool refused: {}", admitted.failed_resource,
                                   resources::refusal_message(*admitted.outcome.reason));
      apply_actions(sched_->on_refused(step, why), *pools_, *sched_);
      collect(sched_->take_pending(), out);
      if (attempt > 4 * (sched_->num_running() + sched_->num_waiting()) + 8) {
        return make_error(errc::internal, "the scheduler kept proposing refused steps: " + why);
      }
      continue;
    }
    auto plans = pools_->plan(rec);
    if (!plans) {
      collect(sched_->on_failed(step, plans.error().message()), out);
      return out;
    }
    auto fwd = run_forward(rows, *plans,
                           step.want_logits ? std::span<const models::row_sampling>{}
                                            : std::span<const models::row_sampling>{step.draws});
    if (!fwd) {
      drop_stage();
      pools_->rollback(rec);
      collect(sched_->on_failed(step, fwd.error().message()), out);
      return out;
    }
    if (auto ok = pools_->commit(rec); !ok) {
      drop_stage();
      collect(sched_->on_failed(step, ok.error().message()), out);
      return ok.error();  // the pools' state is in question: stop
    }
    if (config_.on_step)
      config_.on_step({step.serial, step.rows, &*plans, &*fwd, staged, promoted});
    ++counters_.steps;
    for (const auto& r : step.rows) {
      if (!r.samples || r.tokens.size() > 1)
        counters_.prompt_tokens += static_cast<std::int64_t>(r.tokens.size());
    }
    auto ran = sched_->on_ran(step, *fwd);
    const auto released = ran.actions.release;
    collect(std::move(ran), out);
    // Staged after this step's output is taken in, so the pools see the
    // same calls in the same order as in sync mode (the same page and slot
    // ids come out): commit, releases, then the next step's admit and plan.
    stage_guess(released);
    return out;
  }
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
    if (i == 0) {
      c.counts = d.counts;
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
