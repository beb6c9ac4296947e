#pragma once

// A model whose forward fails from its `fail_at`-th call on (an error value
// naming `message`, or an exception carrying it); everything else is the
// inner model's. For the tests of what a failing step does to the engine,
// the actor runtime and a tensor-parallel rank's peers.
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "models/causal_lm.hpp"

namespace mstar::test {

class failing_model final : public models::causal_lm {
 public:
  failing_model(std::unique_ptr<models::causal_lm> inner, int fail_at, std::string message,
                bool throw_it = false)
      : inner_(std::move(inner)),
        fail_at_(fail_at),
        message_(std::move(message)),
        throw_(throw_it) {}
  const models::tokenizer* tok() const noexcept override { return inner_->tok(); }
  std::int64_t vocab_size() const noexcept override { return inner_->vocab_size(); }
  std::span<const std::int64_t> eos_token_ids() const noexcept override {
    return inner_->eos_token_ids();
  }
  bool prefix_skip_safe() const noexcept override { return inner_->prefix_skip_safe(); }
  result<models::pool_spec> pools(const models::pool_options& o) const override {
    return inner_->pools(o);
  }
  result<void> bind(resources::kv_pool* kv, resources::recurrent_state_pool* rec) override {
    return inner_->bind(kv, rec);
  }
  models::step_request declare(std::span<const models::step_row> rows) const override {
    return inner_->declare(rows);
  }
  result<models::forward_output> forward(std::span<const models::step_row> rows,
                                         const models::step_plans& plans,
                                         std::span<const models::row_sampling> draws) override {
    if (++calls_ >= fail_at_) {
      if (throw_)
        throw std::runtime_error(message_);
      return make_error(errc::internal, message_);
    }
    return inner_->forward(rows, plans, draws);
  }
  std::string device_name() const override { return inner_->device_name(); }
  mstar::dtype compute_dtype() const noexcept override { return inner_->compute_dtype(); }
  std::int64_t num_parameters() const noexcept override { return inner_->num_parameters(); }
  bool on_gpu() const noexcept override { return inner_->on_gpu(); }

 private:
  std::unique_ptr<models::causal_lm> inner_;
  int fail_at_;
  std::string message_;
  bool throw_;
  int calls_ = 0;
};

}  // namespace mstar::test
