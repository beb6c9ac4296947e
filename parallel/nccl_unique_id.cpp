#include "parallel/nccl_unique_id.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "core/hex.hpp"

namespace mstar::parallel {

std::string nccl_unique_id::to_hex() const {
  return mstar::to_hex(std::span<const std::uint8_t>{bytes.data(), size});
}

result<nccl_unique_id> nccl_unique_id::from_hex(std::string_view hex) {
  if (hex.size() != 2 * size) {
    return make_error(errc::parse_error,
                      fmt::format("NCCL unique id: expected {} hex digits ({} bytes), got {} "
                                  "characters",
                                  2 * size, size, hex.size()));
  }
  auto parsed = mstar::from_hex(hex);
  if (!parsed)
    return parsed.error().with_context("NCCL unique id");
  nccl_unique_id id;
  std::copy(parsed->begin(), parsed->end(), id.bytes.begin());
  return id;
}

}  // namespace mstar::parallel
