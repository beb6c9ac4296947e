#include "models/generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "kernels/sampling.hpp"
#include "models/cuda/nemotron_h_cuda.hpp"

namespace mstar::models {
namespace {

using clock = std::chrono::steady_clock;

struct active_request {
  std::size_t index = 0;  ///< into requests / results
  resources::request_id rid;
  std::vector<resources::token_id> feed;  ///< what the next step feeds
  bool prefilled = false;
  bool done = false;
  clock::time_point started;
  clock::time_point first_token;
};

std::string describe(const step_outcome& out) {
  return fmt::format("{} refused: {}", out.refused_by, resources::refusal_message(*out.refused));
}

}  // namespace

result<std::vector<generation_result>> generate(nemotron_h_model& model,
                                                std::span<const generation_request> requests,
                                                bool keep_logits) {
  static std::atomic<std::uint64_t> next_id{0};
  const auto& cfg = model.config();
  std::vector<generation_result> results(requests.size());
  std::vector<active_request> active;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& req = requests[i];
    if (req.prompt.empty()) {
      return make_error(errc::invalid_argument, fmt::format("request {} has an empty prompt", i));
    }
    for (const auto id : req.prompt) {
      if (static_cast<std::int64_t>(id) >= cfg.vocab_size) {
        return make_error(errc::out_of_range,
                          fmt::format("request {}: token id {} is outside the vocabulary of {}", i,
                                      id, cfg.vocab_size));
      }
    }
    active_request a;
    a.index = i;
    a.rid = fmt::format("gen{}", next_id++);
    a.started = clock::now();
    results[i].prompt_ids = req.prompt;
    results[i].matched_tokens = model.ingest(a.rid, req.prompt);
    a.feed.assign(req.prompt.begin() + results[i].matched_tokens, req.prompt.end());
    a.done = req.max_tokens <= 0;
    if (a.done) model.remove(a.rid);
    active.push_back(std::move(a));
  }
  // Without kept logits only each row's token is needed, which a GPU model
  // draws on the device (the CPU model returns logits and we sample here).
  const bool device_draws = !keep_logits;
  std::vector<row_sampling> settings;
  // Steps until every request is done. A refused step is retried with half
  // its rows; a single row the pools cannot hold fails the call.
  while (true) {
    std::vector<active_request*> rows;
    for (auto& a : active) {
      if (!a.done) rows.push_back(&a);
    }
    if (rows.empty()) break;
    // Prefill rows first in their own step: decode rows then batch cleanly.
    const bool any_prefill = std::any_of(rows.begin(), rows.end(),
                                         [](const active_request* a) { return !a->prefilled; });
    if (any_prefill) {
      std::erase_if(rows, [](const active_request* a) { return a->prefilled; });
    }
    std::size_t take = rows.size();
    step_outcome out;
    while (true) {
      std::vector<step_row> batch;
      for (std::size_t r = 0; r < take; ++r) batch.push_back({rows[r]->rid, rows[r]->feed});
      settings.clear();
      for (std::size_t r = 0; device_draws && r < take; ++r) {
        const auto& s = requests[rows[r]->index].sampling;
        settings.push_back({s.temperature, s.top_k, s.top_p, s.seed,
                            results[rows[r]->index].generated_ids.size()});
      }
      auto stepped = model.step(batch, settings);
      if (!stepped) return stepped.error();
      out = std::move(*stepped);
      if (!out.refused) break;
      if (take == 1) {
        return make_error(errc::out_of_range,
                          fmt::format("request {} does not fit in the pools even alone ({}); "
                                      "give the pools more pages or slots",
                                      rows[0]->index, describe(out)));
      }
      take = (take + 1) / 2;
    }
    const auto V = static_cast<std::size_t>(cfg.vocab_size);
    for (std::size_t r = 0; r < take; ++r) {
      auto& a = *rows[r];
      const auto& req = requests[a.index];
      auto& res = results[a.index];
      resources::token_id id = 0;
      std::span<const float> row;
      if (!out.sampled.empty()) {
        if (out.sampled[r] < 0) {
          return make_error(errc::invalid_argument,
                            fmt::format("request {}: no token can be drawn (sampling settings "
                                        "out of range or no finite logit)",
                                        a.index));
        }
        id = static_cast<resources::token_id>(out.sampled[r]);
      } else {
        row = {out.logits.data() + r * V, V};
        auto tok = kernels::sample(
            {kernels::contiguous<const float, 1>(row.data(), {static_cast<std::int64_t>(V)}),
             req.sampling.temperature, req.sampling.top_k, req.sampling.top_p, req.sampling.seed,
             res.generated_ids.size()});
        if (!tok) return tok.error();
        id = static_cast<resources::token_id>(*tok);
      }
      if (!a.prefilled) a.first_token = clock::now();
      a.prefilled = true;
      res.generated_ids.push_back(id);
      if (keep_logits) res.step_logits.emplace_back(row.begin(), row.end());
      model.extend(a.rid, std::span{&id, 1});
      const bool eos = req.stop_at_eos && std::find(cfg.eos_token_ids.begin(),
                                                    cfg.eos_token_ids.end(),
                                                    static_cast<std::int64_t>(id)) !=
                                              cfg.eos_token_ids.end();
      a.feed.assign(1, id);
      if (eos || static_cast<std::int32_t>(res.generated_ids.size()) >= req.max_tokens) {
        a.done = true;
        const auto now = clock::now();
        res.time_to_first_token_s = std::chrono::duration<double>(a.first_token - a.started).count();
        res.decode_time_s = std::chrono::duration<double>(now - a.first_token).count();
        model.remove(a.rid);
      }
    }
  }
  return results;
}

}  // namespace mstar::models
