// N tensor-parallel ranks behind one causal_lm: a thread per rank, each call
// run on every rank at once, rank 0's answer (models/tensor_parallel_lm.hpp).
#include "models/tensor_parallel_lm.hpp"

#include <condition_variable>
#include <fmt/format.h>
#include <thread>
#include <utility>

#include "kernels/device.hpp"
#include "kernels/replicated_arena.hpp"
#include "parallel/local_group.hpp"

namespace mstar::models {

// One rank's thread and its mailbox: one job at a time, posted by the
// wrapper's caller, who waits until it is done.
struct tensor_parallel_lm::worker {
  std::mutex mutex;
  std::condition_variable cv;
  std::function<void()> job;
  bool stop = false;
  std::thread thread;

  worker() {
    thread = std::thread([this] {
      std::unique_lock lock(mutex);
      for (;;) {
        cv.wait(lock, [this] { return stop || job; });
        if (!job)
          return;  // stopped with nothing left to run
        lock.unlock();
        job();
        lock.lock();
        job = nullptr;
        cv.notify_all();
      }
    });
  }
  ~worker() {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  // Waits for the job before (another caller's) to finish first.
  void post(std::function<void()> f) {
    {
      std::unique_lock lock(mutex);
      cv.wait(lock, [this] { return !job; });
      job = std::move(f);
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [this] { return !job; });
  }
};

tensor_parallel_lm::tensor_parallel_lm() = default;

tensor_parallel_lm::~tensor_parallel_lm() {
  // Each rank's model goes on its own thread (a device's memory is freed
  // where it was made), then the threads.
  run_all([this](int r) { models_[static_cast<std::size_t>(r)].reset(); });
  workers_.clear();
}

void tensor_parallel_lm::run_all(const std::function<void(int)>& job) {
  for (std::size_t r = 0; r < workers_.size(); ++r)
    workers_[r]->post([&job, r] { job(static_cast<int>(r)); });
  for (auto& w : workers_)
    w->wait();
}

void tensor_parallel_lm::run_each(const std::function<void(int)>& job) {
  for (std::size_t r = 0; r < workers_.size(); ++r) {
    workers_[r]->post([&job, r] { job(static_cast<int>(r)); });
    workers_[r]->wait();
  }
}

void tensor_parallel_lm::fail(int r, const error& e) {
  {
    // Recorded before the abort: a peer fails only after it, so the first
    // failure recorded is the rank that caused it, not its peers' echo.
    std::lock_guard lock(failure_mutex_);
    if (!failure_) {
      failure_ = make_error(e.code(), fmt::format("tensor-parallel rank {}: {}", r, e.message()));
    }
  }
  if (const auto& comm = comms_[static_cast<std::size_t>(r)]; comm)
    comm->abort(fmt::format("rank {} failed: {}", r, e.message()));
}

std::optional<error> tensor_parallel_lm::broken() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

std::vector<std::string> rank_devices(const std::string& device, int ranks) {
  std::vector<std::string> out(static_cast<std::size_t>(ranks), device);
  if (device != "cuda")
    return out;
  const auto report = kernels::query_cuda_devices();
  if (static_cast<int>(report.devices.size()) < ranks)
    return out;
  for (int r = 0; r < ranks; ++r)
    out[static_cast<std::size_t>(r)] = fmt::format("cuda:{}", r);
  return out;
}

result<std::unique_ptr<tensor_parallel_lm>> tensor_parallel_lm::make(
    const run_options& run, int ranks, const rank_loader& load, std::chrono::milliseconds timeout) {
  if (ranks < 2) {
    return make_error(errc::invalid_argument,
                      fmt::format("tensor_parallel_lm: {} ranks (at least 2)", ranks));
  }
  const auto devices = rank_devices(run.device, ranks);
  // The group: the caller's maker (NCCL for ranks on distinct GPUs) when it
  // serves these devices, else the in-process one.
  std::optional<parallel::rank_joiner> join;
  if (run.tensor_parallel_groups) {
    auto made = run.tensor_parallel_groups(ranks, devices, timeout);
    if (!made)
      return make_error(made.error().code(),
                        fmt::format("tensor_parallel_lm: forming the group of {} ranks: {}", ranks,
                                    made.error().message()));
    join = std::move(*made);
  }
  std::unique_ptr<tensor_parallel_lm> lm(new tensor_parallel_lm());
  if (!join) {
    auto group = parallel::local_group::make(ranks, timeout);
    if (!group)
      return group.error();
    for (auto& comm : *group)
      lm->comms_.push_back(std::move(comm));
  } else {
    lm->comms_.resize(static_cast<std::size_t>(ranks));
  }
  lm->models_.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    lm->workers_.push_back(std::make_unique<worker>());
  std::vector<std::optional<error>> errors(static_cast<std::size_t>(ranks));
  lm->run_all([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    if (join) {
      // Every rank joins at once, on its own thread (where its device
      // calls will come from).
      auto comm = (*join)(r);
      if (!comm) {
        errors[i] = comm.error();
        return;
      }
      lm->comms_[i] = std::move(*comm);
    }
    run_options mine = run;
    mine.device = devices[i];
    mine.tensor_parallel = lm->comms_[i];
    mine.tensor_parallel_ranks = 1;
    mine.tensor_parallel_groups = nullptr;
    auto model = load(mine);
    if (!model)
      errors[i] = model.error();
    else
      lm->models_[i] = std::move(*model);
  });
  for (int r = 0; r < ranks; ++r) {
    if (const auto& e = errors[static_cast<std::size_t>(r)]; e) {
      return make_error(e->code(), fmt::format("tensor-parallel rank {}: {}", r, e->message()));
    }
  }
  return lm;
}

namespace {

// What differs between rank 0's pools and rank r's, or empty.
std::string pool_difference(const pool_spec& a, const pool_spec& b) {
  if (a.kv.has_value() != b.kv.has_value())
    return "one has a KV pool, the other none";
  if (a.kv) {
    const auto& x = a.kv->geometry;
    const auto& y = b.kv->geometry;
    if (x.page_size != y.page_size || x.num_layers != y.num_layers ||
        x.num_kv_heads != y.num_kv_heads || x.head_dim != y.head_dim || x.dtype != y.dtype ||
        a.kv->max_num_pages != b.kv->max_num_pages) {
      return "the KV pool's geometry or page count";
    }
  }
  if (a.recurrent.has_value() != b.recurrent.has_value())
    return "one has a recurrent pool, the other none";
  if (a.recurrent) {
    const auto& x = *a.recurrent;
    const auto& y = *b.recurrent;
    if (x.num_layers != y.num_layers || x.max_slots != y.max_slots ||
        x.checkpoint_slots != y.checkpoint_slots || x.blocks.size() != y.blocks.size()) {
      return "the recurrent pool's layers or slots";
    }
    for (const auto& [name, block] : x.blocks) {
      const auto it = y.blocks.find(name);
      if (it == y.blocks.end() || it->second.shape() != block.shape() ||
          it->second.dtype() != block.dtype()) {
        return "recurrent block '" + name + "'";
      }
    }
  }
  return {};
}

}  // namespace

result<pool_spec> tensor_parallel_lm::pools(const pool_options& options) const {
  auto spec = models_[0]->pools(options);
  if (!spec)
    return spec.error();
  std::vector<kernels::arena_factory> memory{spec->memory};
  for (std::size_t r = 1; r < models_.size(); ++r) {
    auto other = models_[r]->pools(options);
    if (!other)
      return make_error(other.error().code(),
                        fmt::format("tensor-parallel rank {}: {}", r, other.error().message()));
    if (const auto diff = pool_difference(*spec, *other); !diff.empty()) {
      return make_error(
          errc::invalid_argument,
          fmt::format("tensor_parallel_lm: rank {}'s pools differ from rank 0's in {}", r, diff));
    }
    memory.push_back(std::move(other->memory));
  }
  // Each member is made on its rank's thread: a device arena is allocated
  // on the calling thread's current device, which is the rank's there.
  for (std::size_t r = 0; r < memory.size(); ++r) {
    memory[r] = [this, r, make = std::move(memory[r])](
                    std::size_t bytes) -> result<std::unique_ptr<kernels::arena>> {
      result<std::unique_ptr<kernels::arena>> made =
          make_error(errc::internal, "tensor_parallel_lm: arena not made");
      workers_[r]->post([&] { made = kernels::make_arena(make, bytes); });
      workers_[r]->wait();
      return made;
    };
  }
  // Rank 0's fingerprint names its part ("tp 0/N"); these pools hold every
  // rank's, so their prefix keys are their own.
  spec->fingerprint += fmt::format(" replicated over {} ranks", models_.size());
  spec->memory = kernels::replicated_arena_factory(std::move(memory));
  spec->replicas = static_cast<std::int64_t>(models_.size());
  return spec;
}

result<void> tensor_parallel_lm::bind(resources::kv_pool* kv,
                                      resources::recurrent_state_pool* recurrent) {
  if (auto b = broken())
    return *b;
  // One rank at a time: binding reads the pools' bookkeeping, which is
  // not made for concurrent readers.
  std::optional<error> first;
  run_each([&](int r) {
    if (first)
      return;
    if (auto ok = models_[static_cast<std::size_t>(r)]->bind(kv, recurrent); !ok) {
      first = make_error(ok.error().code(),
                         fmt::format("tensor-parallel rank {}: {}", r, ok.error().message()));
    }
  });
  if (first)
    return *first;
  return {};
}

void tensor_parallel_lm::begin_sequence(const resources::request_id& rid,
                                        std::span<const resources::token_id> prompt,
                                        std::span<const image_input> images) {
  run_all(
      [&](int r) { models_[static_cast<std::size_t>(r)]->begin_sequence(rid, prompt, images); });
}

void tensor_parallel_lm::end_sequence(const resources::request_id& rid) {
  run_all([&](int r) { models_[static_cast<std::size_t>(r)]->end_sequence(rid); });
}

result<forward_output> tensor_parallel_lm::forward(std::span<const step_row> rows,
                                                   const step_plans& plans,
                                                   std::span<const row_sampling> draws) {
  if (auto b = broken())
    return *b;
  forward_output out;
  run_all([&](int r) {
    auto got = models_[static_cast<std::size_t>(r)]->forward(rows, plans, draws);
    if (!got)
      fail(r, got.error());
    else if (r == 0)
      out = std::move(*got);
  });
  if (auto b = broken())
    return *b;
  return out;
}

result<std::uint64_t> tensor_parallel_lm::launch(std::span<const step_row> rows,
                                                 const step_plans& plans,
                                                 std::span<const row_sampling> draws,
                                                 std::span<const std::int32_t> loopback) {
  if (auto b = broken())
    return *b;
  std::vector<std::uint64_t> tickets(models_.size(), 0);
  run_all([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    auto got = models_[i]->launch(rows, plans, draws, loopback);
    if (!got)
      fail(r, got.error());
    else
      tickets[i] = *got;
  });
  if (auto b = broken())
    return *b;
  const auto ticket = tickets[0];
  tickets_.push_back(std::move(tickets));
  return ticket;
}

result<forward_output> tensor_parallel_lm::finish(std::uint64_t ticket) {
  if (auto b = broken())
    return *b;
  if (tickets_.empty() || tickets_.front()[0] != ticket) {
    return make_error(
        errc::invalid_argument,
        fmt::format("tensor_parallel_lm: forward {} is not the oldest outstanding", ticket));
  }
  const auto tickets = std::move(tickets_.front());
  tickets_.pop_front();
  forward_output out;
  run_all([&](int r) {
    const auto i = static_cast<std::size_t>(r);
    auto got = models_[i]->finish(tickets[i]);
    if (!got)
      fail(r, got.error());
    else if (r == 0)
      out = std::move(*got);
  });
  if (auto b = broken())
    return *b;
  return out;
}

std::int64_t tensor_parallel_lm::num_parameters() const noexcept {
  std::int64_t n = 0;
  for (const auto& m : models_)
    n += m->num_parameters();
  return n;
}

result<std::unique_ptr<causal_lm>> make_tensor_parallel(
    const run_options& run, int ranks, const tensor_parallel_lm::rank_loader& load) {
  if (ranks <= 1)
    return load(run);
  auto lm = tensor_parallel_lm::make(run, ranks, load);
  if (!lm)
    return lm.error();
  return std::unique_ptr<causal_lm>(std::move(*lm));
}

}  // namespace mstar::models
