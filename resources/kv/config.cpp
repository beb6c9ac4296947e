#include "resources/kv/config.hpp"

#include <fmt/format.h>
#include <limits>

namespace mstar::resources {

result<void> kv_pool_config::validate() const {
  const std::pair<const char*, std::int32_t> sizes[] = {{"page_size", geometry.page_size},
                                                        {"num_layers", geometry.num_layers},
                                                        {"num_kv_heads", geometry.num_kv_heads},
                                                        {"head_dim", geometry.head_dim}};
  for (const auto& [name, value] : sizes) {
    if (value < 1) {
      return make_error(errc::invalid_argument,
                        fmt::format("{} must be >= 1, got {}", name, value));
    }
  }
  if (max_num_pages < 2 || max_num_pages > std::numeric_limits<std::int32_t>::max()) {
    return make_error(errc::invalid_argument,
                      fmt::format("max_num_pages must be in [2, 2^31) (page 0 is the sink), got {}",
                                  max_num_pages));
  }
  // Sizes are >= 1 here; check the products in unsigned 128-bit-free steps.
  std::uint64_t bytes = size_of(geometry.dtype);
  for (const std::int64_t f : {std::int64_t{geometry.head_dim}, std::int64_t{geometry.num_kv_heads},
                               std::int64_t{geometry.page_size}, std::int64_t{2},
                               std::int64_t{geometry.num_layers}, max_num_pages}) {
    if (bytes > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(f)) {
      return make_error(errc::invalid_argument, "the pool's byte size overflows 64 bits");
    }
    bytes *= static_cast<std::uint64_t>(f);
  }
  return {};
}

std::uint64_t kv_pool_config::total_bytes() const {
  return geometry.page_bytes() * static_cast<std::uint64_t>(max_num_pages);
}

}  // namespace mstar::resources
