#pragma once

// A deployment as its front node embeds it: a router (router_actor.hpp)
// over nodes that joined, each a node actor in this process or another.
// The same calls as actors::runtime: submit (a handle, or a callback),
// cancel, counters.
//
//   auto d = deployment::start_in(sys);
//   d->join(prefill_node, 5s); d->join(decode_node, 5s);
//   auto h = d->submit(spec);
//   while (auto x = h.next()) std::cout << x->text;

#include <atomic>
#include <caf/fwd.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/protocol.hpp"
#include "actors/router_actor.hpp"
#include "actors/runtime.hpp"
#include "core/result.hpp"

namespace mstar::actors {

class deployment {
 public:
  /// Spawns the router in `sys` (whose config registered mstar's message
  /// types; it must outlive the deployment).
  [[nodiscard]] static std::unique_ptr<deployment> start_in(caf::actor_system& sys,
                                                            router_options options = {});
  ~deployment();  ///< stops the router (requests in flight fail)
  deployment(const deployment&) = delete;
  deployment& operator=(const deployment&) = delete;

  /// Asks `node` to describe itself and adds it to the router (a node that
  /// left and joins again under its name takes its place). An error when it
  /// does not answer within `timeout`.
  [[nodiscard]] result<node_info> join(const node_actor& node, std::chrono::milliseconds timeout);

  /// Queues `spec` (ids are assigned when empty); its deltas go to the handle.
  [[nodiscard]] request_handle submit(engine::request_spec spec);
  /// Queues `spec`; `on_delta` runs on an actor thread for each delta.
  engine::request_id submit(engine::request_spec spec,
                            std::function<void(const engine::delta&)> on_delta);
  void cancel(const engine::request_id& id);

  /// The router's counters (nodes, handoffs, re-routes).
  [[nodiscard]] result<router_stats> stats();
  /// The engine counters of every node the router has alive, summed (a
  /// node that does not answer in 2 s counts for nothing).
  [[nodiscard]] result<engine_stats> node_stats();
  /// The router actor (what nodes send their deltas to).
  [[nodiscard]] const caf::actor& router() const noexcept { return router_; }

 private:
  explicit deployment(caf::actor_system& sys) : sys_(sys) {}
  [[nodiscard]] engine::request_id name(engine::request_spec& spec);

  caf::actor_system& sys_;
  caf::actor router_;
  std::mutex mutex_;
  std::map<std::string, node_actor> nodes_;  ///< by name: the last of each that joined
  std::atomic<std::uint64_t> next_id_{0};
};

}  // namespace mstar::actors
