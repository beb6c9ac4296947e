// kv_pool: plans (the addressing record kernels read), pre-planning and forks.
#include <algorithm>
#include <fmt/format.h>

#include "resources/kv/kv_pool.hpp"
#include "resources/kv/kv_pool_state.hpp"

namespace mstar::resources {
namespace {

bool fork_applies(const kv_step& step, const request_id& rid) {
  return !step.fork_rids ||
         std::find(step.fork_rids->begin(), step.fork_rids->end(), rid) != step.fork_rids->end();
}

}  // namespace

std::shared_ptr<kv_plan> kv_pool::recycled_plan() {
  // A plan nobody else holds any more is refilled in place: its vectors keep
  // their capacity, so a decode step allocates (and page-faults) nothing.
  for (auto& p : plan_cache_) {
    if (p.use_count() == 1) {
      for (auto& [label, lp] : p->labels) {
        lp.rows.clear();
        lp.qo_indptr.clear();
        lp.kv_indptr.clear();
        lp.kv_indices.clear();
        lp.last_page_len.clear();
        lp.decode_page.clear();
        lp.decode_offset.clear();
        lp.decode = false;
      }
      return p;
    }
  }
  auto fresh = std::make_shared<kv_plan>();
  if (plan_cache_.size() < 4)
    plan_cache_.push_back(fresh);
  return fresh;
}

std::shared_ptr<kv_plan> kv_pool::build_plan(const kv_step& step, const step_context& ctx,
                                             bool pre_forks_pending) {
  auto plan = recycled_plan();
  kv_plan& out = *plan;
  out.pre_forks = step.pre_forks;
  out.post_forks = step.post_forks;
  const std::int64_t ps = config_.geometry.page_size;
  kv_label_plan* current = nullptr;
  const std::string* current_label = nullptr;
  for (std::size_t i = 0; i < step.segments.size(); ++i) {
    const segment& seg = step.segments[i];
    if (current_label == nullptr || *current_label != seg.label) {
      auto [it, inserted] = out.labels.try_emplace(seg.label);
      current = &it->second;
      current_label = &it->first;
      if (current->qo_indptr.empty()) {
        current->qo_indptr.push_back(0);
        current->kv_indptr.push_back(0);
        current->decode = true;
      }
    }
    kv_label_plan& lp = *current;
    std::int64_t length = seg.span;
    const stream_state* st = step_stream(step, ctx, i);
    if (st != nullptr) {
      std::int64_t base = st->stored_len;
      if (pre_forks_pending && fork_applies(step, seg.rid)) {
        for (const auto& [from, to] : step.pre_forks) {
          if (to != seg.label)
            continue;
          const stream_state* src = find_stream(seg.rid, from);
          base = src != nullptr ? src->stored_len : 0;
        }
      }
      length += base;
    }
    const auto npages = static_cast<std::size_t>((length + ps - 1) / ps);
    if (st != nullptr) {
      lp.kv_indices.insert(
          lp.kv_indices.end(), st->pages.begin(),
          st->pages.begin() + static_cast<long>(std::min(npages, st->pages.size())));
    } else {
      lp.kv_indices.insert(lp.kv_indices.end(), npages, sink_page);  // padding rows write the sink
    }
    lp.rows.push_back(static_cast<std::int32_t>(i));
    lp.qo_indptr.push_back(lp.qo_indptr.back() + static_cast<std::int32_t>(seg.span));
    lp.kv_indptr.push_back(static_cast<std::int32_t>(lp.kv_indices.size()));
    const auto last =
        static_cast<std::int32_t>(length == 0 ? 0 : (length % ps == 0 ? ps : length % ps));
    lp.last_page_len.push_back(last);
    if (seg.span != 1)
      lp.decode = false;
  }
  std::erase_if(out.labels, [](const auto& entry) { return entry.second.qo_indptr.empty(); });
  // The decode path: each row's one new token goes to the last page of its
  // view at the last used slot; no per-token work on the device side.
  for (auto& [label, lp] : out.labels) {
    if (!lp.decode)
      continue;
    lp.decode_page.reserve(lp.rows.size());
    lp.decode_offset.reserve(lp.rows.size());
    for (std::size_t r = 0; r < lp.rows.size(); ++r) {
      lp.decode_page.push_back(lp.kv_indices[static_cast<std::size_t>(lp.kv_indptr[r + 1] - 1)]);
      lp.decode_offset.push_back(lp.last_page_len[r] - 1);
    }
  }
  return plan;
}

result<std::shared_ptr<const plan_result>> kv_pool::plan(const resource_step& step,
                                                         step_context& ctx) {
  const kv_step* s = dynamic_cast<const kv_step*>(&step);
  if (s == nullptr)
    return make_error(errc::invalid_argument, "kv pool got a non-KV step");
  if (ctx.is_preplan) {
    if (!staged_)
      return make_error(errc::invalid_argument, "pre-plan without a pre-admit");
    if (staged_->plan)
      return make_error(errc::invalid_argument, "a pre-plan is already pending");
    // Pre-fork copies would race the running step: plan as if they happened.
    staged_->plan = build_plan(*s, ctx, true);
    return std::shared_ptr<const plan_result>(staged_->plan);
  }
  if (staged_) {
    if (staged_->plan && staged_->segments == s->segments &&
        staged_->padding_rows == ctx.padding_rows) {
      auto promoted = staged_->plan;
      staged_.reset();
      apply_forks(*s, ctx, /*post=*/false);  // the copies staging deferred
      return std::shared_ptr<const plan_result>(std::move(promoted));
    }
    clear_preplan();
  }
  apply_forks(*s, ctx, /*post=*/false);
  return std::shared_ptr<const plan_result>(build_plan(*s, ctx, false));
}

void kv_pool::clear_preplan() {
  if (!staged_)
    return;
  forget_step_streams();
  auto staged = std::move(staged_);
  // A stage a live admit took over belongs to that step now: its streams
  // and reservations are the live step's to commit or roll back.
  if (staged->admitted)
    return;
  for (const auto& [rid, label] : staged->marked) {
    if (auto* st = find_stream(rid, label))
      st->step_in_flight = false;
  }
  // Leave no trace (reference §1.12): the pages the stage reserved go back
  // to the front of the free queue in their order, and the streams it
  // invented (fork targets, fresh labels) go, so the next admit takes
  // exactly the pages it would have taken had nothing been staged (the
  // overlap checker compares page ids with sync mode's).
  undo(staged->record);
}

void kv_pool::apply_forks(const kv_step& step, const step_context& ctx, bool post) {
  const auto& forks = post ? step.post_forks : step.pre_forks;
  if (forks.empty())
    return;
  const std::int64_t ps = config_.geometry.page_size;
  for (const auto& seg : step.segments) {
    if (ctx.capture || ctx.is_padding_row(seg.rid) || !fork_applies(step, seg.rid))
      continue;
    for (const auto& [from, to] : forks) {
      if (from != seg.label)
        continue;
      const stream_state* src = find_stream(seg.rid, from);
      stream_state* tgt = find_stream(seg.rid, to);
      if (src == nullptr || tgt == nullptr)
        continue;
      const std::int64_t n = src->stored_len;
      if (static_cast<std::int64_t>(tgt->pages.size()) < pages_for(n))
        continue;  // admit reserves these
      const auto full = static_cast<std::size_t>(n / ps);
      std::vector<std::int32_t> s(src->pages.begin(), src->pages.begin() + static_cast<long>(full));
      std::vector<std::int32_t> d(tgt->pages.begin(), tgt->pages.begin() + static_cast<long>(full));
      storage_->copy_pages(config_.geometry, s, d);
      if (n % ps != 0) {
        storage_->copy_slots(config_.geometry, src->pages[full], tgt->pages[full],
                             static_cast<std::size_t>(n % ps));
      }
      tgt->stored_len = n;
      tgt->released = src->released;
      tgt->protected_prefix = src->protected_prefix;
      ++tgt->generation;
      ++tgt->reset_generation;
    }
  }
}

}  // namespace mstar::resources
