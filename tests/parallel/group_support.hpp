#pragma once

// Shared by the communicator tests (local_group_test.cpp,
// socket_group_test.cpp): a group's ranks driven on a thread each.

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "parallel/communicator.hpp"

namespace mstar::parallel {

/// Runs body(rank) on one thread per rank and joins them.
inline void on_every_rank(std::vector<std::unique_ptr<communicator>>& ranks,
                          const std::function<void(communicator&)>& body) {
  std::vector<std::thread> threads;
  for (auto& r : ranks) {
    communicator* c = r.get();
    threads.emplace_back([c, &body] { body(*c); });
  }
  for (auto& t : threads)
    t.join();
}

}  // namespace mstar::parallel
