// recurrent_state_pool: plans (the addressing kernels read), staging and
// promotion, and captured graphs' static buffers (reference §1.11-1.12).
#include <algorithm>
#include <fmt/format.h>
#include <utility>

#include "resources/recurrent/pool.hpp"

namespace mstar::resources {

std::shared_ptr<recurrent_plan> recurrent_state_pool::recycled_plan() {
  // A plan nobody else holds any more is refilled in place: its vectors keep
  // their capacity, so a steady decode step allocates nothing.
  for (auto& p : plan_cache_) {
    if (p.use_count() == 1)
      return p;
  }
  auto fresh = std::make_shared<recurrent_plan>();
  if (plan_cache_.size() < 4)
    plan_cache_.push_back(fresh);
  return fresh;
}

result<std::shared_ptr<recurrent_plan>> recurrent_state_pool::build_plan(const recurrent_step& step,
                                                                         const step_context& ctx) {
  auto plan = recycled_plan();
  for (auto& [label, a] : plan->labels) {
    a.slot_indices.clear();
    a.has_state.clear();
    a.graph_slot_indices = nullptr;
    a.graph_has_state = nullptr;
  }
  // Segments grouped by label, declaration order kept within each label.
  recurrent_addressing* current = nullptr;
  const std::string* current_label = nullptr;
  for (const segment& seg : step.segments) {
    if (current_label == nullptr || *current_label != seg.label) {
      auto [it, inserted] = plan->labels.try_emplace(seg.label);
      current = &it->second;
      current_label = &it->first;
    }
    const bool addressed = !ctx.capture && !ctx.is_padding_row(seg.rid) && seg.span > 0;
    const slot_state* slot = addressed ? find_slot(seg.rid, seg.label) : nullptr;
    if (slot == nullptr) {
      current->slot_indices.push_back(pad_index());
      current->has_state.push_back(0);
    } else {
      current->slot_indices.push_back(slot->index);
      current->has_state.push_back(addressed_has_state(step, ctx, seg.rid, *slot, seg.label) ? 1
                                                                                             : 0);
    }
  }
  std::erase_if(plan->labels, [](const auto& entry) { return entry.second.slot_indices.empty(); });
  for (auto& [label, a] : plan->labels)
    a.num_rows = static_cast<std::int32_t>(a.slot_indices.size());
  if (ctx.lease) {
    if (auto ok = bind_graph_buffers(*plan, *ctx.lease); !ok)
      return ok.error();
  }
  return plan;
}

result<void> recurrent_state_pool::bind_graph_buffers(recurrent_plan& plan,
                                                      const graph_lease& lease) {
  // Checked for every label first, so a refused plan creates no buffer.
  for (const auto& [label, a] : plan.labels) {
    const auto it = graph_buffers_.find(graph_key{lease.bucket_rows, lease.slot, label});
    if (it != graph_buffers_.end() &&
        it->second.slot_indices.size() < static_cast<std::size_t>(a.num_rows)) {
      return make_error(
          errc::out_of_range,
          fmt::format("recurrent state pool '{}': label '{}' has {} rows but the captured "
                      "addressing buffer of bucket {} (capture slot {}) holds {}; announce the "
                      "largest batch with build_accelerator_graph_buffers before capturing",
                      key_, label, a.num_rows, lease.bucket_rows, lease.slot,
                      it->second.slot_indices.size()));
    }
  }
  for (auto& [label, a] : plan.labels) {
    auto [it, created] =
        graph_buffers_.try_emplace(graph_key{lease.bucket_rows, lease.slot, label});
    graph_buffer& buffer = it->second;
    if (created) {
      // A graph holds these addresses and one bucket replays at several row
      // counts: sized once, to the most it may ever see, never reallocated.
      const auto rows = static_cast<std::size_t>(
          std::max({graph_max_rows_, lease.bucket_rows, static_cast<int>(a.num_rows)}));
      buffer.slot_indices.assign(rows, pad_index());
      buffer.has_state.assign(rows, 0);
    }
    // The tail must be rewritten: the kernel reads every row of the bucket,
    // and a stale index would write a slot whose request is not in the step.
    a.slot_indices.resize(buffer.slot_indices.size(), pad_index());
    a.has_state.resize(buffer.has_state.size(), 0);
    std::copy(a.slot_indices.begin(), a.slot_indices.end(), buffer.slot_indices.begin());
    std::copy(a.has_state.begin(), a.has_state.end(), buffer.has_state.begin());
    a.graph_slot_indices = buffer.slot_indices.data();
    a.graph_has_state = buffer.has_state.data();
  }
  return {};
}

result<std::shared_ptr<const plan_result>> recurrent_state_pool::plan(const resource_step& step,
                                                                      step_context& ctx) {
  const recurrent_step* s = dynamic_cast<const recurrent_step*>(&step);
  if (s == nullptr) {
    return make_error(errc::invalid_argument, "recurrent state pool '" + key_ +
                                                  "' got a step that is not a recurrent_step");
  }
  if (auto ok = check_fork_targets(*s, ctx, s->pre_forks); !ok)
    return ok.error();
  if (ctx.is_preplan) {
    if (stage_.active && (stage_.plan || !matches_stage(*s, ctx))) {
      return make_error(errc::invalid_argument,
                        "recurrent preplan is already pending; clear_preplan before planning a "
                        "different step ahead");
    }
    const bool fresh_stage = !stage_.active;
    if (fresh_stage)
      open_stage(*s, ctx);
    // No copies: they would race the running step. The addressing reads
    // each fork target's has_state as the copy will leave it.
    auto built = build_plan(*s, ctx);
    if (!built) {
      if (fresh_stage)
        close_stage();
      return built.error();
    }
    stage_.plan = std::move(built).value();
    return std::shared_ptr<const plan_result>(stage_.plan);
  }
  if (stage_.active) {
    if (matches_stage(*s, ctx)) {
      // Promotion: the stage is spent; its reservations are the live step's.
      live_.insert(live_.end(), stage_.reservations.begin(), stage_.reservations.end());
      auto promoted = std::move(stage_.plan);
      close_stage();
      if (promoted) {
        apply_forks(*s, ctx, s->pre_forks);  // the copies staging deferred, exactly once
        return std::shared_ptr<const plan_result>(std::move(promoted));
      }
    } else {
      clear_preplan();  // stale: a different step runs
    }
  }
  auto built = build_plan(*s, ctx);
  if (!built)
    return built.error();
  apply_forks(*s, ctx, s->pre_forks);
  return std::shared_ptr<const plan_result>(std::move(built).value());
}

}  // namespace mstar::resources
