#include "engine/scheduler.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "engine/sampler.hpp"
#include "resources/windowing/window_schedule.hpp"

namespace mstar::engine {

/// One of a request's `n` samples: its tokens and where it stands.
struct scheduler::sequence {
  request_id rid;
  request_entry* req = nullptr;
  std::int32_t index = 0;
  std::vector<token_id> tokens;  ///< prompt, then output
  std::size_t prompt_len = 0;
  std::int64_t computed = 0;    ///< tokens the pools hold for it
  std::int64_t cached = -1;     ///< prompt tokens from cache at the first admission (-1: unknown)
  bool registered = false;      ///< known to the pools (holds a lease, a slot or pages)
  bool awaiting_cache = false;  ///< registered, its cached prefix not yet known
  bool running = false;
  bool finished = false;
  std::uint64_t arrival = 0;
  std::uint64_t seed = 0;  ///< the request's seed, mixed with `index` so samples differ
  text_stream text;
  std::unordered_map<token_id, std::int32_t> counts;  ///< output ids, for penalties
  bool first_token_seen = false;
  /// Windowed generation: the request's schedule over its output, and the
  /// retention a window's last commit declares.
  std::optional<resources::window_schedule> window;
  std::optional<resources::retention_policy> retention;
  std::int64_t tokens_per_unit = 1;
  std::int64_t kv_pages_peak = 0;
  /// Item ends inside pages where prefill chunks end (`set_item_ends`).
  std::vector<std::int64_t> item_ends;
  /// `speculate`'s scratch: this sequence's row in the last step (-1: none).
  mutable std::int32_t last_row = -1;

  sequence(const models::tokenizer* tok, std::vector<std::string> stops)
      : text(tok, std::move(stops)) {}
  [[nodiscard]] std::size_t output_len() const noexcept { return tokens.size() - prompt_len; }
};

struct scheduler::request_entry {
  request_spec spec;
  std::vector<std::unique_ptr<sequence>> seqs;
  clock::time_point arrived;
  bool cancelled = false;
  std::int32_t unfinished = 0;
};

std::string_view to_string(schedule_mode m) noexcept {
  return m == schedule_mode::sync ? "sync" : "overlap";
}

result<schedule_mode> parse_schedule_mode(std::string_view name) {
  if (name == "sync")
    return schedule_mode::sync;
  if (name == "overlap")
    return schedule_mode::overlap;
  return make_error(errc::invalid_argument,
                    fmt::format("schedule '{}' is not one of sync, overlap", name));
}

namespace {

struct windowing {
  resources::window_schedule schedule;
  std::optional<resources::retention_policy> retention;
};

// The window schedule over a request's output (max_tokens, in units rounded
// up) and the retention its windows declare; the schedule's own errors.
result<windowing> window_of(const request_spec& spec) {
  const auto& w = *spec.window;
  if (w.tokens_per_unit < 1)
    return make_error(errc::invalid_argument, "tokens_per_unit must be >= 1");
  const std::int64_t tokens = std::max<std::int64_t>(spec.stop.max_tokens, 1);
  auto schedule =
      resources::window_schedule::make((tokens + w.tokens_per_unit - 1) / w.tokens_per_unit,
                                       w.window_units, w.context_units, w.overlap_units);
  if (!schedule)
    return schedule.error();
  auto retention =
      schedule->retention(w.tokens_per_unit, static_cast<std::int64_t>(spec.prompt.size()));
  if (!retention)
    return retention.error();
  return windowing{*schedule, *retention};
}

}  // namespace

namespace {

/// Cuts a windowed sequence's chunk from `computed` (tokens its pools hold)
/// at the next window end behind the prompt; the row that reaches it
/// declares the retention. Nothing is cut when nothing is ever released.
std::optional<resources::retention_policy> cut_at_window(const scheduler::sequence& s,
                                                         std::int64_t computed,
                                                         std::int64_t& chunk) {
  if (!s.retention)
    return std::nullopt;
  const auto& w = *s.window;
  const std::int64_t t = s.tokens_per_unit;
  const std::int64_t done = computed - static_cast<std::int64_t>(s.prompt_len);  // output committed
  const std::int64_t first = w.window_units() * t;
  const std::int64_t last = w.total_units() * t;
  if (done >= last)
    return std::nullopt;
  // Window i ends at min(window + i * stride, total) units of output.
  std::int64_t end = first;
  if (done >= first)
    end = first + ((done - first) / (w.stride() * t) + 1) * w.stride() * t;
  end = std::min(end, last);
  const std::int64_t to_end = end - done;
  if (chunk < to_end)
    return std::nullopt;
  chunk = to_end;
  return s.retention;
}

// Ends a prefill chunk from `computed` at the next checkpoint boundary (a
// multiple of `stride`), so the recurrent pool sees the state there at the
// chunk's commit. One-token rows never cross one.
void cut_at_checkpoint(std::int64_t stride, std::int64_t computed, std::int64_t& chunk) {
  if (stride <= 0 || chunk <= 1)
    return;
  const std::int64_t next = (computed / stride + 1) * stride;
  chunk = std::min(chunk, next - computed);
}

// Ends a prefill chunk from `computed` at the next item end (an image ending
// inside a page), so the recurrent pool sees the state there too.
void cut_at_item_end(std::span<const std::int64_t> ends, std::int64_t computed,
                     std::int64_t& chunk) {
  if (chunk <= 1)
    return;
  const auto next = std::upper_bound(ends.begin(), ends.end(), computed);
  if (next != ends.end())
    chunk = std::min(chunk, *next - computed);
}

}  // namespace

scheduler::scheduler(scheduler_config config, model_facts facts)
    : config_(config), facts_(std::move(facts)) {}

scheduler::~scheduler() = default;

std::size_t scheduler::num_running() const noexcept {
  return running_.size();
}

result<void> scheduler::validate(const request_spec& spec) const {
  auto bad = [&](std::string what) {
    return make_error(errc::invalid_argument, fmt::format("request {}: {}", spec.id, what));
  };
  if (spec.prompt.empty())
    return bad("the prompt is empty");
  for (const auto id : spec.prompt) {
    if (static_cast<std::int64_t>(id) >= facts_.vocab_size) {
      return make_error(errc::out_of_range,
                        fmt::format("request {}: token id {} is outside the vocabulary of {}",
                                    spec.id, id, facts_.vocab_size));
    }
  }
  const auto& p = spec.sampling;
  if (!(p.temperature >= 0.0F) || p.temperature > 100.0F)
    return bad("temperature must be in [0, 100]");
  if (p.top_k < 0)
    return bad("top_k must be >= 0");
  if (!(p.top_p > 0.0F && p.top_p <= 1.0F))
    return bad("top_p must be in (0, 1]");
  if (!(p.repetition_penalty > 0.0F))
    return bad("repetition_penalty must be > 0");
  if (!(p.presence_penalty >= -2.0F && p.presence_penalty <= 2.0F))
    return bad("presence_penalty must be in [-2, 2]");
  if (!(p.frequency_penalty >= -2.0F && p.frequency_penalty <= 2.0F))
    return bad("frequency_penalty must be in [-2, 2]");
  if (p.n < 1 || p.n > 128)
    return bad("n must be in [1, 128]");
  if (p.logprobs < 0 || p.logprobs > 20)
    return bad("logprobs must be in [0, 20]");
  if (spec.stop.max_tokens < 0)
    return bad("max_tokens must be >= 0");
  for (const auto id : spec.generated) {
    if (static_cast<std::int64_t>(id) >= facts_.vocab_size) {
      return make_error(errc::out_of_range,
                        fmt::format("request {}: generated token id {} is outside the vocabulary "
                                    "of {}",
                                    spec.id, id, facts_.vocab_size));
    }
  }
  if (!spec.generated.empty() && spec.sampling.n != 1)
    return bad("a request resumed with generated tokens must have n = 1");
  if (static_cast<std::int64_t>(spec.generated.size()) >= spec.stop.max_tokens &&
      !spec.generated.empty()) {
    return bad(fmt::format("{} generated tokens already reach max_tokens {}", spec.generated.size(),
                           spec.stop.max_tokens));
  }
  if (!spec.stop.stop_strings.empty() && facts_.tok == nullptr) {
    return bad("stop strings need a tokenizer, and this model has none");
  }
  if (spec.window && !facts_.windows) {
    return bad(
        "windowed generation is not supported by this model (its rotary positions come from "
        "the cached pages, which a window releases)");
  }
  if (spec.window) {
    if (auto w = window_of(spec); !w)
      return bad(fmt::format("window: {}", w.error().message()));
  }
  if (spec.prefix && !spec.cache_salt.empty()) {
    return bad(
        "cache_salt cannot be combined with a front end's prefix keys (the front end "
        "keys the salt in)");
  }
  if (live_.contains(spec.id))
    return bad("a request with this id is already running");
  return {};
}

std::vector<request_id> scheduler::sequence_ids(const request_spec& spec) {
  std::vector<request_id> ids{spec.id};
  for (std::int32_t i = 1; i < spec.sampling.n; ++i)
    ids.push_back(fmt::format("{}#{}", spec.id, i));
  return ids;
}

result<void> scheduler::add(request_spec spec) {
  if (auto ok = validate(spec); !ok)
    return ok;
  std::optional<windowing> windows;
  if (spec.window) {
    auto w = window_of(spec);
    if (!w)
      return w.error();
    windows = std::move(*w);
  }
  auto entry = std::make_unique<request_entry>();
  entry->arrived = clock::now();
  const auto ids = sequence_ids(spec);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto s = std::make_unique<sequence>(facts_.tok, spec.stop.stop_strings);
    s->rid = ids[i];
    s->req = entry.get();
    s->index = static_cast<std::int32_t>(i);
    s->tokens = spec.prompt;
    s->prompt_len = spec.prompt.size();
    if (!spec.generated.empty()) {
      // Resumed: the output so far primes the counts and the text stream
      // (what it releases was streamed by the node that drew it).
      s->tokens.insert(s->tokens.end(), spec.generated.begin(), spec.generated.end());
      for (const auto id : spec.generated)
        ++s->counts[id];
      (void)s->text.push(spec.generated);
      s->first_token_seen = true;
    }
    if (windows) {
      s->window = windows->schedule;
      s->retention = windows->retention;
      s->tokens_per_unit = spec.window->tokens_per_unit;
    }
    s->arrival = arrivals_++;
    s->seed = spec.sampling.seed + 0x9E3779B97F4A7C15ULL * i;
    by_rid_[s->rid] = s.get();
    waiting_.push_back(s.get());
    entry->seqs.push_back(std::move(s));
  }
  entry->unfinished = static_cast<std::int32_t>(ids.size());
  entry->spec = std::move(spec);
  const auto id = entry->spec.id;
  live_.emplace(id, std::move(entry));
  return {};
}

void scheduler::set_cached(const request_id& rid, std::int64_t tokens) {
  auto* s = find(rid);
  if (s == nullptr)
    return;
  // At least one token runs, so the step that completes the prompt has logits.
  const auto limit = static_cast<std::int64_t>(s->tokens.size()) - 1;
  s->computed = std::clamp<std::int64_t>(tokens, 0, limit);
  if (s->cached < 0)
    s->cached = std::min<std::int64_t>(s->computed, static_cast<std::int64_t>(s->prompt_len));
  s->awaiting_cache = false;
}

void scheduler::set_item_ends(const request_id& rid, std::vector<std::int64_t> slots) {
  auto* s = find(rid);
  if (s == nullptr || facts_.checkpoint_stride <= 0)
    return;
  std::sort(slots.begin(), slots.end());
  s->item_ends = std::move(slots);
}

pool_actions scheduler::admissions() {
  pool_actions actions;
  if (hold_admissions_)
    return actions;
  std::size_t room =
      static_cast<std::size_t>(config_.max_running) -
      std::min<std::size_t>(running_.size(), static_cast<std::size_t>(config_.max_running));
  for (auto* s : waiting_) {
    if (room-- == 0)
      break;
    if (s->registered)
      continue;
    s->registered = true;
    s->awaiting_cache = true;
    const auto& spec = s->req->spec;
    const bool prompt_only = s->tokens.size() == spec.prompt.size();
    actions.registrations.push_back({s->rid, s->tokens, spec.cache_salt,
                                     spec.prefix && prompt_only ? &*spec.prefix : nullptr,
                                     spec.prompt, spec.images});
  }
  return actions;
}

bool scheduler::cancel(const request_id& id) {
  const auto it = live_.find(id);
  if (it == live_.end())
    return false;
  if (!it->second->cancelled) {
    it->second->cancelled = true;
    ++cancelled_live_;
  }
  return true;
}

scheduler::sequence* scheduler::find(const request_id& rid) {
  const auto it = by_rid_.find(rid);
  return it == by_rid_.end() ? nullptr : it->second;
}

scheduled_step scheduler::schedule() {
  // Cancellations take effect here, at a step boundary.
  std::vector<request_entry*> cancelled;
  if (cancelled_live_ > 0) {
    for (auto& [id, e] : live_) {
      if (e->cancelled)
        cancelled.push_back(e.get());
    }
  }
  for (auto* e : cancelled) {
    std::vector<sequence*> seqs;
    for (auto& s : e->seqs) {
      if (!s->finished)
        seqs.push_back(s.get());
    }
    for (auto* s : seqs)
      finish(*s, finish_reason::cancelled, {}, pending_);
  }
  started_.clear();
  rows_.clear();
  last_chunks_.clear();
  if (running_.empty())
    hold_admissions_ = false;  // nothing left to make room for
  scheduled_step step;
  step.serial = ++serial_;
  std::int64_t budget = config_.max_batched_tokens;
  auto add_row = [&](sequence& s, std::int64_t chunk) {
    cut_at_checkpoint(facts_.checkpoint_stride, s.computed, chunk);
    cut_at_item_end(s.item_ends, s.computed, chunk);
    auto retention = cut_at_window(s, s.computed, chunk);
    const auto from = static_cast<std::ptrdiff_t>(s.computed);
    scheduled_row row{s.rid,
                      {s.tokens.begin() + from, s.tokens.begin() + from + chunk},
                      false,
                      std::move(retention)};
    row.samples = s.computed + chunk == static_cast<std::int64_t>(s.tokens.size());
    budget -= chunk;
    step.rows.push_back(std::move(row));
    rows_.push_back(&s);
    last_chunks_.push_back(chunk);
  };
  // Decode rows first, then the running sequences' next prefill chunks.
  for (auto* s : running_) {
    if (budget > 0 && s->computed + 1 == static_cast<std::int64_t>(s->tokens.size()))
      add_row(*s, 1);
  }
  for (auto* s : running_) {
    const auto remaining = static_cast<std::int64_t>(s->tokens.size()) - s->computed;
    if (budget > 0 && remaining > 1)
      add_row(*s, std::min(remaining, budget));
  }
  // Then newcomers, first come first served, while they fit.
  while (!hold_admissions_ && budget > 0 && !waiting_.empty() &&
         running_.size() < static_cast<std::size_t>(config_.max_running)) {
    sequence* s = waiting_.front();
    if (!s->registered || s->awaiting_cache)
      break;
    waiting_.pop_front();
    if (s->output_len() >= static_cast<std::size_t>(s->req->spec.stop.max_tokens)) {
      finish(*s, finish_reason::length, {}, pending_);
      continue;
    }
    s->running = true;
    running_.insert(std::upper_bound(running_.begin(), running_.end(), s,
                                     [](const sequence* a, const sequence* b) {
                                       return a->arrival < b->arrival;
                                     }),
                    s);
    started_.push_back(s);
    add_row(*s, std::min(static_cast<std::int64_t>(s->tokens.size()) - s->computed, budget));
  }
  // How the rows draw: on the device unless one needs the logits here.
  for (std::size_t r = 0; r < step.rows.size(); ++r) {
    const auto& row = step.rows[r];
    const auto* s = rows_[r];
    const auto& spec = s->req->spec;
    if (row.samples && (spec.sampling.needs_logits() || spec.keep_logits))
      step.want_logits = true;
    const auto& p = spec.sampling;
    step.draws.push_back({p.temperature, p.top_k, p.top_p, s->seed, s->output_len()});
  }
  if (step.want_logits)
    step.draws.clear();
  return step;
}

step_result scheduler::take_pending() {
  return std::exchange(pending_, {});
}

scheduled_step scheduler::speculate() const {
  scheduled_step next;
  if (!waiting_.empty() || rows_.empty())
    return next;
  if (cancelled_live_ > 0)
    return next;
  // Each sequence as it will stand once the last step lands (this runs
  // between `schedule` and `on_ran`): computed advances by the row's chunk;
  // a sampling row adds its draw and may reach max_tokens.
  struct predicted {
    std::int64_t computed = 0, len = 0;
    bool ends = false;
  };
  // By row of the last step; each sequence finds its row through its
  // scratch index (no map: this runs every step, for every row).
  std::vector<predicted> after(rows_.size());
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    const sequence* s = rows_[r];
    if (s == nullptr)
      continue;  // ended while its step ran ahead (`adopt`)
    predicted& p = after[r];
    p = {s->computed + last_chunks_[r], static_cast<std::int64_t>(s->tokens.size()), false};
    if (p.computed == p.len) {
      p.len += 1;
      p.ends = static_cast<std::int64_t>(s->output_len()) + 1 >= s->req->spec.stop.max_tokens;
    }
    s->last_row = static_cast<std::int32_t>(r);
  }
  auto state = [&](const sequence* s) {
    return s->last_row >= 0 ? after[static_cast<std::size_t>(s->last_row)]
                            : predicted{s->computed, static_cast<std::int64_t>(s->tokens.size())};
  };
  // The same order and budget as `schedule`: decode rows, then chunks.
  next.rows.reserve(running_.size());
  std::int64_t budget = config_.max_batched_tokens;
  // How a row draws: its counter counts the draw the running step makes.
  auto draw_of = [&](const sequence* s, const predicted& p) {
    const auto& sp = s->req->spec.sampling;
    const auto drawn = static_cast<std::uint64_t>(p.len) - s->tokens.size();
    return models::row_sampling{sp.temperature, sp.top_k, sp.top_p, s->seed,
                                s->output_len() + drawn};
  };
  auto needs_logits = [](const sequence* s) {
    return s->req->spec.sampling.needs_logits() || s->req->spec.keep_logits;
  };
  for (const auto* s : running_) {
    const auto p = state(s);
    if (!p.ends && p.computed + 1 == p.len) {
      if (budget <= 0) {
        next.unbounded = false;
        continue;
      }
      const auto at = static_cast<std::size_t>(p.computed);
      std::int64_t one = 1;
      auto retention = cut_at_window(*s, p.computed, one);
      next.rows.push_back({s->rid,
                           {at < s->tokens.size() ? s->tokens[at] : placeholder_token},
                           true,
                           std::move(retention)});
      next.draws.push_back(draw_of(s, p));
      next.want_logits = next.want_logits || needs_logits(s);
      budget -= 1;
    }
  }
  for (const auto* s : running_) {
    const auto p = state(s);
    const auto remaining = p.len - p.computed;
    if (!p.ends && remaining > 1) {
      if (budget < remaining)
        next.unbounded = false;
      if (budget <= 0)
        continue;
      auto chunk = std::min(remaining, budget);
      cut_at_checkpoint(facts_.checkpoint_stride, p.computed, chunk);
      cut_at_item_end(s->item_ends, p.computed, chunk);
      auto retention = cut_at_window(*s, p.computed, chunk);
      const auto from = static_cast<std::ptrdiff_t>(p.computed);
      // A chunk feeds known tokens only (the prompt, or output recomputed
      // after a preemption): the draw is always the last token.
      next.rows.push_back({s->rid,
                           {s->tokens.begin() + from, s->tokens.begin() + from + chunk},
                           p.computed + chunk == p.len,
                           std::move(retention)});
      next.draws.push_back(draw_of(s, p));
      next.want_logits = next.want_logits || (next.rows.back().samples && needs_logits(s));
      budget -= chunk;
    }
  }
  if (next.want_logits)
    next.draws.clear();
  for (const sequence* s : rows_) {
    if (s != nullptr)
      s->last_row = -1;
  }
  return next;
}

std::vector<std::int32_t> loopback_rows(const scheduled_step& next, const scheduled_step& running) {
  std::unordered_map<std::string_view, std::int32_t> drawn_at;
  drawn_at.reserve(running.rows.size());
  for (std::size_t j = 0; j < running.rows.size(); ++j) {
    if (running.rows[j].samples)
      drawn_at.emplace(running.rows[j].rid, static_cast<std::int32_t>(j));
  }
  std::vector<std::int32_t> out(next.rows.size(), -1);
  bool loops = false;
  for (std::size_t i = 0; i < next.rows.size(); ++i) {
    const auto it = drawn_at.find(next.rows[i].rid);
    if (it != drawn_at.end() && next.rows[i].tokens.size() == 1) {
      out[i] = it->second;
      loops = true;
    }
  }
  if (!loops)
    out.clear();
  return out;
}

std::set<request_id> overrun_rows(const scheduled_step& next, const step_result& landed) {
  const auto& gone = landed.actions.release;
  std::set<request_id> out;
  for (const auto& row : next.rows) {
    if (std::find(gone.begin(), gone.end(), row.rid) != gone.end())
      out.insert(row.rid);
  }
  return out;
}

result<void> scheduler::adopt(scheduled_step& step) {
  std::vector<sequence*> rows;
  std::vector<std::int64_t> chunks;
  rows.reserve(step.rows.size());
  for (const auto& row : step.rows) {
    sequence* s = find(row.rid);
    if (s != nullptr && !s->running) {
      return make_error(
          errc::invalid_argument,
          fmt::format("the step run ahead has a row for {}, which is not running", row.rid));
    }
    rows.push_back(s);
    chunks.push_back(static_cast<std::int64_t>(row.tokens.size()));
  }
  rows_ = std::move(rows);
  last_chunks_ = std::move(chunks);
  started_.clear();
  step.serial = ++serial_;
  return {};
}

void declare_retention(const scheduled_step& step, models::step_request& request) {
  if (!request.kv)
    return;
  auto& kv = *request.kv;
  for (const auto& row : step.rows) {
    if (!row.retention)
      continue;
    for (const auto& seg : kv.segments) {
      if (seg.rid == row.rid)
        kv.retention.insert_or_assign({seg.rid, seg.label}, *row.retention);
    }
  }
}

void scheduler::note_plans(const scheduled_step& step, const models::step_plans& plans) {
  if (!plans.kv)
    return;
  const bool ours = step.serial == serial_ && rows_.size() == step.rows.size();
  std::vector<std::int64_t> pages(step.rows.size(), 0);
  for (const auto& [label, lp] : plans.kv->labels) {
    for (std::size_t i = 0; i + 1 < lp.kv_indptr.size() && i < lp.rows.size(); ++i) {
      const auto r = static_cast<std::size_t>(lp.rows[i]);
      if (r < pages.size())
        pages[r] += lp.kv_indptr[i + 1] - lp.kv_indptr[i];
    }
  }
  for (std::size_t r = 0; r < step.rows.size(); ++r) {
    sequence* s = ours ? rows_[r] : find(step.rows[r].rid);
    if (s != nullptr)
      s->kv_pages_peak = std::max(s->kv_pages_peak, pages[r]);
  }
}

std::set<request_id> scheduler::cancelled_rows(const scheduled_step& step) const {
  std::set<request_id> out;
  if (cancelled_live_ == 0)
    return out;
  for (const auto& row : step.rows) {
    const auto it = by_rid_.find(row.rid);
    if (it != by_rid_.end() && it->second->req->cancelled)
      out.insert(row.rid);
  }
  return out;
}

void scheduler::preempt(sequence& s, pool_actions& actions) {
  std::erase(running_, &s);
  s.running = false;
  s.computed = 0;
  s.registered = false;  // registered again, with its tokens so far, when it nears the front
  // Back to the front, behind older preempted ones: arrival order.
  waiting_.insert(std::upper_bound(
                      waiting_.begin(), waiting_.end(), &s,
                      [](const sequence* a, const sequence* b) { return a->arrival < b->arrival; }),
                  &s);
  actions.release.push_back(s.rid);
  ++preemptions_;
}

pool_actions scheduler::on_refused(const scheduled_step& step, const std::string& why) {
  pool_actions actions;
  step_result out;
  if (running_.size() <= 1 && step.rows.size() <= 1) {
    // Nothing else holds pool state: this sequence cannot fit even alone.
    if (!running_.empty()) {
      finish(*running_.front(), finish_reason::error,
             fmt::format("does not fit in the pools even alone ({}); give the pools more pages "
                         "or slots",
                         why),
             out);
    }
  } else if (!started_.empty()) {
    // A newcomer goes back to the queue until a step completes, and out of
    // the pools so its lease on cached pages does not squeeze the others.
    sequence* s = started_.back();
    started_.pop_back();
    std::erase(running_, s);
    s->running = false;
    s->registered = false;
    s->computed = 0;
    waiting_.push_front(s);
    actions.release.push_back(s->rid);
    hold_admissions_ = true;
  } else {
    preempt(*running_.back(), actions);
  }
  for (auto& d : out.deltas)
    pending_.deltas.push_back(std::move(d));
  for (auto& r : out.actions.release)
    actions.release.push_back(std::move(r));
  return actions;
}

result<void> scheduler::take_token(sequence& s, const scheduled_row& row, std::size_t r,
                                   const models::forward_output& output, step_result& out) {
  (void)row;
  const auto& spec = s.req->spec;
  // The row's delta is made in place (rows x steps of them: a delta moved
  // into the step's list cost ~10% of a 256-row step); a refusal below
  // takes it out again before anything else is added.
  delta& d = new_delta(s, out);
  const auto refuse = [&out](error why) {
    out.deltas.pop_back();
    return why;
  };
  token_id id = 0;
  if (!output.sampled.empty()) {
    if (output.sampled[r] < 0) {
      return refuse(
          make_error(errc::invalid_argument,
                     "no token can be drawn (sampling settings out of range or no finite logit)"));
    }
    id = static_cast<token_id>(output.sampled[r]);
  } else {
    const auto V = static_cast<std::size_t>(facts_.vocab_size);
    if (output.logits.size() < (r + 1) * V) {
      return refuse(
          make_error(errc::invalid_argument, "the forward returned no logits for the row"));
    }
    std::vector<float> logits(output.logits.begin() + static_cast<std::ptrdiff_t>(r * V),
                              output.logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * V));
    if (spec.keep_logits)
      d.logits.push_back(logits);
    apply_penalties(logits, spec.sampling, s.counts,
                    std::span<const token_id>{s.tokens.data(), s.prompt_len});
    auto settings = spec.sampling;
    settings.seed = s.seed;
    auto drawn = draw(logits, settings, s.output_len());
    if (!drawn)
      return refuse(drawn.error());
    id = drawn->id;
    if (spec.sampling.logprobs > 0) {
      d.chosen_logprobs.push_back(drawn->chosen);
      d.top_logprobs.push_back(std::move(drawn->top));
    }
  }
  s.tokens.push_back(id);
  const auto& p = spec.sampling;
  if (p.presence_penalty != 0.0F || p.frequency_penalty != 0.0F || p.repetition_penalty != 1.0F) {
    ++s.counts[id];  // only penalties read them
  }
  // Keys from a front end key generated pages only when it says so.
  if (facts_.extend_chains && (!spec.prefix || spec.prefix->decode))
    out.extend.emplace_back(s.rid, std::vector<token_id>{id});
  d.tokens.push_back(id);
  if (!s.first_token_seen) {
    s.first_token_seen = true;
    d.time_to_first_token_s = std::chrono::duration<double>(clock::now() - s.req->arrived).count();
  }
  auto piece = s.text.push(std::span<const token_id>{&id, 1});
  d.text = std::move(piece.text);
  std::optional<finish_reason> why;
  const auto& eos = facts_.eos_token_ids;
  if (!spec.stop.ignore_eos &&
      std::find(eos.begin(), eos.end(), static_cast<std::int64_t>(id)) != eos.end()) {
    why = finish_reason::eos;
  } else if (std::find(spec.stop.stop_token_ids.begin(), spec.stop.stop_token_ids.end(), id) !=
                 spec.stop.stop_token_ids.end() ||
             piece.stopped) {
    why = finish_reason::stop;
  } else if (s.output_len() >= static_cast<std::size_t>(spec.stop.max_tokens)) {
    why = finish_reason::length;
  }
  if (why) {
    if (*why != finish_reason::stop || !piece.stopped)
      d.text += s.text.flush();
    d.finished = why;
  }
  if (why)
    finish(s, *why, {}, out);  // adds no delta: this one ends the sequence
  return {};
}

step_result scheduler::on_ran(const scheduled_step& step, const models::forward_output& output) {
  step_result out;
  out.deltas.reserve(step.rows.size());
  hold_admissions_ = false;
  for (std::size_t r = 0; r < step.rows.size(); ++r) {
    const auto& row = step.rows[r];
    // The rows of the step just scheduled (none ended since: cancellations
    // apply at `schedule` only); a foreign step goes through the id map.
    auto* s = step.serial == serial_ ? rows_[r] : find(row.rid);
    if (s == nullptr || s->finished || s->req->cancelled)
      continue;
    s->computed += static_cast<std::int64_t>(row.tokens.size());
    if (!row.samples)
      continue;
    if (auto ok = take_token(*s, row, r, output, out); !ok) {
      finish(*s, finish_reason::error, ok.error().message(), out);
    }
  }
  return out;
}

step_result scheduler::on_failed(const scheduled_step& step, const std::string& why) {
  step_result out;
  hold_admissions_ = false;
  for (const auto& row : step.rows) {
    if (auto* s = find(row.rid); s != nullptr && !s->finished) {
      finish(*s, finish_reason::error, why, out);
    }
  }
  return out;
}

delta& scheduler::new_delta(sequence& s, step_result& out) {
  delta& d = out.deltas.emplace_back();
  d.id = s.req->spec.id;
  d.index = s.index;
  return d;
}

void scheduler::finish(sequence& s, finish_reason why, std::string error, step_result& out) {
  s.finished = true;
  if (s.running)
    std::erase(running_, &s);
  s.running = false;
  std::erase(waiting_, &s);
  std::erase(started_, &s);
  out.actions.release.push_back(s.rid);
  // The delta that ends the sequence carries the usage (take_token put its
  // token in a delta already; that one gets the counts).
  if (out.deltas.empty() || out.deltas.back().id != s.req->spec.id ||
      out.deltas.back().index != s.index || !out.deltas.back().finished) {
    delta& d = new_delta(s, out);
    d.finished = why;
    d.error = std::move(error);
    if (why != finish_reason::error)
      d.text = s.text.flush();
  }
  auto& last = out.deltas.back();
  last.counts = {static_cast<std::int64_t>(s.prompt_len), static_cast<std::int64_t>(s.output_len()),
                 std::max<std::int64_t>(s.cached, 0), s.kv_pages_peak};
  by_rid_.erase(s.rid);
  auto* req = s.req;
  if (--req->unfinished == 0) {
    if (req->cancelled)
      --cancelled_live_;
    live_.erase(req->spec.id);  // frees `s`
  }
}

}  // namespace mstar::engine
