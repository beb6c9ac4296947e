// kv_pool: construction, admit / rollback / commit, request lifecycle.
// Plans live in kv_pool_plan.cpp, prefix reuse and retention in
// kv_pool_prefix.cpp.
#include "resources/kv/kv_pool.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "resources/kv/kv_pool_state.hpp"

namespace mstar::resources {
namespace {

const kv_step* as_kv_step(const resource_step& step) {
  return dynamic_cast<const kv_step*>(&step);
}

bool fork_applies(const kv_step& step, const request_id& rid) {
  return !step.fork_rids ||
         std::find(step.fork_rids->begin(), step.fork_rids->end(), rid) != step.fork_rids->end();
}

}  // namespace

result<std::unique_ptr<kv_pool>> kv_pool::make(std::string key, kv_pool_config config,
                                               std::string model_fingerprint,
                                               const kernels::arena_factory& memory) {
  if (auto ok = config.validate(); !ok)
    return ok.error().with_context("kv pool '" + key + "'");
  auto storage = kernels::make_arena(memory, static_cast<std::size_t>(config.total_bytes()));
  if (!storage)
    return storage.error().with_context("kv pool '" + key + "'");
  return std::unique_ptr<kv_pool>(new kv_pool(std::move(key), std::move(config),
                                              std::move(model_fingerprint), std::move(*storage)));
}

kv_pool::kv_pool(std::string key, kv_pool_config config, std::string model_fingerprint,
                 std::unique_ptr<kernels::arena> storage)
    : key_(std::move(key)),
      config_(std::move(config)),
      storage_(std::move(storage)),
      arena_(static_cast<std::int32_t>(config_.max_num_pages)) {
  // The root folds every constant that changes what a page's bytes mean.
  const kernels::kv_geometry& g = config_.geometry;
  root_ = fingerprint("mstar-kv-pool/1", "page_major", g.page_size, g.num_layers, g.num_kv_heads,
                      g.head_dim, std::string{to_string(g.dtype)}, model_fingerprint,
                      config_.prefix_cache_salt);
  if (config_.prefix_cache && (!model_fingerprint.empty() || !config_.prefix_cache_salt.empty())) {
    index_ = std::make_unique<prefix_index>(arena_);
  }
}

kv_pool::~kv_pool() = default;

kv_pool::stream_state* kv_pool::find_stream(const request_id& rid, const std::string& label) {
  const auto it = requests_.find(rid);
  if (it == requests_.end())
    return nullptr;
  const auto s = it->second->streams.find(label);
  return s == it->second->streams.end() ? nullptr : &s->second;
}

const kv_pool::stream_state* kv_pool::find_stream(const request_id& rid,
                                                  const std::string& label) const {
  return const_cast<kv_pool*>(this)->find_stream(rid, label);
}

kv_pool::stream_state& kv_pool::stream_for(const request_id& rid, const std::string& label,
                                           bool* created) {
  auto& req = requests_[rid];
  if (!req)
    req = std::make_unique<request_state>();
  auto [it, inserted] = req->streams.try_emplace(label);
  if (created != nullptr)
    *created = inserted;
  if (inserted && index_ && req->prefix_cache) {
    if (const auto seed = req->seeds.find(label); seed != req->seeds.end()) {
      it->second.chain = make_chain(seed->second);
    }
  }
  return it->second;
}

admit_outcome kv_pool::admit(const resource_step& step, step_context& ctx) {
  const kv_step* s = as_kv_step(step);
  if (s == nullptr) {
    return admit_outcome::refused(admit_runtime_error{"kv pool '" + key_ + "' got a non-KV step"});
  }
  if (staged_ && !ctx.is_preplan) {
    if (staged_->segments == s->segments && staged_->padding_rows == ctx.padding_rows) {
      unwind_ = staged_->record;  // the staged reservations are this step's
      staged_->admitted = true;
      return admit_outcome::admitted();
    }
    clear_preplan();
  }
  if (staged_ && ctx.is_preplan) {
    return admit_outcome::refused(admit_runtime_error{"a pre-plan is already pending"});
  }
  std::vector<alloc_record> record;
  auto outcome = admit_impl(*s, ctx, record);
  if (!outcome.ok) {
    undo(record);
    return outcome;
  }
  std::vector<std::pair<request_id, std::string>> marked;
  for (std::size_t i = 0; i < s->segments.size(); ++i) {
    if (auto* st = step_stream(*s, ctx, i)) {
      st->step_in_flight = true;
      if (ctx.is_preplan)
        marked.emplace_back(s->segments[i].rid, s->segments[i].label);
    }
  }
  if (ctx.is_preplan) {
    // The running step's unwind record stays untouched: staging may happen
    // before that step commits.
    staged_ = std::make_unique<staged_preplan>();
    staged_->segments = s->segments;
    staged_->padding_rows = ctx.padding_rows;
    staged_->record = std::move(record);
    staged_->marked = std::move(marked);
  } else {
    unwind_.swap(record);
  }
  return outcome;
}

std::string kv_pool::check_retention(const kv_step& step) const {
  for (const auto& [key, policy] : step.retention) {
    const stream_state* st = find_stream(key.first, key.second);
    std::int64_t grown = st != nullptr ? st->stored_len : 0;
    // A lease on cached pages becomes the stream's first pages at this
    // admit (convert_lease): they count as held.
    if (st != nullptr && !st->lease.empty() && st->pages.empty() && st->stored_len == 0)
      grown = static_cast<std::int64_t>(st->lease.size()) * config_.geometry.page_size;
    if (st != nullptr && st->end_lease && st->pages.empty() && st->stored_len == 0)
      grown = st->end_lease->tokens;
    for (const auto& seg : step.segments) {
      if (seg.rid == key.first && seg.label == key.second && step.commit)
        grown += seg.span;
    }
    if (policy.protected_prefix > grown) {
      return fmt::format(
          "retention for {}/{} protects {} tokens but the stream will hold {} "
          "after this commit",
          key.first, key.second, policy.protected_prefix, grown);
    }
    if (st != nullptr && st->protected_prefix != 0 &&
        st->protected_prefix != policy.protected_prefix) {
      return fmt::format("{}/{} already protects {} tokens; a policy may not change it to {}",
                         key.first, key.second, st->protected_prefix, policy.protected_prefix);
    }
  }
  return {};
}

admit_outcome kv_pool::admit_impl(const kv_step& step, const step_context& ctx,
                                  std::vector<alloc_record>& record) {
  // A step whose commit would be refused is refused now, before it holds
  // anything: commit never fails on what the caller declared.
  if (!step.retention.empty()) {
    if (auto bad = check_retention(step); !bad.empty()) {
      return admit_outcome::refused(admit_runtime_error{std::move(bad)});
    }
  }
  ++step_epoch_;
  forget_step_streams();
  // Lengths each stream must hold by the end of this step, in first-seen
  // order so allocation (and with it the free list) is deterministic. The
  // list is scratch kept across steps: no allocation on the decode path.
  auto& needs = scratch_needs_;
  needs.clear();
  auto need = [&](stream_state& st, const request_id& rid, const std::string& label,
                  std::int64_t len) {
    if (st.need_epoch != step_epoch_) {
      st.need_epoch = step_epoch_;
      st.need_index = needs.size();
      needs.push_back({&st, len, &rid, &label});
    } else {
      needs[st.need_index].len = std::max(needs[st.need_index].len, len);
    }
  };
  auto& streams = step_streams_;
  streams.assign(step.segments.size(), nullptr);
  // Segments first: convert leases, then the stream's own growth.
  for (std::size_t i = 0; i < step.segments.size(); ++i) {
    const segment& seg = step.segments[i];
    if (ctx.capture || ctx.is_padding_row(seg.rid))
      continue;
    if (seg.span < 0) {
      return admit_outcome::refused(admit_runtime_error{
          fmt::format("segment {}/{} has a negative span {}", seg.rid, seg.label, seg.span)});
    }
    bool created = false;
    stream_state& st = stream_for(seg.rid, seg.label, &created);
    if (created)
      record.push_back({seg.rid, seg.label, {}, true});
    if (st.seen_epoch == step_epoch_) {
      return admit_outcome::refused(admit_runtime_error{
          fmt::format("stream {}/{} appears twice in one step", seg.rid, seg.label)});
    }
    st.seen_epoch = step_epoch_;
    streams[i] = &st;
    // An importing stream's bytes have not landed; an exported one's pages
    // are published and must not change.
    if (st.importing || (st.exported && seg.span > 0)) {
      return admit_outcome::refused(admit_runtime_error{
          fmt::format("stream {}/{} is {}", seg.rid, seg.label,
                      st.importing ? "importing (finish_import or abort_import first)"
                                   : "exported (release_export or remove the request first)")});
    }
    if ((!st.lease.empty() || st.end_lease) && st.pages.empty() && st.stored_len == 0)
      convert_lease(st);
    // A non-committing step still writes its span for the kernels to attend.
    if (seg.span > 0)
      need(st, seg.rid, seg.label, st.stored_len + seg.span);
  }
  // Forks: targets sized to the source as it will be when the copy runs.
  if (!step.pre_forks.empty() || !step.post_forks.empty()) {
    for (std::size_t i = 0; i < step.segments.size(); ++i) {
      const segment& seg = step.segments[i];
      if (streams[i] == nullptr || !fork_applies(step, seg.rid))
        continue;
      for (const bool post : {false, true}) {
        for (const auto& [from, to] : post ? step.post_forks : step.pre_forks) {
          if (from != seg.label)
            continue;
          std::int64_t len = streams[i]->stored_len + (post && step.commit ? seg.span : 0);
          bool created = false;
          stream_state& tgt = stream_for(seg.rid, to, &created);
          if (created)
            record.push_back({seg.rid, to, {}, true});
          if (tgt.importing || tgt.exported) {
            return admit_outcome::refused(admit_runtime_error{
                fmt::format("fork target {}/{} is importing or exported", seg.rid, to)});
          }
          // A pre-fork target written in this step grows past the copy.
          if (!post) {
            for (const auto& other : step.segments) {
              if (other.rid == seg.rid && other.label == to)
                len += other.span;
            }
          }
          need(tgt, seg.rid, to, len);
        }
      }
    }
  }
  // Pages short across the whole step; evict cached pages only when that
  // makes the step fit, so a refusal never costs the cache anything.
  std::int64_t total = 0;
  for (const auto& n : needs) {
    total +=
        std::max<std::int64_t>(0, pages_for(n.len) - static_cast<std::int64_t>(n.st->pages.size()));
  }
  if (total > arena_.num_free() && index_) {
    const std::int64_t shortfall = total - arena_.num_free();
    if (index_->evictable() >= shortfall)
      (void)index_->evict(static_cast<std::int32_t>(shortfall));
  }
  if (total > arena_.num_free()) {
    const request_id rid = needs.empty() ? request_id{} : *needs.front().rid;
    const std::string label = needs.empty() ? std::string{} : *needs.front().label;
    return admit_outcome::refused(allocation_failed{
        fmt::format("kv pool '{}' needs {} more pages for this step but has {} free", key_, total,
                    arena_.num_free()),
        total - arena_.num_free(), label, rid});
  }
  for (const auto& n : needs) {
    const std::int64_t more = pages_for(n.len) - static_cast<std::int64_t>(n.st->pages.size());
    if (more <= 0)
      continue;
    alloc_record rec{*n.rid, *n.label, {}, false};
    const bool ok = arena_.try_allocate(static_cast<std::int32_t>(more), rec.pages);
    (void)ok;  // counted above: cannot fail
    n.st->pages.insert(n.st->pages.end(), rec.pages.begin(), rec.pages.end());
    record.push_back(std::move(rec));
  }
  streams_step_ = &step;
  return admit_outcome::admitted();
}

kv_pool::stream_state* kv_pool::step_stream(const kv_step& step, const step_context& ctx,
                                            std::size_t i) {
  if (streams_step_ != &step || step_streams_.size() != step.segments.size()) {
    // Another step object (a promoted pre-plan, say): look the streams up once.
    step_streams_.assign(step.segments.size(), nullptr);
    for (std::size_t j = 0; j < step.segments.size(); ++j) {
      const segment& seg = step.segments[j];
      if (ctx.capture || ctx.is_padding_row(seg.rid))
        continue;
      step_streams_[j] = find_stream(seg.rid, seg.label);
    }
    streams_step_ = &step;
  }
  return step_streams_[i];
}

void kv_pool::undo(std::vector<alloc_record>& record) {
  forget_step_streams();
  for (auto it = record.rbegin(); it != record.rend(); ++it) {
    stream_state* st = find_stream(it->rid, it->label);
    if (st == nullptr)
      continue;
    if (!it->pages.empty()) {
      // Only an untouched tail can be handed back exactly.
      const auto n = it->pages.size();
      if (st->pages.size() >= n &&
          std::equal(it->pages.begin(), it->pages.end(), st->pages.end() - static_cast<long>(n))) {
        st->pages.resize(st->pages.size() - n);
        arena_.unallocate(it->pages);
        ++st->generation;
      }
    }
    if (it->created_stream && st->pages.empty() && st->lease.empty() && !st->end_lease &&
        st->stored_len == 0) {
      auto& req = *requests_.at(it->rid);
      req.streams.erase(it->label);
    }
  }
  record.clear();
}

void kv_pool::rollback_admit(const resource_step& step, step_context& ctx) {
  if (ctx.is_preplan) {
    // A refused pre-admit drops the stage only; the running step keeps its
    // reservations.
    if (staged_) {
      for (const auto& [rid, label] : staged_->marked) {
        if (auto* st = find_stream(rid, label))
          st->step_in_flight = false;
      }
      auto staged = std::move(staged_);
      undo(staged->record);
    }
    return;
  }
  if (const kv_step* s = as_kv_step(step)) {
    for (const auto& seg : s->segments) {
      if (ctx.is_padding_row(seg.rid))
        continue;
      if (auto* st = find_stream(seg.rid, seg.label))
        st->step_in_flight = false;
    }
  }
  staged_.reset();
  undo(unwind_);
}

void kv_pool::rollback_rows(const resource_step& step, step_context& ctx,
                            const std::set<request_id>& rows) {
  if (const kv_step* s = as_kv_step(step)) {
    for (const auto& seg : s->segments) {
      if (!rows.contains(seg.rid) || ctx.is_padding_row(seg.rid))
        continue;
      if (auto* st = find_stream(seg.rid, seg.label))
        st->step_in_flight = false;
    }
  }
  // The rows' fresh pages, newest first; the other rows keep theirs (and
  // their records, should the whole step still roll back).
  std::vector<alloc_record> theirs;
  std::vector<alloc_record> kept;
  for (auto& r : unwind_)
    (rows.contains(r.rid) ? theirs : kept).push_back(std::move(r));
  unwind_ = std::move(kept);
  undo(theirs);
  ctx.padding_rows.insert(rows.begin(), rows.end());
}

result<void> kv_pool::commit(const resource_step& step, step_context& ctx) {
  const kv_step* s = as_kv_step(step);
  if (s == nullptr)
    return make_error(errc::invalid_argument, "kv pool got a non-KV step");
  // Validated at admit too; checked again before anything changes.
  if (auto bad = check_retention(*s); !bad.empty())
    return make_error(errc::invalid_argument, bad);
  for (std::size_t i = 0; i < s->segments.size(); ++i) {
    const segment& seg = s->segments[i];
    stream_state* st = step_stream(*s, ctx, i);
    if (st == nullptr)
      continue;
    st->step_in_flight = false;
    if (!s->commit || seg.span == 0)
      continue;
    st->stored_len += seg.span;
    st->converted = false;
    ++st->generation;
    // The policy rides on the step, not the stream: a commit that declares
    // none releases nothing.
    const auto policy =
        s->retention.empty() ? s->retention.end() : s->retention.find({seg.rid, seg.label});
    if (policy != s->retention.end()) {
      st->retention = policy->second;
      st->protected_prefix = policy->second.protected_prefix;
    }
    index_pages(seg.rid, seg.label, *st);
    if (policy != s->retention.end()) {
      const std::int64_t excess =
          st->stored_len - st->protected_prefix - policy->second.context_budget;
      if (excess > 0)
        (void)release_front(*st, excess);
    }
  }
  apply_forks(*s, ctx, /*post=*/true);
  unwind_.clear();
  forget_step_streams();
  return {};
}

void kv_pool::ingest_request(const request_id& rid) {
  ingest_request(rid, {}, true);
}

void kv_pool::ingest_request(const request_id& rid, std::map<std::string, kv_prefix_seed> seeds,
                             bool prefix_cache) {
  auto& req = requests_[rid];
  if (req)
    return;  // idempotent: one ingest per partition of a request
  req = std::make_unique<request_state>();
  req->seeds = std::move(seeds);
  req->prefix_cache = prefix_cache;
}

void kv_pool::free_stream(stream_state& st) {
  for (const page_id p : st.pages)
    arena_.release(p);
  for (const page_id p : st.lease)
    arena_.release(p);
  st.pages.clear();
  st.lease.clear();
  release_end_lease(st);
  drop_import_ends(st, /*exact=*/false);
}

void kv_pool::purge_records(const request_id& rid) {
  forget_step_streams();
  if (staged_) {
    const bool staged_has_rid = std::any_of(staged_->segments.begin(), staged_->segments.end(),
                                            [&](const segment& s) { return s.rid == rid; });
    if (staged_has_rid)
      clear_preplan();
  }
  std::erase_if(unwind_, [&](const alloc_record& r) { return r.rid == rid; });
  std::erase_if(imports_, [&](const alloc_record& r) { return r.rid == rid; });
}

void kv_pool::remove_request(const request_id& rid) {
  const auto it = requests_.find(rid);
  if (it == requests_.end())
    return;
  purge_records(rid);
  for (auto& [label, st] : it->second->streams)
    free_stream(st);
  requests_.erase(it);
}

void kv_pool::reset_request(const request_id& rid, bool free) {
  const auto it = requests_.find(rid);
  if (it == requests_.end())
    return;
  purge_records(rid);
  auto& req = *it->second;
  for (auto& [label, st] : req.streams) {
    if (free)
      free_stream(st);
    st.stored_len = 0;
    st.released = 0;
    st.protected_prefix = 0;
    st.retention.reset();
    st.step_in_flight = false;
    st.converted = false;
    st.importing = false;
    st.adopted.clear();
    drop_import_ends(st, /*exact=*/false);  // an import cut short indexes nothing
    if (free)
      st.exported = false;  // kept pages stay published until release_export
    ++st.generation;
    ++st.reset_generation;
    st.chain.reset();
    if (index_ && req.prefix_cache) {
      if (const auto seed = req.seeds.find(label); seed != req.seeds.end()) {
        st.chain = make_chain(seed->second);
      }
    }
  }
}

}  // namespace mstar::resources
