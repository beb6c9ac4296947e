#include "actors/runtime.hpp"

#include <cstdlib>
#include <fmt/format.h>

#include "actors/conductor_actor.hpp"
#include "actors/delta_queue.hpp"
#include "actors/pool_actor.hpp"
#include "actors/protocol.hpp"
#include "actors/spec_row_builder_actor.hpp"
#include "actors/worker_actor.hpp"
#include "engine/pool_memory.hpp"
#include "models/load.hpp"

namespace mstar::actors {

struct runtime::parts {
  std::shared_ptr<engine::pool_set> kv, rec;  ///< also owned by their pool actors
  caf::actor conductor;
  std::vector<pool_actor> pools;
  worker_actor worker;
  preprocess_actor preprocess;
  spec_row_builder_actor spec_rows;
};

request_handle::request_handle(engine::request_id id, std::shared_ptr<delta_queue> queue,
                               caf::actor* conductor)
    : id_(std::move(id)),
      queue_(std::move(queue)),
      conductor_(std::make_shared<caf::actor>(*conductor)) {}
request_handle::request_handle(request_handle&&) noexcept = default;
request_handle& request_handle::operator=(request_handle&& other) noexcept {
  if (this != &other) {
    if (queue_ && !queue_->done())
      cancel();
    id_ = std::move(other.id_);
    queue_ = std::move(other.queue_);
    conductor_ = std::move(other.conductor_);
  }
  return *this;
}
request_handle::~request_handle() {
  if (queue_ && !queue_->done())
    cancel();
}

std::optional<engine::delta> request_handle::next() {
  return queue_->pop(std::nullopt);
}
std::optional<engine::delta> request_handle::next_for(std::chrono::milliseconds timeout) {
  return queue_->pop(timeout);
}
bool request_handle::done() const {
  return queue_->done();
}
void request_handle::cancel() {
  if (conductor_ && *conductor_)
    caf::anon_send(*conductor_, cancel_atom_v, id_);
}

void runtime::add_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::mstar>();
}

result<std::unique_ptr<runtime>> runtime::start(const runtime_options& options) {
  auto model = models::load_causal_lm(options.model, options.run);
  if (!model)
    return model.error();
  return start(std::move(*model), options.engine, options.threads);
}

result<std::unique_ptr<runtime>> runtime::start(std::unique_ptr<models::causal_lm> model,
                                                const engine::engine_config& config,
                                                std::size_t threads) {
  auto rt = std::unique_ptr<runtime>(new runtime);
  rt->own_config_ = std::make_unique<caf::actor_system_config>();
  add_message_types(*rt->own_config_);
  if (threads > 0)
    rt->own_config_->set("scheduler.max-threads", threads);
  // Work stealing sleeps between polls (50 µs, then 10 ms) when idle, and a
  // step's replies often find the scheduler asleep: the sharing policy wakes
  // a thread on a condition variable the moment a message arrives.
  rt->own_config_->set("scheduler.policy", caf::atom("sharing"));
  rt->own_config_->set("logger.verbosity", caf::atom("quiet"));
  rt->own_system_ = std::make_unique<caf::actor_system>(*rt->own_config_);
  rt->sys_ = rt->own_system_.get();
  return launch(std::move(rt), std::move(model), config);
}

result<std::unique_ptr<runtime>> runtime::start_in(caf::actor_system& sys,
                                                   std::unique_ptr<models::causal_lm> model,
                                                   const engine::engine_config& config) {
  auto rt = std::unique_ptr<runtime>(new runtime);
  rt->sys_ = &sys;
  return launch(std::move(rt), std::move(model), config);
}

result<std::unique_ptr<runtime>> runtime::launch(std::unique_ptr<runtime> rt,
                                                 std::unique_ptr<models::causal_lm> model,
                                                 const engine::engine_config& config) {
  auto spec = model->pools(config.pools);
  if (!spec)
    return spec.error();
  if (auto ok = engine::check_pool_memory(*spec, !model->on_gpu(), config.pools.max_memory); !ok)
    return ok.error();
  if (!spec->memory)
    spec->memory = config.host_memory;
  // One pool set per pool actor, each holding its one pool.
  std::shared_ptr<engine::pool_set> kv, rec;
  if (spec->kv) {
    auto made = engine::pool_set::make(*spec, engine::pool_kinds::kv_only);
    if (!made)
      return made.error();
    kv = std::move(*made);
  }
  if (spec->recurrent) {
    auto made = engine::pool_set::make(*spec, engine::pool_kinds::recurrent_only);
    if (!made)
      return made.error();
    rec = std::move(*made);
  }
  if (auto ok = model->bind(kv ? kv->kv() : nullptr, rec ? rec->recurrent() : nullptr); !ok) {
    return ok.error();
  }
  std::shared_ptr<models::causal_lm> shared{std::move(model)};
  rt->model_ = shared;
  auto& sys = *rt->sys_;
  auto p = std::make_unique<parts>();
  if (kv)
    p->pools.push_back(spawn_pool_actor(sys, kv, shared));
  if (rec)
    p->pools.push_back(spawn_pool_actor(sys, rec, shared));
  p->worker = spawn_worker_actor(sys, shared, std::getenv("MSTAR_WORKER_THREAD") != nullptr);
  p->preprocess = spawn_preprocess_actor(sys, shared);
  p->spec_rows = spawn_spec_row_builder_actor(sys, shared);
  const bool chains = kv && kv->kv()->prefix_cache_open();
  const auto& rc = rec ? rec->recurrent()->config() : resources::recurrent_state_config{};
  p->conductor = spawn_conductor(
      sys, {config.scheduler, shared, p->pools, p->worker, p->preprocess, p->spec_rows, chains,
            config.schedule.value_or(engine::default_schedule(*shared)),
            rc.checkpoint_slots > 0 ? rc.checkpoint_stride : 0,
            std::max(kv ? kv->key_page_size() : 0, rec ? rec->key_page_size() : 0)});
  p->kv = kv;
  p->rec = rec;
  rt->parts_ = std::move(p);
  return rt;
}

runtime::~runtime() {
  stop();
}

engine::request_id runtime::name(engine::request_spec& spec) {
  if (spec.id.empty())
    spec.id = fmt::format("req-{}", next_id_.fetch_add(1));
  return spec.id;
}

request_handle runtime::submit(engine::request_spec spec) {
  const auto id = name(spec);
  auto queue = std::make_shared<delta_queue>(std::max<std::int32_t>(1, spec.sampling.n), nullptr);
  if (!parts_) {
    queue->push(error_delta(id, "the engine is stopped"));
  } else {
    caf::anon_send(parts_->conductor, submit_atom_v, std::move(spec), sink_ptr{queue});
  }
  caf::actor none;
  return request_handle{id, std::move(queue), parts_ ? &parts_->conductor : &none};
}

engine::request_id runtime::submit(engine::request_spec spec,
                                   std::function<void(const engine::delta&)> on_delta) {
  const auto id = name(spec);
  auto queue = std::make_shared<delta_queue>(std::max<std::int32_t>(1, spec.sampling.n),
                                             std::move(on_delta));
  if (!parts_) {
    queue->push(error_delta(id, "the engine is stopped"));
  } else {
    caf::anon_send(parts_->conductor, submit_atom_v, std::move(spec), sink_ptr{queue});
  }
  return id;
}

void runtime::cancel(const engine::request_id& id) {
  if (parts_)
    caf::anon_send(parts_->conductor, cancel_atom_v, id);
}

result<runtime_stats> runtime::stats() {
  if (!parts_)
    return make_error(errc::cancelled, "the engine is stopped");
  caf::scoped_actor self{*sys_};
  runtime_stats out;
  std::optional<mstar::error> failed;
  const auto timeout = std::chrono::seconds(10);
  self->request(parts_->conductor, timeout, stats_atom_v)
      .receive(
          [&](const engine_stats& s) {
            out.steps = s.steps;
            out.refused_steps = s.refused_steps;
            out.generated_tokens = s.generated_tokens;
            out.preemptions = s.preemptions;
            out.running = s.running;
            out.waiting = s.waiting;
            out.ahead_steps = s.ahead_steps;
            out.dropped_rows = s.dropped_rows;
          },
          [&](caf::error& e) { failed = make_error(errc::internal, sys_->render(e)); });
  for (const auto& p : parts_->pools) {
    self->request(p, timeout, stats_atom_v)
        .receive(
            [&](const pool_stats_reply& r) {
              out.kv_pages += r.stats.kv_pages;
              out.kv_free_pages += r.stats.kv_free_pages;
              out.kv_cached_pages += r.stats.kv_cached_pages;
              out.kv_evictable_pages += r.stats.kv_evictable_pages;
              out.slots += r.stats.slots;
              out.free_slots += r.stats.free_slots;
              out.checkpoints += r.stats.checkpoints;
              out.checkpoint_hit_tokens += r.stats.checkpoint_hit_tokens;
            },
            [&](caf::error& e) { failed = make_error(errc::internal, sys_->render(e)); });
  }
  if (failed)
    return *failed;
  return out;
}

result<void> runtime::warm_up() {
  if (!model_->on_gpu())
    return {};
  engine::request_spec spec;
  spec.id = "mstar-warm-up";
  spec.prompt = {0};
  spec.stop.max_tokens = 2;
  spec.stop.ignore_eos = true;
  auto done = complete(*this, {std::move(spec)});
  if (done.front().finished.front() == engine::finish_reason::error) {
    return make_error(errc::internal, "GPU warm-up: " + done.front().errors.front());
  }
  return {};
}

std::vector<engine::completion> complete(runtime& rt, std::vector<engine::request_spec> requests) {
  engine::completion_collector collector;
  std::vector<request_handle> handles;
  for (auto& r : requests) {
    handles.push_back(rt.submit(r));
    r.id = handles.back().id();
    collector.expect(r);
  }
  for (auto& h : handles) {
    while (auto d = h.next())
      collector.add(*d);
  }
  return collector.take();
}

result<void> runtime::check_pools() {
  if (!parts_)
    return make_error(errc::cancelled, "the engine is stopped");
  caf::scoped_actor self{*sys_};
  std::string problems;
  for (const auto& p : parts_->pools) {
    self->request(p, std::chrono::seconds(10), check_atom_v)
        .receive([&](const std::string& why) { problems += why; },
                 [&](caf::error& e) { problems += sys_->render(e); });
  }
  if (!problems.empty())
    return make_error(errc::internal, problems);
  return {};
}

caf::actor runtime::conductor() const {
  return parts_ ? parts_->conductor : caf::actor{};
}

std::vector<caf::actor> runtime::pool_actors() const {
  std::vector<caf::actor> out;
  if (parts_) {
    for (const auto& p : parts_->pools)
      out.push_back(caf::actor_cast<caf::actor>(p));
  }
  return out;
}

std::pair<pool_regions, std::shared_ptr<const void>> runtime::pool_memory() const {
  if (!parts_)
    return {};
  pool_regions r;
  if (parts_->kv)
    r = merged(std::move(r), regions_of(*parts_->kv));
  if (parts_->rec)
    r = merged(std::move(r), regions_of(*parts_->rec));
  // The model too, released after the pools (members go in reverse order):
  // device arenas free on its backend's stream, and the holder (a transfer
  // actor) may be the last one to let go of them.
  struct kept {
    std::shared_ptr<const models::causal_lm> model;
    std::shared_ptr<engine::pool_set> kv, rec;
  };
  auto keep = std::make_shared<kept>(kept{model_, parts_->kv, parts_->rec});
  return {std::move(r), std::move(keep)};
}

void runtime::stop() {
  std::call_once(stopped_, [this] {
    if (!parts_)
      return;
    {
      caf::scoped_actor self{*sys_};
      self->request(parts_->conductor, caf::infinite, drain_atom_v)
          .receive([](bool) {}, [](caf::error&) {});
      for (const auto& p : parts_->pools)
        self->send_exit(p, caf::exit_reason::user_shutdown);
      self->send_exit(parts_->worker, caf::exit_reason::user_shutdown);
      self->send_exit(parts_->preprocess, caf::exit_reason::user_shutdown);
      self->send_exit(parts_->spec_rows, caf::exit_reason::user_shutdown);
      self->send_exit(parts_->conductor, caf::exit_reason::user_shutdown);
    }
    parts_.reset();
    if (own_system_)
      own_system_->await_all_actors_done();
    own_system_.reset();
    own_config_.reset();
  });
}

}  // namespace mstar::actors
