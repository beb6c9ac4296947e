// recurrent_state_pool: admit, rollback, commit and the pre-plan stage's
// reservations (reference §1.11-1.13).
#include <fmt/format.h>
#include <utility>

#include "resources/recurrent/pool.hpp"

namespace mstar::resources {
namespace {

const recurrent_step* as_recurrent_step(const resource_step& step) {
  return dynamic_cast<const recurrent_step*>(&step);
}

}  // namespace

void recurrent_state_pool::open_stage(const recurrent_step& step, const step_context& ctx) {
  // Assigned in place: the vectors, strings and set reuse their storage.
  step_identity& id = stage_.identity;
  id.segments = step.segments;
  id.pre_forks = step.pre_forks;
  id.post_forks = step.post_forks;
  id.fork_rids = step.fork_rids;
  id.padding_rows = ctx.padding_rows;
  id.capture = ctx.capture;
  id.lease = ctx.lease;
  stage_.active = true;
}

void recurrent_state_pool::close_stage() {
  stage_.active = false;
  stage_.admitted = false;
  stage_.reservations.clear();
  stage_.plan.reset();
}

bool recurrent_state_pool::matches_stage(const recurrent_step& step,
                                         const step_context& ctx) const {
  const step_identity& id = stage_.identity;
  return id.capture == ctx.capture && id.lease == ctx.lease && id.segments == step.segments &&
         id.pre_forks == step.pre_forks && id.post_forks == step.post_forks &&
         id.fork_rids == step.fork_rids && id.padding_rows == ctx.padding_rows;
}

admit_outcome recurrent_state_pool::full(const request_id& rid, const std::string& label) const {
  return admit_outcome::refused(allocation_failed{
      fmt::format("recurrent state pool is full: {} usable slots, none free for {}/{}",
                  config_.usable_slots(), rid, label),
      1, label, rid});
}

admit_outcome recurrent_state_pool::frozen(const request_id& rid, const std::string& label,
                                           const slot_state& slot) const {
  return admit_outcome::refused(admit_runtime_error{
      fmt::format("recurrent state pool '{}': {}/{} is {}", key_, rid, label,
                  slot.importing ? "importing (finish_import or abort_import first)"
                                 : "exported (release_export or remove the request first)")});
}

recurrent_state_pool::slot_state* recurrent_state_pool::take_slot(const request_id& rid,
                                                                  const std::string& label,
                                                                  std::vector<reservation>& taken) {
  auto& labels = slots_[rid];
  if (const auto it = labels.find(label); it != labels.end())
    return &it->second;
  if (free_.empty())
    return nullptr;
  const std::int32_t index = free_.back();
  free_.pop_back();
  taken.push_back({rid, label, index});
  return &labels.emplace(label, slot_state{index, false, 0, 0}).first->second;
}

admit_outcome recurrent_state_pool::reserve(const recurrent_step& step, const step_context& ctx,
                                            std::vector<reservation>& taken) {
  ++epoch_;
  for (const segment& seg : step.segments) {
    if (seg.span <= 0 || ctx.is_padding_row(seg.rid))
      continue;
    slot_state* const found = take_slot(seg.rid, seg.label, taken);
    if (found == nullptr)
      return full(seg.rid, seg.label);
    slot_state& slot = *found;
    if (slot.exported || slot.importing)
      return frozen(seg.rid, seg.label, slot);
    // Two rows scattering into one slot would be nondeterministic.
    if (slot.seen_epoch == epoch_) {
      return admit_outcome::refused(admit_runtime_error{
          fmt::format("recurrent state pool '{}': {}/{} is written by two segments of one step",
                      key_, seg.rid, seg.label)});
    }
    slot.seen_epoch = epoch_;
  }
  // Fork targets are reserved now, so the copies at plan and commit cannot
  // run out of slots.
  for (std::size_t i = 0; i < step.segments.size(); ++i) {
    if (!forks_apply(step, ctx, i))
      continue;
    const request_id& rid = step.segments[i].rid;
    for (const auto* forks : {&step.pre_forks, &step.post_forks}) {
      for (const auto& [from, to] : *forks) {
        const slot_state* slot = take_slot(rid, to, taken);
        if (slot == nullptr)
          return full(rid, to);
        if (slot->exported || slot->importing)
          return frozen(rid, to, *slot);
      }
    }
  }
  return admit_outcome::admitted();
}

void recurrent_state_pool::unwind(std::vector<reservation>& taken, std::size_t from) {
  // Newest first, so the free list returns to its exact prior order: ranks
  // refusing the same step keep handing out the same ids.
  while (taken.size() > from) {
    const reservation& r = taken.back();
    const auto req = slots_.find(r.rid);
    if (req != slots_.end()) {
      const auto it = req->second.find(r.label);
      // Skipped when removed meanwhile: its slot is already back.
      if (it != req->second.end() && it->second.index == r.index) {
        req->second.erase(it);
        release_slot(r.index);
      }
    }
    taken.pop_back();
  }
}

admit_outcome recurrent_state_pool::admit(const resource_step& step, step_context& ctx) {
  const recurrent_step* s = as_recurrent_step(step);
  if (s == nullptr) {
    return admit_outcome::refused(admit_runtime_error{"recurrent state pool '" + key_ +
                                                      "' got a step that is not a recurrent_step"});
  }
  std::vector<reservation>* taken = &live_;
  if (ctx.is_preplan) {
    if (stage_.active) {
      return admit_outcome::refused(admit_runtime_error{
          "recurrent preplan is already pending; clear_preplan before planning a different step "
          "ahead"});
    }
    open_stage(*s, ctx);
    taken = &stage_.reservations;
  } else {
    if (stage_.active && !matches_stage(*s, ctx))
      clear_preplan();  // stale: a different step runs
    if (!stage_.active || !stage_.admitted) {
      live_.clear();  // an earlier step's slots are its own now
      if (stage_.active) {
        // The staged reservations are this step's: a refusal now unwinds
        // them, a later clear_preplan leaves them alone.
        live_.swap(stage_.reservations);
        stage_.admitted = true;
      }
    }
  }
  // Capture rows are the runner's dummies; across capture slots times the
  // widest bucket they would drain a pool sized for the real concurrency.
  if (ctx.capture)
    return admit_outcome::admitted();
  const std::size_t mark = taken->size();
  admit_outcome outcome = reserve(*s, ctx, *taken);
  if (!outcome.ok) {
    unwind(*taken, mark);
    if (ctx.is_preplan)
      close_stage();
  }
  return outcome;
}

void recurrent_state_pool::rollback_admit(const resource_step& step, step_context& ctx) {
  (void)step;
  if (ctx.is_preplan) {
    clear_preplan();
    return;
  }
  unwind(live_, 0);
  // A stage the refused admit took over addresses slots just freed.
  if (stage_.active && stage_.admitted)
    close_stage();
}

void recurrent_state_pool::rollback_rows(const resource_step& step, step_context& ctx,
                                         const std::set<request_id>& rows) {
  (void)step;
  std::vector<reservation> theirs;
  std::vector<reservation> kept;
  for (auto& r : live_)
    (rows.contains(r.rid) ? theirs : kept).push_back(std::move(r));
  live_ = std::move(kept);
  unwind(theirs, 0);
  ctx.padding_rows.insert(rows.begin(), rows.end());
}

void recurrent_state_pool::clear_preplan() {
  if (!stage_.active)
    return;
  unwind(stage_.reservations, 0);
  close_stage();
}

result<void> recurrent_state_pool::commit(const resource_step& step, step_context& ctx) {
  const recurrent_step* s = as_recurrent_step(step);
  if (s == nullptr) {
    return make_error(errc::invalid_argument, "recurrent state pool '" + key_ +
                                                  "' got a step that is not a recurrent_step");
  }
  if (ctx.capture) {
    live_.clear();
    return {};
  }
  if (auto ok = check_fork_targets(*s, ctx, s->post_forks); !ok)
    return ok;
  // The backend wrote the bytes; commit records that later steps resume.
  for (const segment& seg : s->segments) {
    if (seg.span <= 0 || ctx.is_padding_row(seg.rid))
      continue;
    if (slot_state* slot = find_slot(seg.rid, seg.label)) {
      slot->has_state = true;
      if (seg.label == "main" && !ckpt_streams_.empty())
        capture_checkpoint(seg.rid, slot->index, seg.span);
    }
  }
  apply_forks(*s, ctx, s->post_forks);
  live_.clear();
  return {};
}

}  // namespace mstar::resources
