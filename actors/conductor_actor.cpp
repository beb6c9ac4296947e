#include "actors/conductor_actor.hpp"

#include <fmt/format.h>
#include <map>
#include <set>

namespace mstar::actors {
namespace {

using engine::delta;
using engine::request_id;

struct conductor_state {
  conductor_parts parts;
  std::unique_ptr<engine::scheduler> sched;
  std::map<request_id, std::pair<sink_ptr, std::int32_t>> sinks;  ///< sink, unfinished samples
  bool busy = false;          ///< a step (or its registrations) is in flight
  std::int64_t arriving = 0;  ///< submissions still in the preprocess stage
  /// Ids in the preprocess stage, and those of them cancelled there (the
  /// cancel takes effect once the scheduler has the request).
  std::multiset<request_id> arriving_ids;
  std::set<request_id> cancelled_early;
  std::string broken;  ///< set: a part failed; every request fails with this
  std::vector<caf::response_promise> drained;
  /// Requests whose pool state outlives them (a prefill node publishes it):
  /// their releases go to whoever submitted them, not to the pools.
  std::set<request_id> held;
  /// overlap: the guess of the next step, made while the current one runs,
  /// until the pools admit it with the current step's commit.
  step_ptr guess;
  /// overlap: the guess the pools admitted and planned, and their plans,
  /// until the next step runs on them or rolls them back.
  step_ptr staged;
  std::vector<plans_ptr> staged_plans;
  engine_stats counters;
  static inline const char* name = "mstar.conductor";
};

using self_ptr = caf::stateful_actor<conductor_state>*;

void cycle(self_ptr self);

// Hands deltas to their sinks; a request's sink goes once all its samples ended.
void emit(self_ptr self, std::vector<delta>& deltas) {
  auto& st = self->state;
  for (auto& d : deltas) {
    st.counters.generated_tokens += static_cast<std::int64_t>(d.tokens.size());
    const auto it = st.sinks.find(d.id);
    if (it == st.sinks.end())
      continue;
    const bool last = d.finished && --it->second.second == 0;
    if (last)
      st.held.erase(d.id);
    it->second.first->push(std::move(d));
    if (last)
      st.sinks.erase(it);
  }
}

// Frees released sequences in every pool, except held ones that finished
// (`finishing`): their submitter publishes their state first, then frees it.
// A held sequence released otherwise (preempted) is freed here as any.
void release(self_ptr self, const engine::pool_actions& actions,
             const std::set<request_id>& finishing = {}) {
  const auto& held = self->state.held;
  std::vector<request_id> rids;
  for (const auto& rid : actions.release) {
    if (!(held.contains(rid) && finishing.contains(rid)))
      rids.push_back(rid);
  }
  if (rids.empty())
    return;
  for (const auto& p : self->state.parts.pools)
    self->send(p, release_atom_v, rids);
}

// Deltas, extensions and releases of one scheduler answer.
void apply(self_ptr self, engine::step_result res) {
  if (!res.extend.empty()) {
    for (const auto& p : self->state.parts.pools)
      self->send(p, extend_atom_v, res.extend);
  }
  std::set<request_id> finishing;
  for (const auto& d : res.deltas) {
    if (d.finished)
      finishing.insert(d.id);
  }
  release(self, res.actions, finishing);
  emit(self, res.deltas);
}

// A part failed: every live request ends with `why`, and so does every later one.
void fail_everything(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (st.broken.empty())
    st.broken = why;
  for (auto& [id, entry] : st.sinks) {
    for (std::int32_t i = 0; i < entry.second; ++i) {
      auto d = error_delta(id, why);
      d.index = i;  // which samples are still open is the sink's to know; each gets one
      entry.first->push(std::move(d));
    }
  }
  st.sinks.clear();
  st.busy = false;
  for (auto& rp : st.drained)
    rp.deliver(true);
  st.drained.clear();
}

// Answers the drain requests once nothing is queued, running or arriving.
void answer_drains(self_ptr self) {
  auto& st = self->state;
  if (!st.sched->idle() || st.arriving > 0)
    return;
  for (auto& rp : st.drained)
    rp.deliver(true);
  st.drained.clear();
}

void step_done(self_ptr self) {
  self->state.busy = false;
  answer_drains(self);
  self->send(self, tick_atom_v);
}

// Calls `done(answers)` once every pool answered `request`; the first error
// fails everything.
template <class Answer, class... Ts>
void ask_all(self_ptr self, std::function<void(std::vector<Answer>)> done, Ts... xs) {
  const auto& pools = self->state.parts.pools;
  struct gather {
    std::vector<Answer> answers;
    std::size_t left = 0;
    bool failed = false;
  };
  auto g = std::make_shared<gather>();
  g->answers.resize(pools.size());
  g->left = pools.size();
  for (std::size_t i = 0; i < pools.size(); ++i) {
    self->request(pools[i], caf::infinite, xs...)
        .then(
            [g, i, done](Answer a) {
              if (g->failed)
                return;
              g->answers[i] = std::move(a);
              if (--g->left == 0)
                done(std::move(g->answers));
            },
            [self, g](caf::error& e) {
              if (g->failed)
                return;
              g->failed = true;
              fail_everything(self, "a pool failed: " + self->system().render(e));
            });
  }
}

// A step that cannot complete: every pool rolls it back (a no-op where it
// was not admitted), then its rows fail with `why`.
void fail_step(self_ptr self, const step_ptr& p, std::string why) {
  ask_all<bool>(
      self,
      [self, p, why = std::move(why)](std::vector<bool>) {
        apply(self, self->state.sched->on_failed(p->step, why));
        step_done(self);
      },
      rollback_atom_v);
}

// `step` with its forward rows and the model's typed steps.
step_ptr payload_of(self_ptr self, engine::scheduled_step step) {
  auto payload = std::make_shared<step_payload>();
  payload->step = std::move(step);
  for (const auto& r : payload->step.rows)
    payload->rows.push_back({r.rid, r.tokens});
  payload->request = self->state.parts.model->declare(payload->rows);
  return payload;
}

// The scheduler's guess of the next step, declared (overlap; while the
// worker runs the current one).
step_ptr guess_next(self_ptr self) {
  auto next = self->state.sched->speculate();
  return next.empty() ? nullptr : payload_of(self, std::move(next));
}

// Every pool undoes the staged guess (ordered before whatever is sent next).
void roll_back_stage(self_ptr self) {
  auto& st = self->state;
  if (!st.staged)
    return;
  for (const auto& p : st.parts.pools)
    self->request(p, caf::infinite, rollback_atom_v).then([](bool) {});
  st.staged.reset();
  st.staged_plans.clear();
  ++st.counters.overlap_rolled_back;
}

// Whether `real` is the staged guess (the same rows, the same lengths).
bool is_staged(const conductor_state& st, const engine::scheduled_step& real) {
  if (!st.staged || st.staged->step.rows.size() != real.rows.size())
    return false;
  return std::equal(real.rows.begin(), real.rows.end(), st.staged->step.rows.begin(),
                    [](const engine::scheduled_row& a, const engine::scheduled_row& b) {
                      return a.rid == b.rid && a.tokens.size() == b.tokens.size();
                    });
}

// The step's output is in: the pools commit it (and, with a guess, admit
// and plan the guess right behind the commit, one round trip), then the
// scheduler takes the output in.
void finish_step(self_ptr self, const step_ptr& p, const output_ptr& out) {
  auto& st = self->state;
  auto guess = std::exchange(st.guess, nullptr);
  const auto& pools = st.parts.pools;
  struct gather {
    std::size_t left = 0;
    bool failed = false;
    bool refused = false;
    std::vector<bool> admitted;
    std::vector<plans_ptr> plans;
  };
  auto g = std::make_shared<gather>();
  g->left = pools.size() * (guess ? 2 : 1);
  g->admitted.resize(pools.size(), false);
  g->plans.resize(pools.size());
  auto all_answered = [self, p, out, g, guess] {
    auto& cs = self->state;
    ++cs.counters.steps;
    auto res = cs.sched->on_ran(p->step, *out);
    if (guess) {
      bool off = g->refused;
      for (const auto& rid : res.actions.release) {
        off = off || std::any_of(guess->rows.begin(), guess->rows.end(),
                                 [&](const models::step_row& r) { return r.rid == rid; });
      }
      cs.staged = guess;
      cs.staged_plans = std::move(g->plans);
      if (off)
        roll_back_stage(self);  // before the releases reach the pools
    }
    apply(self, std::move(res));
    step_done(self);
  };
  auto answered = [g, all_answered] {
    if (--g->left == 0 && !g->failed)
      all_answered();
  };
  auto failed = [self, g](caf::error& e) {
    if (g->failed)
      return;
    g->failed = true;
    fail_everything(self, "a pool failed: " + self->system().render(e));
  };
  for (std::size_t i = 0; i < pools.size(); ++i) {
    self->request(pools[i], caf::infinite, commit_atom_v)
        .then([answered](bool) { answered(); }, failed);
    if (!guess)
      continue;
    // Behind the commit in the pool's mailbox: it admits on what N left.
    self->request(pools[i], caf::infinite, admit_atom_v, guess)
        .then(
            [g, i, answered](admit_reply& r, plans_ptr& plans) {
              if (r.ok) {
                g->admitted[i] = true;
                g->plans[i] = std::move(plans);
              } else {
                g->refused = true;  // the refuser unwound itself; roll back the others
              }
              answered();
            },
            failed);
  }
}

void run_forward(self_ptr self, const step_ptr& p, std::vector<plans_ptr> plans) {
  auto& st = self->state;
  auto merged = std::make_shared<models::step_plans>();
  for (const auto& pl : plans) {
    if (pl->kv)
      merged->kv = pl->kv;
    if (pl->recurrent)
      merged->recurrent = pl->recurrent;
  }
  self->request(self->state.parts.worker, caf::infinite, forward_atom_v, p,
                plans_ptr{std::move(merged)})
      .then([self, p](const output_ptr& out) { finish_step(self, p, out); },
            [self, p](caf::error& e) {
              // The kernels failed: undo the step everywhere, fail its rows.
              self->state.guess.reset();
              fail_step(self, p, self->system().render(e));
            });
  // Host work of the next step while this one runs.
  if (st.parts.schedule == engine::schedule_mode::overlap)
    st.guess = guess_next(self);
}

// Admits (and plans) the step in every pool at once: the KV and recurrent
// pools do not depend on each other. A refusal unwinds the pools that
// admitted (the refuser unwound itself) and the scheduler shrinks the step.
void admit_everywhere(self_ptr self, const step_ptr& p) {
  const auto& pools = self->state.parts.pools;
  struct gather {
    std::vector<admit_reply> replies;
    std::vector<plans_ptr> plans;
    std::size_t left = 0;
    bool failed = false;
  };
  auto g = std::make_shared<gather>();
  g->replies.resize(pools.size());
  g->plans.resize(pools.size());
  g->left = pools.size();
  auto all_answered = [self, p, g] {
    auto& st = self->state;
    const auto refused = std::find_if(g->replies.begin(), g->replies.end(),
                                      [](const admit_reply& r) { return !r.ok; });
    if (refused == g->replies.end()) {
      run_forward(self, p, std::move(g->plans));
      return;
    }
    for (std::size_t k = 0; k < g->replies.size(); ++k) {
      if (g->replies[k].ok) {
        self->request(st.parts.pools[k], caf::infinite, rollback_atom_v).then([](bool) {});
      }
    }
    ++st.counters.refused_steps;
    release(self, st.sched->on_refused(p->step, fmt::format("{} pool refused: {}",
                                                            refused->refused_by, refused->why)));
    apply(self, st.sched->take_pending());
    step_done(self);
  };
  for (std::size_t i = 0; i < pools.size(); ++i) {
    self->request(pools[i], caf::infinite, admit_atom_v, p)
        .then(
            [g, i, all_answered](admit_reply& r, plans_ptr& plans) {
              if (g->failed)
                return;
              g->replies[i] = std::move(r);
              g->plans[i] = std::move(plans);
              if (--g->left == 0)
                all_answered();
            },
            [self, p, g](caf::error& e) {
              // A pool could not plan (its admit was undone) or is gone.
              if (g->failed)
                return;
              g->failed = true;
              fail_step(self, p, self->system().render(e));
            });
  }
}

void run_step(self_ptr self) {
  auto& st = self->state;
  auto step = st.sched->schedule();
  // A staged guess that is not this step goes before anything else reaches
  // the pools (the releases of cancellations, then this step's admit).
  const bool promoted = !step.empty() && is_staged(st, step);
  if (!promoted)
    roll_back_stage(self);
  apply(self, st.sched->take_pending());
  if (step.empty()) {
    st.busy = false;
    answer_drains(self);
    return;
  }
  auto payload = payload_of(self, std::move(step));
  if (promoted) {
    // The pools admitted and planned exactly this step behind the last
    // commit: run it on those plans (its real tokens, the guess's lengths).
    ++st.counters.overlap_promoted;
    st.staged.reset();
    run_forward(self, payload, std::exchange(st.staged_plans, {}));
    return;
  }
  admit_everywhere(self, payload);
}

// Registers each sequence in every pool, agrees the cached prefix (the
// smallest answer), tells the scheduler, then runs the step.
void register_then_step(self_ptr self, engine::pool_actions actions) {
  if (actions.registrations.empty()) {
    run_step(self);
    return;
  }
  auto left = std::make_shared<std::size_t>(actions.registrations.size());
  for (auto& [rid, tokens, salt] : actions.registrations) {
    ask_all<std::int64_t>(
        self,
        [self, left, rid = rid](std::vector<std::int64_t> answers) {
          std::int64_t agreed = -1;
          for (const auto a : answers) {
            if (a >= 0)
              agreed = agreed < 0 ? a : std::min(agreed, a);
          }
          if (agreed >= 0) {
            for (const auto& p : self->state.parts.pools)
              self->send(p, agree_atom_v, rid, agreed);
          }
          self->state.sched->set_cached(rid, std::max<std::int64_t>(agreed, 0));
          if (--*left == 0)
            run_step(self);
        },
        register_atom_v, rid, tokens, salt);
  }
}

void cycle(self_ptr self) {
  auto& st = self->state;
  if (st.busy || !st.broken.empty())
    return;
  st.busy = true;
  register_then_step(self, st.sched->admissions());
}

caf::behavior conductor_behavior(self_ptr self, conductor_parts parts) {
  auto& state = self->state;
  engine::model_facts facts{
      parts.model->vocab_size(),
      {parts.model->eos_token_ids().begin(), parts.model->eos_token_ids().end()},
      parts.model->tok(),
      parts.extend_chains};
  state.sched = std::make_unique<engine::scheduler>(parts.limits, std::move(facts));
  state.parts = std::move(parts);
  for (const auto& p : state.parts.pools)
    self->monitor(p);
  self->monitor(state.parts.worker);
  self->monitor(state.parts.preprocess);
  self->set_down_handler([self](const caf::down_msg& m) {
    fail_everything(self, "an engine actor exited: " + self->system().render(m.reason));
  });
  return {
      [self](submit_atom, engine::request_spec spec, const sink_ptr& sink, bool hold) {
        // Held: the submitter publishes the pool state, then releases it.
        if (hold)
          self->state.held.insert(spec.id);
        self->send(self, submit_atom_v, std::move(spec), sink);
      },
      [self](submit_atom, engine::request_spec spec, const sink_ptr& sink) {
        if (!self->state.broken.empty()) {
          self->state.held.erase(spec.id);
          sink->push(error_delta(spec.id, self->state.broken));
          return;
        }
        ++self->state.arriving;
        const auto id = spec.id;  // before `spec` moves into the request
        self->state.arriving_ids.insert(id);
        self->request(self->state.parts.preprocess, caf::infinite, tokenize_atom_v, std::move(spec))
            .then(
                [self, sink, id](engine::request_spec& s) {
                  auto& st = self->state;
                  --st.arriving;
                  st.arriving_ids.erase(st.arriving_ids.find(id));
                  const bool cancelled = st.cancelled_early.erase(id) > 0;
                  if (!st.broken.empty()) {  // a part failed while it was tokenized
                    st.held.erase(s.id);
                    sink->push(error_delta(s.id, st.broken));
                    answer_drains(self);
                    return;
                  }
                  const auto n = std::max<std::int32_t>(1, s.sampling.n);
                  const auto rid = s.id;
                  if (auto ok = st.sched->add(std::move(s)); !ok) {
                    st.held.erase(rid);
                    sink->push(error_delta(rid, ok.error().message()));
                    answer_drains(self);
                    return;
                  }
                  st.sinks[rid] = {sink, n};
                  if (cancelled)
                    (void)st.sched->cancel(rid);
                  cycle(self);
                },
                [self, sink, id](caf::error& e) {
                  --self->state.arriving;
                  self->state.arriving_ids.erase(self->state.arriving_ids.find(id));
                  self->state.cancelled_early.erase(id);
                  self->state.held.erase(id);
                  sink->push(error_delta(id, self->system().render(e)));
                  answer_drains(self);
                });
      },
      [self](cancel_atom, const std::string& id) {
        auto& st = self->state;
        if (st.sched->cancel(id))
          cycle(self);
        else if (st.arriving_ids.contains(id))
          st.cancelled_early.insert(id);  // still being tokenized
      },
      [self](tick_atom) { cycle(self); },
      [self](drain_atom) -> caf::result<bool> {
        const auto& st = self->state;
        if ((st.sched->idle() && st.arriving == 0) || !st.broken.empty())
          return true;
        auto rp = self->make_response_promise();
        self->state.drained.push_back(rp);
        return rp;
      },
      [self](stats_atom) {
        auto& st = self->state;
        auto s = st.counters;
        s.preemptions = st.sched->preemptions();
        s.running = static_cast<std::int64_t>(st.sched->num_running());
        s.waiting = static_cast<std::int64_t>(st.sched->num_waiting());
        return s;
      },
  };
}

}  // namespace

engine::delta error_delta(const engine::request_id& id, std::string why) {
  engine::delta d;
  d.id = id;
  d.finished = engine::finish_reason::error;
  d.error = std::move(why);
  return d;
}

caf::actor spawn_conductor(caf::actor_system& sys, conductor_parts parts) {
  return sys.spawn(conductor_behavior, std::move(parts));
}

}  // namespace mstar::actors
