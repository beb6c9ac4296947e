#include "engine/spec_rows.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace mstar::engine {

// ---------------------------------------------------------------------------
// deferred_row_inputs

deferred_row_inputs::deferred_row_inputs(std::vector<request_id> request_ids,
                                         std::vector<std::string> signals)
    : signals_(std::move(signals)) {
  order_.reserve(request_ids.size());
  for (auto& rid : request_ids)
    if (rows_.try_emplace(rid).second)
      order_.push_back(std::move(rid));
}

row_inputs deferred_row_inputs::template_inputs() const {
  row_inputs inputs;
  for (const auto& signal : signals_)
    inputs.try_emplace(signal);
  return inputs;
}

row_inputs& deferred_row_inputs::built(row& r) {
  if (!r.inputs) {
    r.inputs = template_inputs();
    ++rows_built_;
  }
  return *r.inputs;
}

row_inputs* deferred_row_inputs::find(const request_id& rid) {
  const auto it = rows_.find(rid);
  return it == rows_.end() ? nullptr : &built(it->second);
}

void deferred_row_inputs::assign(const request_id& rid, row_inputs inputs) {
  auto [it, inserted] = rows_.try_emplace(rid);
  if (inserted)
    order_.push_back(rid);
  it->second = row{row_kind::assigned, std::move(inputs)};
}

void deferred_row_inputs::drop_order(const request_id& rid) {
  order_.erase(std::find(order_.begin(), order_.end(), rid));
}

bool deferred_row_inputs::erase(const request_id& rid) {
  if (rows_.erase(rid) == 0)
    return false;
  drop_order(rid);
  return true;
}

void deferred_row_inputs::set_signals(std::vector<std::string> signals) {
  signals_ = std::move(signals);
  for (auto& [rid, r] : rows_)
    if (r.kind == row_kind::template_row && r.inputs)
      *r.inputs = template_inputs();  // in place: references to the row stay valid
}

std::vector<request_id> deferred_row_inputs::take_outputs(
    std::map<request_id, row_inputs> outputs) {
  std::vector<request_id> dropped;
  for (const auto& rid : order_) {
    row& r = rows_.at(rid);
    if (r.kind != row_kind::template_row)
      continue;
    // Presence first, so a dropped row is neither built nor half-threaded.
    row_inputs* out = nullptr;
    if (const auto it = outputs.find(rid); it != outputs.end())
      out = &it->second;
    const auto carries = [out](const std::string& signal) {
      if (out == nullptr)
        return false;
      const auto list = out->find(signal);
      return list != out->end() && !list->second.empty();
    };
    if (!std::all_of(signals_.begin(), signals_.end(), carries)) {
      dropped.push_back(rid);
      continue;
    }
    row_inputs& inputs = built(r);
    for (const auto& signal : signals_)
      inputs[signal] = std::move(out->find(signal)->second);
    r.kind = row_kind::threaded;
  }
  for (const auto& rid : dropped)
    erase(rid);
  return dropped;
}

std::map<request_id, row_inputs> deferred_row_inputs::materialize() {
  std::map<request_id, row_inputs> plain;
  for (const auto& rid : order_)
    plain.emplace(rid, built(rows_.at(rid)));
  return plain;
}

// ---------------------------------------------------------------------------
// Loop counters

result<std::vector<input_metadata>> loop_counter_snapshots(
    std::span<const std::shared_ptr<forward_pass_info>> infos, std::string_view loop_name,
    std::size_t n_next_iter, std::span<const input_metadata> base) {
  if (n_next_iter > infos.size())
    return make_error(errc::out_of_range,
                      fmt::format("loop_counter_snapshots: n_next_iter {} is past the {} rows",
                                  n_next_iter, infos.size()));
  if (!base.empty() && base.size() != infos.size())
    return make_error(errc::invalid_argument,
                      fmt::format("loop_counter_snapshots: {} base metadata for {} rows",
                                  base.size(), infos.size()));
  std::vector<input_metadata> snapshots;
  snapshots.reserve(infos.size());
  for (std::size_t i = 0; i < infos.size(); ++i) {
    if (!infos[i])
      return make_error(errc::invalid_argument,
                        fmt::format("loop_counter_snapshots: row {} has no forward info", i));
    input_metadata meta = base.empty() ? input_metadata{} : base[i];
    meta.dynamic_loop_iter_counts = infos[i]->dynamic_loop_iter_counts;
    if (i < n_next_iter && !loop_name.empty()) {
      const auto counter = meta.dynamic_loop_iter_counts.find(loop_name);
      if (counter == meta.dynamic_loop_iter_counts.end())
        return make_error(errc::not_found,
                          fmt::format("loop_counter_snapshots: row {} has no counter for loop '{}'",
                                      i, loop_name));
      ++counter->second;
    }
    snapshots.push_back(std::move(meta));
  }
  return snapshots;
}

result<std::vector<loop_position>> check_stop_batched(std::span<const input_metadata> rows,
                                                      std::string_view loop_name,
                                                      std::int64_t max_iters) {
  if (max_iters < 1)
    return make_error(errc::invalid_argument,
                      fmt::format("check_stop_batched: max_iters {} for loop '{}' is below 1",
                                  max_iters, loop_name));
  std::vector<loop_position> positions;
  positions.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto counter = rows[i].dynamic_loop_iter_counts.find(loop_name);
    if (counter == rows[i].dynamic_loop_iter_counts.end())
      return make_error(
          errc::not_found,
          fmt::format("check_stop_batched: row {} has no counter for loop '{}'", i, loop_name));
    positions.push_back({counter->second, counter->second + 1 >= max_iters});
  }
  return positions;
}

// ---------------------------------------------------------------------------
// A speculative step's rows

result<speculative_rows> assemble_speculation(speculation_plan plan, const shared_infos& shared) {
  speculative_rows out;
  std::set<request_id> seen;
  for (const auto& rid : plan.continuing)
    if (!seen.insert(rid).second)
      return make_error(errc::invalid_argument,
                        fmt::format("assemble_speculation: continuing row '{}' is repeated", rid));
  out.request_ids = plan.continuing;
  out.n_continuing = plan.continuing.size();
  std::vector<std::pair<request_id, row_inputs>> fresh;
  for (auto& entry : plan.fresh) {
    if (seen.insert(entry.first).second) {
      out.request_ids.push_back(entry.first);
      fresh.push_back(std::move(entry));
    } else {
      out.pushed_back.push_back(entry.first);
    }
  }

  std::vector<std::shared_ptr<forward_pass_info>> infos;
  std::vector<input_metadata> base;
  infos.reserve(out.request_ids.size());
  base.reserve(out.request_ids.size());
  for (const auto& rid : out.request_ids) {
    const auto info = shared.find(rid);
    if (info == shared.end() || !info->second)
      return make_error(errc::not_found,
                        fmt::format("assemble_speculation: row '{}' has no forward info", rid));
    infos.push_back(info->second);
    const auto meta = plan.metadata.find(rid);
    base.push_back(meta == plan.metadata.end() ? input_metadata{} : std::move(meta->second));
  }
  out.is_new_iter = plan.is_new_loop_iter;
  const std::size_t n_next_iter = plan.is_new_loop_iter ? out.n_continuing : 0;
  auto snapshots = loop_counter_snapshots(infos, plan.loop_name, n_next_iter, base);
  if (!snapshots)
    return snapshots.error().with_context("assemble_speculation: ");

  out.per_request_input_tensors = deferred_row_inputs{plan.continuing, std::move(plan.signals)};
  for (auto& [rid, inputs] : fresh)
    out.per_request_input_tensors.assign(rid, std::move(inputs));
  for (std::size_t i = 0; i < out.request_ids.size(); ++i) {
    const auto& rid = out.request_ids[i];
    out.per_request_info.emplace(rid, infos[i]);
    out.per_request_input_metadata.emplace(rid, std::move((*snapshots)[i]));
    if (plan.final_stream_rids.contains(rid))
      out.final_stream_rids.insert(rid);
    if (plan.stream_partition_done_rids.contains(rid))
      out.stream_partition_done_rids.insert(rid);
  }
  return out;
}

void drop_rows(speculative_rows& rows, std::span<const request_id> dropped) {
  for (const auto& rid : dropped) {
    const auto it = std::find(rows.request_ids.begin(), rows.request_ids.end(), rid);
    if (it == rows.request_ids.end())
      continue;
    if (static_cast<std::size_t>(it - rows.request_ids.begin()) < rows.n_continuing)
      --rows.n_continuing;
    rows.request_ids.erase(it);
    rows.per_request_input_tensors.erase(rid);
    rows.per_request_info.erase(rid);
    rows.per_request_input_metadata.erase(rid);
    rows.final_stream_rids.erase(rid);
    rows.stream_partition_done_rids.erase(rid);
  }
}

std::vector<request_id> thread_outputs(speculative_rows& rows,
                                       std::map<request_id, row_inputs> outputs) {
  auto dropped = rows.per_request_input_tensors.take_outputs(std::move(outputs));
  drop_rows(rows, dropped);
  return dropped;
}

}  // namespace mstar::engine
