// The recurrent + KV random walk (pool_random_walk.hpp) on host arenas.
#include "tests/resources/recurrent/pool_random_walk.hpp"

namespace mstar::resources::test {
namespace {

TEST_F(recurrent_walk, both_pools_keep_their_books_through_thousands_of_random_operations) {
  run({20240611U, 7U, 4242U}, 3000, 1500, 10);
}

}  // namespace
}  // namespace mstar::resources::test
