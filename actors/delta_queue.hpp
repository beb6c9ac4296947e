#pragma once

// A request's deltas between the engine's thread (the conductor, or a
// deployment's router) and whoever reads them: a blocking queue behind a
// request_handle, or a callback. Shared by actors::runtime and
// actors::deployment.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "actors/protocol.hpp"

namespace mstar::actors {

/// A request's deltas between the conductor's thread and the reader.
class delta_queue final : public delta_sink {
 public:
  delta_queue(std::int32_t samples, std::function<void(const engine::delta&)> callback)
      : samples_left_(samples), callback_(std::move(callback)) {}

  void push(engine::delta d) override {
    if (callback_) {
      std::lock_guard lock{mutex_};  // one callback at a time, in order
      if (d.finished)
        --samples_left_;
      callback_(d);
      return;
    }
    {
      std::lock_guard lock{mutex_};
      if (d.finished)
        --samples_left_;
      queue_.push_back(std::move(d));
    }
    ready_.notify_all();
  }

  std::optional<engine::delta> pop(std::optional<std::chrono::milliseconds> timeout) {
    std::unique_lock lock{mutex_};
    auto has = [this] { return !queue_.empty() || samples_left_ <= 0; };
    if (timeout) {
      if (!ready_.wait_for(lock, *timeout, has))
        return std::nullopt;
    } else {
      ready_.wait(lock, has);
    }
    if (queue_.empty())
      return std::nullopt;
    auto d = std::move(queue_.front());
    queue_.pop_front();
    return d;
  }

  bool done() const {
    std::lock_guard lock{mutex_};
    return queue_.empty() && samples_left_ <= 0;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<engine::delta> queue_;
  std::int32_t samples_left_;
  std::function<void(const engine::delta&)> callback_;
};

}  // namespace mstar::actors
