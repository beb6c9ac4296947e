#include "actors/conductor_actor.hpp"

#include <fmt/format.h>
#include <set>
#include <unordered_map>

#include "actors/spec_row_builder_actor.hpp"
#include "engine/local_engine.hpp"
#include "engine/preprocess.hpp"
#include "engine/prompt_layout.hpp"

namespace mstar::actors {
namespace {

using engine::delta;
using engine::request_id;

struct conductor_state {
  conductor_parts parts;
  std::unique_ptr<engine::scheduler> sched;
  /// Sink and unfinished samples by request: looked up once a delta, so
  /// hashed (a string-ordered map cost ~200 instructions a row a step in
  /// memcmp at 256 rows).
  std::unordered_map<request_id, std::pair<sink_ptr, std::int32_t>> sinks;
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
  /// The step launched on the worker and not finished yet (its forward
  /// runs), with the scheduler's copy of it; overlap keeps one step in
  /// flight while the next is launched.
  struct flight {
    step_ptr p;
    engine::scheduled_step step;
    std::uint64_t ticket = 0;
    bool committed = false;  ///< the pools committed it (at the next step's launch)
  };
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
// The model forgets every released sequence (a held one's state is in the
// pools, not the model).
void release(self_ptr self, const engine::pool_actions& actions,
             const std::set<request_id>& finishing = {}) {
  if (!actions.release.empty())
    self->send(self->state.parts.worker, release_atom_v, actions.release);
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
  return build_step(*self->state.parts.model, std::move(step), nullptr);
}

using flight = conductor_state::flight;

void launched(self_ptr self, std::shared_ptr<flight> cur);

// Merges the pools' plans for the worker.
plans_ptr merged(const std::vector<plans_ptr>& plans) {
  auto m = std::make_shared<models::step_plans>();
  for (const auto& pl : plans) {
    if (pl->kv)
      m->kv = pl->kv;
    if (pl->recurrent)
      m->recurrent = pl->recurrent;
  }
  return m;
}

// Tells every pool to roll back `rids` of its admitted step (before
// anything sent after it).
void drop_rows(self_ptr self, const std::set<request_id>& rids) {
  if (rids.empty())
    return;
  const std::vector<std::string> list{rids.begin(), rids.end()};
  for (const auto& p : self->state.parts.pools)
    self->request(p, caf::infinite, drop_atom_v, list).then([](bool) {});
}

// `cur`'s forward failed, or a pool did: every pool rolls back its admitted
// step (`next`'s when one was launched ahead, else `cur`'s unless it
// committed), then the rows of both fail.
void fail_flight(self_ptr self, const std::shared_ptr<flight>& cur,
                 const std::shared_ptr<flight>& next, std::string why) {
  if (next)
    self->request(self->state.parts.worker, caf::infinite, finish_atom_v, next->ticket)
        .then([](const output_ptr&) {}, [](caf::error&) {});
  ask_all<bool>(
      self,
      [self, cur, next, why = std::move(why)](std::vector<bool>) {
        auto& st = self->state;
        apply(self, st.sched->on_failed(cur->step, why));
        if (next)
          apply(self, st.sched->on_failed(next->step, why));
        step_done(self);
      },
      rollback_atom_v);
}

// `cur` landed with `out` (and `next` runs behind it, launched ahead):
// `cur` commits unless it did, the scheduler takes the output in, rows of
// `next` whose sequence just ended over-ran and are rolled back, and `next`
// becomes the running step.
void landed(self_ptr self, std::shared_ptr<flight> cur, const output_ptr& out,
            std::shared_ptr<flight> next) {
  auto& st = self->state;
  auto take_in = [self, cur, out, next] {
    auto& cs = self->state;
    ++cs.counters.steps;
    auto res = cs.sched->on_ran(cur->step, *out);
    if (next) {
      const auto over = engine::overrun_rows(next->step, res);
      drop_rows(self, over);  // before the releases reach the pools
      ++cs.counters.ahead_steps;
      cs.counters.dropped_rows += static_cast<std::int64_t>(over.size());
      if (auto ok = cs.sched->adopt(next->step); !ok) {
        apply(self, std::move(res));
        self->request(cs.parts.worker, caf::infinite, finish_atom_v, next->ticket)
            .then([](const output_ptr&) {}, [](caf::error&) {});
        fail_flight(self, next, nullptr, ok.error().message());
        return;
      }
    }
    apply(self, std::move(res));
    if (next) {
      launched(self, next);
    } else {
      step_done(self);
    }
  };
  if (cur->committed) {
    take_in();
    return;
  }
  // Rows of requests cancelled while the step ran keep nothing of it.
  drop_rows(self, st.sched->cancelled_rows(cur->step));
  ask_all<bool>(
      self,
      [cur, take_in](std::vector<bool>) {
        cur->committed = true;
        take_in();
      },
      commit_atom_v);
}

// Waits for `cur`'s forward (the worker's finish), `next` launched ahead or not.
void finish_flight(self_ptr self, std::shared_ptr<flight> cur, std::shared_ptr<flight> next) {
  self->request(self->state.parts.worker, caf::infinite, finish_atom_v, cur->ticket)
      .then([self, cur, next](const output_ptr& out) { landed(self, cur, out, next); },
            [self, cur, next](caf::error& e) {
              fail_flight(self, cur, next, self->system().render(e));
            });
}

// Overlap: the step after the running one, as the scheduler foresees it,
// when it can go ahead (no host draws, no row cut by the budget).
std::optional<engine::scheduled_step> foresee(self_ptr self) {
  auto& st = self->state;
  if (st.parts.schedule != engine::schedule_mode::overlap)
    return std::nullopt;
  auto next = st.sched->speculate();
  if (next.empty() || next.want_logits || !next.unbounded)
    return std::nullopt;
  return next;
}

void stage_ahead(self_ptr self, std::shared_ptr<flight> cur, std::shared_ptr<flight> next);

// `cur` is queued on the worker. Overlap: the spec-row builder makes the
// foreseen next step's payload (its decode rows feed `cur`'s draws on the
// device), then it is staged and launched before `cur` is waited for;
// otherwise `cur` is waited for.
void launched(self_ptr self, std::shared_ptr<flight> cur) {
  auto next = foresee(self);
  if (!next) {
    finish_flight(self, std::move(cur), nullptr);
    return;
  }
  auto f = std::make_shared<flight>();
  f->step = *next;
  self->request(self->state.parts.spec_rows, caf::infinite, build_atom_v,
                scheduled_ptr{std::make_shared<const engine::scheduled_step>(std::move(*next))},
                cur->p)
      .then(
          [self, cur, f](step_ptr& p) {
            f->p = std::move(p);
            stage_ahead(self, cur, f);
          },
          [self, cur](caf::error&) { finish_flight(self, cur, nullptr); });
}

// The pools commit `cur` and admit and plan `next` right behind (one round
// trip); `next` is launched, then `cur` waited for. A refusal: `cur` alone.
void stage_ahead(self_ptr self, std::shared_ptr<flight> cur, std::shared_ptr<flight> next) {
  const auto& pools = self->state.parts.pools;
  struct gather {
    std::size_t left = 0;
    bool failed = false;
    bool refused = false;
    std::vector<bool> admitted;
    std::vector<plans_ptr> plans;
  };
  auto g = std::make_shared<gather>();
  g->left = 2 * pools.size();
  g->admitted.resize(pools.size(), false);
  g->plans.resize(pools.size());
  auto all_answered = [self, cur, next, g] {
    auto& st = self->state;
    cur->committed = true;
    if (g->refused) {
      // The refuser unwound itself; the others roll back. `cur` goes on alone.
      for (std::size_t k = 0; k < g->admitted.size(); ++k) {
        if (g->admitted[k])
          self->request(st.parts.pools[k], caf::infinite, rollback_atom_v).then([](bool) {});
      }
      finish_flight(self, cur, nullptr);
      return;
    }
    auto plans = merged(g->plans);
    st.sched->note_plans(next->step, *plans);
    self->request(st.parts.worker, caf::infinite, launch_atom_v, next->p, std::move(plans))
        .then(
            [self, cur, next](std::uint64_t ticket) {
              next->ticket = ticket;
              finish_flight(self, cur, next);
            },
            [self, cur](caf::error&) {
              // Not launched: the pools undo its admit; `cur` goes on alone.
              for (const auto& p : self->state.parts.pools)
                self->request(p, caf::infinite, rollback_atom_v).then([](bool) {});
              finish_flight(self, cur, nullptr);
            });
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
  // Rows of `cur` cancelled since its launch keep nothing of it.
  drop_rows(self, self->state.sched->cancelled_rows(cur->step));
  for (std::size_t i = 0; i < pools.size(); ++i) {
    self->request(pools[i], caf::infinite, commit_atom_v)
        .then([answered](bool) { answered(); }, failed);
    // Behind the commit in the pool's mailbox: it admits on what `cur` left.
    self->request(pools[i], caf::infinite, admit_atom_v, next->p)
        .then(
            [g, i, answered](admit_reply& r, plans_ptr& plans) {
              if (r.ok) {
                g->admitted[i] = true;
                g->plans[i] = std::move(plans);
              } else {
                g->refused = true;
              }
              answered();
            },
            failed);
  }
}

// Launches an admitted, planned step on the worker.
void run_forward(self_ptr self, const step_ptr& p, std::vector<plans_ptr> plans) {
  auto cur = std::make_shared<flight>();
  cur->p = p;
  cur->step = p->step;
  auto merged_plans = merged(plans);
  self->state.sched->note_plans(p->step, *merged_plans);
  self->request(self->state.parts.worker, caf::infinite, launch_atom_v, p, std::move(merged_plans))
      .then(
          [self, cur](std::uint64_t ticket) {
            cur->ticket = ticket;
            launched(self, cur);
          },
          [self, p](caf::error& e) {
            // Not launched: undo the step everywhere, fail its rows.
            fail_step(self, p, self->system().render(e));
          });
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
  apply(self, st.sched->take_pending());
  if (step.empty()) {
    st.busy = false;
    answer_drains(self);
    return;
  }
  admit_everywhere(self, payload_of(self, std::move(step)));
}

// Every pool keeps `agreed` cached tokens of `rid`, or the rounds go on with
// the least one kept (a recurrent pool resumes at checkpoints only; each
// round shrinks); then `done(rid, kept)`.
void agree(self_ptr self, const std::string& rid, std::int64_t agreed,
           std::function<void(const std::string&, std::int64_t)> done) {
  ask_all<std::int64_t>(
      self,
      [self, rid, agreed, done](std::vector<std::int64_t> kept) {
        std::int64_t least = agreed;
        for (const auto k : kept)
          least = std::min(least, k);
        if (least == agreed) {
          done(rid, agreed);
          return;
        }
        agree(self, rid, least, done);
      },
      agree_atom_v, rid, agreed);
}

// Registers each sequence with the model (ahead of any step of it in the
// worker's mailbox) and in every pool, agrees the cached prefix (the
// smallest answer), tells the scheduler, then runs the step. A prompt with
// images is keyed over its layout (engine/prompt_layout.hpp), as the local
// engine keys it.
void register_then_step(self_ptr self, engine::pool_actions actions) {
  if (actions.registrations.empty()) {
    run_step(self);
    return;
  }
  auto left = std::make_shared<std::size_t>(actions.registrations.size());
  auto registered = [self, left](const std::string& rid, std::int64_t cached) {
    self->state.sched->set_cached(rid, std::max<std::int64_t>(cached, 0));
    if (--*left == 0)
      run_step(self);
  };
  for (auto& r : actions.registrations) {
    self->send(self->state.parts.worker, register_atom_v, r.rid,
               sequence_ptr{std::make_shared<const sequence_inputs>(sequence_inputs{
                   {r.prompt.begin(), r.prompt.end()}, {r.images.begin(), r.images.end()}})});
    seed_ptr seed;
    const auto ps = self->state.parts.key_page_size;
    if (r.prefix != nullptr && ps > 0) {
      if (auto s = engine::seed_from_wire(*r.prefix, r.tokens, ps))
        seed = std::make_shared<const resources::kv_prefix_seed>(std::move(*s));
    }
    if (seed == nullptr && !r.images.empty() && ps > 0) {
      // Images are page items over the prompt's layout, keyed here as the
      // local engine keys them; a layout that cannot be made keys nothing
      // rather than the placeholder ids every image shares.
      auto layout = engine::layout_prompt(*self->state.parts.model, r.tokens, r.prompt, r.images);
      auto keys =
          layout ? engine::sequence_keys(ps, layout->spans, r.cache_salt, nullptr) : std::nullopt;
      seed = std::make_shared<const resources::kv_prefix_seed>(keys ? std::move(*keys)
                                                                    : resources::kv_prefix_seed{});
    }
    if (seed != nullptr && !seed->ends.empty()) {
      // Prefill chunks end at the images' ends too: the recurrent pool
      // checkpoints the state there (end keys, reference §1.7).
      std::vector<std::int64_t> ends;
      for (const auto& e : seed->ends)
        ends.push_back(static_cast<std::int64_t>(e.slot));
      self->state.sched->set_item_ends(r.rid, std::move(ends));
    }
    const auto& rid = r.rid;
    ask_all<std::int64_t>(
        self,
        [self, registered, rid = rid](std::vector<std::int64_t> answers) {
          std::int64_t agreed = -1;
          for (const auto a : answers) {
            if (a >= 0)
              agreed = agreed < 0 ? a : std::min(agreed, a);
          }
          if (agreed < 0) {
            registered(rid, 0);
            return;
          }
          agree(self, rid, agreed, registered);
        },
        register_atom_v, r.rid, r.tokens, r.cache_salt, seed);
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
      parts.extend_chains,
      parts.checkpoint_stride,
      parts.model->supports_windows()};
  state.sched = std::make_unique<engine::scheduler>(parts.limits, std::move(facts));
  state.parts = std::move(parts);
  for (const auto& p : state.parts.pools)
    self->monitor(p);
  self->monitor(state.parts.worker);
  self->monitor(state.parts.preprocess);
  self->monitor(state.parts.spec_rows);
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
                  auto ok = [&]() -> result<void> {
                    const auto runs = st.parts.model->image_spans(s.prompt, s.images);
                    if (auto seeded = engine::front_end_seed(s, st.parts.key_page_size, runs);
                        !seeded)
                      return seeded.error();
                    return st.sched->add(std::move(s));
                  }();
                  if (!ok) {
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
