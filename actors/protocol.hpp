#pragma once

// The messages of mstar's actors and their typed handles: one type-ID block
// for the project (compiled with CAF_ENABLE_TYPE_ID_CHECKS, so a message
// type without an ID is a compile error), atoms, and the interfaces of the
// pool, worker and preprocess actors. Messages carry descriptors and
// immutable values, never bulk bytes: a step's typed request and plans
// travel as shared pointers to const values inside one process (the pools'
// arenas are where the bytes are); across processes descriptors go instead
// (the disaggregation issue).

#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/serialization.hpp"
#include "engine/pool_set.hpp"
#include "engine/request.hpp"
#include "engine/scheduler.hpp"
#include "models/causal_lm.hpp"
#include "transport/checksum.hpp"

namespace mstar::actors {

/// A step's rows and the typed request each pool admits, shared read-only
/// by the conductor, the pools and the worker for one step.
struct step_payload {
  engine::scheduled_step step;
  std::vector<models::step_row> rows;  ///< views into `step.rows`' tokens
  models::step_request request;
  /// A step launched ahead (overlap): per row, the row of the step before
  /// whose draw it feeds on the device (-1: its own token); else empty.
  std::vector<std::int32_t> loopback;
};
using step_ptr = std::shared_ptr<const step_payload>;

/// A sequence entering the pools as the model's `begin_sequence` takes it:
/// its request's prompt and images (copied from the scheduler's request,
/// which may end before the worker reads them), shared read-only.
struct sequence_inputs {
  std::vector<engine::token_id> prompt;
  std::vector<models::image_input> images;
};
using sequence_ptr = std::shared_ptr<const sequence_inputs>;

/// A step the scheduler foresees (overlap), for the spec-row builder.
using scheduled_ptr = std::shared_ptr<const engine::scheduled_step>;

/// One pool's plans for a step (the fields of the pools it does not hold
/// stay empty); the conductor merges them for the worker.
using plans_ptr = std::shared_ptr<const models::step_plans>;

/// The forward's output for a step.
using output_ptr = std::shared_ptr<const models::forward_output>;

/// Where a request's deltas go: called from the conductor's thread, so it
/// must be thread-safe (the embedding API's handle queues them).
class delta_sink {
 public:
  virtual ~delta_sink() = default;
  /// A delta of the request; the last one has `finished` set.
  virtual void push(engine::delta d) = 0;
};
using sink_ptr = std::shared_ptr<delta_sink>;

/// What a pool answered to an admit.
struct admit_reply {
  bool ok = true;
  std::string refused_by;  ///< the refusing pool's key
  std::string why;         ///< the refusal's message
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admit_reply& x) {
  return f(caf::meta::type_name("admit_reply"), x.ok, x.refused_by, x.why);
}

/// A pool's counters.
struct pool_stats_reply {
  engine::pool_stats stats;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_stats_reply& x) {
  return f(caf::meta::type_name("pool_stats_reply"), x.stats.kv_pages, x.stats.kv_free_pages,
           x.stats.kv_cached_pages, x.stats.kv_evictable_pages, x.stats.slots, x.stats.free_slots,
           x.stats.checkpoint_slots, x.stats.checkpoints, x.stats.checkpoints_captured,
           x.stats.checkpoints_evicted, x.stats.checkpoint_hits, x.stats.checkpoint_hit_tokens);
}

/// A decode node's transfers of published prompts so far, for /metrics.
struct transfer_counters {
  std::int64_t pulls = 0;          ///< pulls that landed and verified
  std::int64_t mapped_pulls = 0;   ///< of those, through a mapped segment (same host)
  std::int64_t device_pulls = 0;   ///< of those, device to device over CUDA IPC (same host)
  std::int64_t failed = 0;         ///< adoptions given up (the prompt recomputed)
  std::int64_t pages_fetched = 0;  ///< KV pages read from the prefill node (end-key copies too)
  std::int64_t pages_local = 0;    ///< KV pages this node already held (no copy)
  /// Recurrent slots read (all layers, all blocks): streams' and item-end checkpoints'.
  std::int64_t slots_fetched = 0;
  std::int64_t bytes = 0;          ///< bytes read
  std::int64_t micros = 0;         ///< wall time of the pulls, verification included
  std::int64_t copy_micros = 0;    ///< of which moving bytes (start to landed)
  std::int64_t verify_micros = 0;  ///< of which checking checksums

  transfer_counters& operator+=(const transfer_counters& o) {
    pulls += o.pulls;
    mapped_pulls += o.mapped_pulls;
    device_pulls += o.device_pulls;
    failed += o.failed;
    pages_fetched += o.pages_fetched;
    pages_local += o.pages_local;
    slots_fetched += o.slots_fetched;
    bytes += o.bytes;
    micros += o.micros;
    copy_micros += o.copy_micros;
    verify_micros += o.verify_micros;
    return *this;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, transfer_counters& x) {
  return f(caf::meta::type_name("transfer_counters"), x.pulls, x.mapped_pulls, x.device_pulls,
           x.failed, x.pages_fetched, x.pages_local, x.slots_fetched, x.bytes, x.micros,
           x.copy_micros, x.verify_micros);
}

/// The conductor's counters (the engine's `stats()`); a node adds its
/// transfers.
struct engine_stats {
  std::int64_t steps = 0;
  std::int64_t refused_steps = 0;
  std::int64_t generated_tokens = 0;
  std::int64_t preemptions = 0;
  std::int64_t running = 0;
  std::int64_t waiting = 0;
  std::int64_t kv_pages = 0, kv_free_pages = 0, kv_cached_pages = 0;
  std::int64_t slots = 0, free_slots = 0;
  std::int64_t kv_evictable_pages = 0;
  /// overlap: steps launched while the one before ran, and rows of those
  /// rolled back (their sequence ended meanwhile).
  std::int64_t ahead_steps = 0, dropped_rows = 0;
  transfer_counters transfers;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, engine_stats& x) {
  return f(caf::meta::type_name("engine_stats"), x.steps, x.refused_steps, x.generated_tokens,
           x.preemptions, x.running, x.waiting, x.kv_pages, x.kv_free_pages, x.kv_cached_pages,
           x.slots, x.free_slots, x.kv_evictable_pages, x.ahead_steps, x.dropped_rows, x.transfers);
}

/// What a prefill node offers the decode node of a request: its pools'
/// publication (held under a lease), the checksum of every published page
/// and slot, and where the bytes are (the node's arenas, as transport
/// descriptors in JSON: the KV arena first, then the recurrent blocks by
/// name). Descriptors only: the bytes move over UCX or a mapped segment.
struct transfer_offer {
  std::string node;  ///< the publishing node
  engine::publication pub;
  std::vector<transport::unit_checksum> kv_sums;    ///< by source page id
  std::vector<transport::unit_checksum> slot_sums;  ///< by source slot id
  std::vector<std::string> arenas;
  [[nodiscard]] bool empty() const noexcept { return pub.streams.empty(); }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, transfer_offer& x) {
  return f(caf::meta::type_name("transfer_offer"), x.node, x.pub, x.kv_sums, x.slot_sums, x.arenas);
}

/// What a prefill node hands back for a request it ran the prompt of: the
/// deltas of the first token (the last one finished: by the request's own
/// stop rules, or by the one-token cap of a handoff) and, after the cap,
/// the offer of its pool state.
struct handoff {
  std::string node;  ///< the node that ran it
  std::vector<engine::delta> deltas;
  transfer_offer offer;  ///< empty when nothing was published
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, handoff& x) {
  return f(caf::meta::type_name("handoff"), x.node, x.deltas, x.offer);
}

/// A node of a deployment as it introduces itself to the router.
struct node_info {
  std::string name;
  std::string role;  ///< "prefill", "decode" or "both"
  std::int64_t max_context = 0;
  std::int64_t vocab_size = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_info& x) {
  return f(caf::meta::type_name("node_info"), x.name, x.role, x.max_context, x.vocab_size);
}

/// One node as the router sees it.
struct router_node {
  std::string name;
  std::string role;
  bool alive = true;
  std::int64_t outstanding = 0;  ///< requests the router has on it
  std::string exit_reason;       ///< why it left (empty while alive)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, router_node& x) {
  return f(caf::meta::type_name("router_node"), x.name, x.role, x.alive, x.outstanding,
           x.exit_reason);
}

/// The router's counters.
struct router_stats {
  std::vector<router_node> nodes;
  std::int64_t routed = 0;     ///< requests submitted
  std::int64_t handoffs = 0;   ///< prefill → decode handoffs
  std::int64_t reroutes = 0;   ///< requests moved off a node that left
  std::int64_t adopted = 0;    ///< handoffs whose decode node adopted the published state
  std::int64_t in_flight = 0;  ///< requests not yet finished
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, router_stats& x) {
  return f(caf::meta::type_name("router_stats"), x.nodes, x.routed, x.handoffs, x.reroutes,
           x.adopted, x.in_flight);
}

/// Sequence ids and the ids generated for each (prefix-chain extension).
using extend_list = std::vector<std::pair<std::string, std::vector<std::uint32_t>>>;

}  // namespace mstar::actors

namespace mstar::actors {
/// A front end's page keys for a registration (null: key the ids).
using seed_ptr = std::shared_ptr<const resources::kv_prefix_seed>;
}  // namespace mstar::actors

// In-process payloads: immutable values shared by pointer, never serialized.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::seed_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::step_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::scheduled_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::plans_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::output_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::sink_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mstar::actors::sequence_ptr)

CAF_BEGIN_TYPE_ID_BLOCK(mstar, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(mstar, (mstar::actors::admit_reply))
CAF_ADD_TYPE_ID(mstar, (mstar::actors::pool_stats_reply))
CAF_ADD_TYPE_ID(mstar, (mstar::actors::engine_stats))
CAF_ADD_TYPE_ID(mstar, (mstar::actors::extend_list))
CAF_ADD_TYPE_ID(mstar, (std::vector<std::string>))
CAF_ADD_TYPE_ID(mstar, (std::vector<std::uint32_t>))
CAF_ADD_TYPE_ID(mstar, (mstar::engine::request_spec))
CAF_ADD_TYPE_ID(mstar, (mstar::engine::delta))
CAF_ADD_TYPE_ID(mstar, (mstar::actors::handoff))
CAF_ADD_TYPE_ID(mstar, (mstar::actors::transfer_offer))
CAF_ADD_TYPE_ID(mstar, (mstar::engine::publication))
CAF_ADD_TYPE_ID(mstar, (mstar::engine::adoption))
CAF_ADD_TYPE_ID(mstar, (mstar::actors::node_info))
CAF_ADD_TYPE_ID(mstar, (mstar::actors::router_stats))
CAF_ADD_ATOM(mstar, mstar::actors, admit_atom, "admit")
CAF_ADD_ATOM(mstar, mstar::actors, commit_atom, "commit")
CAF_ADD_ATOM(mstar, mstar::actors, rollback_atom, "rollback")
CAF_ADD_ATOM(mstar, mstar::actors, register_atom, "register")
CAF_ADD_ATOM(mstar, mstar::actors, agree_atom, "agree")
CAF_ADD_ATOM(mstar, mstar::actors, extend_atom, "extend")
CAF_ADD_ATOM(mstar, mstar::actors, release_atom, "release")
CAF_ADD_ATOM(mstar, mstar::actors, stats_atom, "stats")
CAF_ADD_ATOM(mstar, mstar::actors, check_atom, "check")
CAF_ADD_ATOM(mstar, mstar::actors, forward_atom, "forward")
CAF_ADD_ATOM(mstar, mstar::actors, tokenize_atom, "tokenize")
CAF_ADD_ATOM(mstar, mstar::actors, submit_atom, "submit")
CAF_ADD_ATOM(mstar, mstar::actors, cancel_atom, "cancel")
CAF_ADD_ATOM(mstar, mstar::actors, tick_atom, "tick")
CAF_ADD_ATOM(mstar, mstar::actors, drain_atom, "drain")
CAF_ADD_ATOM(mstar, mstar::actors, prefill_atom, "prefill")
CAF_ADD_ATOM(mstar, mstar::actors, decode_atom, "decode")
CAF_ADD_ATOM(mstar, mstar::actors, delta_atom, "delta")
CAF_ADD_ATOM(mstar, mstar::actors, relay_atom, "relay")
CAF_ADD_ATOM(mstar, mstar::actors, describe_atom, "describe")
CAF_ADD_ATOM(mstar, mstar::actors, join_atom, "join")
CAF_ADD_ATOM(mstar, mstar::actors, publish_atom, "publish")
CAF_ADD_ATOM(mstar, mstar::actors, unpublish_atom, "unpublish")
CAF_ADD_ATOM(mstar, mstar::actors, adopt_atom, "adopt")
CAF_ADD_ATOM(mstar, mstar::actors, finish_atom, "finish")
CAF_ADD_ATOM(mstar, mstar::actors, abort_atom, "abort")
CAF_ADD_ATOM(mstar, mstar::actors, pull_atom, "pull")
CAF_ADD_ATOM(mstar, mstar::actors, launch_atom, "launch")
CAF_ADD_ATOM(mstar, mstar::actors, drop_atom, "drop")
CAF_ADD_ATOM(mstar, mstar::actors, build_atom, "build")
CAF_END_TYPE_ID_BLOCK(mstar)

namespace mstar::actors {

/// A pool actor (`kv_pool_actor`, `recurrent_pool_actor`): owns one pool
/// (a pool_set holding just it) and answers the step protocol. One step is
/// in flight at a time: admit (which plans too when it admits: one round
/// trip), then commit, or rollback.
using pool_actor = caf::typed_actor<
    caf::replies_to<admit_atom, step_ptr>::with<admit_reply, plans_ptr>,
    caf::replies_to<commit_atom>::with<bool>, caf::replies_to<rollback_atom>::with<bool>,
    // Rolls back these rows of the admitted step (they over-ran, or their
    // request was cancelled); the rest of it commits.
    caf::replies_to<drop_atom, std::vector<std::string>>::with<bool>,
    // Registers a sequence with its tokens (keyed by a front end when the
    // seed is set); answers the cached prompt tokens it could serve (-1: it
    // keeps no cache).
    caf::replies_to<register_atom, std::string, std::vector<std::uint32_t>, std::string,
                    seed_ptr>::with<std::int64_t>,
    caf::replies_to<agree_atom, std::string, std::int64_t>::with<std::int64_t>,
    caf::reacts_to<extend_atom, extend_list>,
    caf::reacts_to<release_atom, std::vector<std::string>>,
    caf::replies_to<stats_atom>::with<pool_stats_reply>,
    caf::replies_to<check_atom>::with<std::string>,
    // Disaggregation (ARCHITECTURE.md): publish a finished prompt's state
    // (held until unpublish), adopt another node's publication (then the
    // transfer lands: finish, or it does not: abort).
    caf::replies_to<publish_atom, std::string>::with<transfer_offer>,
    caf::reacts_to<unpublish_atom, std::string>,
    caf::replies_to<adopt_atom, std::string, engine::publication>::with<engine::adoption>,
    caf::replies_to<finish_atom, std::string>::with<bool>,
    caf::replies_to<abort_atom, std::string>::with<bool>>;

/// The worker actor: owns the model and its device stream, runs a step's
/// forward given the merged plans: at once (`forward`), or launched (the
/// ticket comes back once the work is queued) and finished later, so the
/// next step can be launched in between (overlap). The conductor tells it
/// which sequences enter the pools (the model's `begin_sequence`: rotary
/// positions, images) and leave them (`end_sequence`), in its mailbox ahead
/// of the steps that need them.
using worker_actor =
    caf::typed_actor<caf::replies_to<forward_atom, step_ptr, plans_ptr>::with<output_ptr>,
                     caf::replies_to<launch_atom, step_ptr, plans_ptr>::with<std::uint64_t>,
                     caf::replies_to<finish_atom, std::uint64_t>::with<output_ptr>,
                     caf::reacts_to<register_atom, std::string, sequence_ptr>,
                     caf::reacts_to<release_atom, std::vector<std::string>>>;

/// The spec-row builder actor: the payload of a step launched ahead, built
/// while the step before runs (actors/spec_row_builder_actor.hpp).
using spec_row_builder_actor =
    caf::typed_actor<caf::replies_to<build_atom, scheduled_ptr, step_ptr>::with<step_ptr>>;

/// The preprocess actor: tokenizes a request's text prompt and fits its
/// images to it (the model's `place_images`).
using preprocess_actor = caf::typed_actor<
    caf::replies_to<tokenize_atom, engine::request_spec>::with<engine::request_spec>>;

}  // namespace mstar::actors

namespace mstar::actors {

/// A node of a deployment (node_actor.hpp), as the router and other nodes
/// reach it, in-process or remote: every message here serializes.
using node_actor = caf::typed_actor<
    // Runs the prompt (the router caps it at one token) and hands back the
    // deltas.
    caf::replies_to<prefill_atom, engine::request_spec>::with<handoff>,
    // Runs the request (resumed after `generated`, or whole), streaming
    // `(delta_atom, ticket, engine::delta)` to the actor given, with the
    // ticket it came with (the router's dispatch count: deltas of a
    // dispatch the request has left are told apart); answers once queued.
    // With a non-empty offer the node first adopts the prefill node's pool
    // state (reading the missing bytes); the answer says whether it did
    // (false: it recomputes the prompt instead).
    caf::replies_to<decode_atom, engine::request_spec, caf::actor, std::uint64_t,
                    transfer_offer>::with<bool>,
    // The decode node has what it offered (or gave up on it): the holds go.
    caf::reacts_to<unpublish_atom, std::string>,
    // The lease of a publication (its serial) is over.
    caf::reacts_to<tick_atom, std::string, std::uint64_t>, caf::reacts_to<cancel_atom, std::string>,
    caf::replies_to<describe_atom>::with<node_info>,
    caf::replies_to<stats_atom>::with<engine_stats>,
    // From the node's own delta sinks (the conductor's thread): a delta to
    // route to its prefill reply or its router.
    caf::reacts_to<relay_atom, engine::delta>>;

}  // namespace mstar::actors
