// recurrent_state_pool: forks, byte copies of one label's slot into another
// label's slot of the same request (reference §1.11 "Fork application").
#include <algorithm>
#include <fmt/format.h>

#include "resources/recurrent/pool.hpp"

namespace mstar::resources {
namespace {

bool forks_apply_to(const recurrent_step& step, const step_context& ctx, const request_id& rid) {
  if (ctx.capture || ctx.is_padding_row(rid))
    return false;
  return !step.fork_rids ||
         std::find(step.fork_rids->begin(), step.fork_rids->end(), rid) != step.fork_rids->end();
}

}  // namespace

// Whether row `row` is the first row of a request the step's forks apply to:
// forks run once per request, in order of first appearance, so every rank
// reserves and copies in the same order.
bool recurrent_state_pool::forks_apply(const recurrent_step& step, const step_context& ctx,
                                       std::size_t row) {
  if (step.pre_forks.empty() && step.post_forks.empty())
    return false;
  const request_id& rid = step.segments[row].rid;
  if (!forks_apply_to(step, ctx, rid))
    return false;
  const auto first = step.segments.begin();
  return std::none_of(first, first + static_cast<std::ptrdiff_t>(row),
                      [&](const segment& s) { return s.rid == rid; });
}

result<void> recurrent_state_pool::check_fork_targets(const recurrent_step& step,
                                                      const step_context& ctx,
                                                      const std::vector<fork>& forks) const {
  if (forks.empty())
    return {};
  for (std::size_t i = 0; i < step.segments.size(); ++i) {
    if (!forks_apply(step, ctx, i))
      continue;
    const request_id& rid = step.segments[i].rid;
    for (const auto& [from, to] : forks) {
      if (find_slot(rid, from) != nullptr && find_slot(rid, to) == nullptr) {
        return make_error(errc::not_found,
                          fmt::format("recurrent state pool '{}': fork target {}/{} was never "
                                      "reserved; admit the step before planning or committing it",
                                      key_, rid, to));
      }
    }
  }
  return {};
}

void recurrent_state_pool::apply_forks(const recurrent_step& step, const step_context& ctx,
                                       const std::vector<fork>& forks) {
  if (forks.empty())
    return;
  for (std::size_t i = 0; i < step.segments.size(); ++i) {
    if (!forks_apply(step, ctx, i))
      continue;
    const request_id& rid = step.segments[i].rid;
    for (const auto& [from, to] : forks) {
      const slot_state* src = find_slot(rid, from);
      if (src == nullptr)
        continue;  // nothing to fork from yet
      slot_state* dst = find_slot(rid, to);
      if (dst == nullptr)
        continue;  // check_fork_targets refuses this before any copy
      // Every layer of every block: labels never alias one slot, since
      // kernels overwrite state in place every step.
      copy_slot(src->index, dst->index);
      dst->has_state = src->has_state;
      ++dst->generation;
    }
  }
}

// (rid, label)'s has_state after the step's first `n` pre-forks were copied:
// what a staged plan addresses in place of copies it may not make yet, and
// what a live plan addresses after making them. The last fork into `label`
// whose source exists wins, reading its source as of that fork.
bool recurrent_state_pool::has_state_after_pre_forks(const recurrent_step& step,
                                                     const request_id& rid,
                                                     const std::string& label,
                                                     std::size_t n) const {
  for (std::size_t i = n; i-- > 0;) {
    const auto& [from, to] = step.pre_forks[i];
    if (to == label && find_slot(rid, from) != nullptr)
      return has_state_after_pre_forks(step, rid, from, i);
  }
  const slot_state* slot = find_slot(rid, label);
  return slot != nullptr && slot->has_state;
}

// What a row addresses as (rid, label)'s has_state: the slot's own, or,
// when pre-forks write the label, the value the copies leave (made or not).
bool recurrent_state_pool::addressed_has_state(const recurrent_step& step, const step_context& ctx,
                                               const request_id& rid, const slot_state& slot,
                                               const std::string& label) const {
  if (step.pre_forks.empty() || !forks_apply_to(step, ctx, rid))
    return slot.has_state;
  return has_state_after_pre_forks(step, rid, label, step.pre_forks.size());
}

}  // namespace mstar::resources
