#include "resources/recurrent/geometry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/checked.hpp"

namespace mstar::resources {
namespace {

// a·b + 2·c·d, the conv width of both families; nullopt on overflow.
std::optional<std::int64_t> checked_conv_dim(std::int64_t a, std::int64_t b, std::int64_t c,
                                             std::int64_t d) {
  const auto ab = checked_mul(a, b);
  const auto cd = checked_mul(c, d);
  const auto two_cd = cd ? checked_mul<std::int64_t>(2, *cd) : std::nullopt;
  return ab && two_cd ? checked_add(*ab, *two_cd) : std::nullopt;
}

// One named geometry field and the least value it may take.
struct field {
  std::string_view name;
  std::int64_t value;
  std::int64_t minimum;
};

result<void> check_fields(std::string_view family, std::initializer_list<field> fields) {
  for (const field& f : fields) {
    if (f.value < f.minimum) {
      return make_error(errc::invalid_argument,
                        fmt::format("{} geometry: {} must be at least {}, got {}", family, f.name,
                                    f.minimum, f.value));
    }
  }
  return {};
}

// The two blocks of either family: a rank-3 `lead` block [A, B, C] and a conv
// block [conv_dim, W - 1], with conv_dim = A·B + 2·C·quotient.
struct decoded_blocks {
  std::int64_t a;
  std::int64_t b;
  std::int64_t c;
  std::int64_t quotient;
  std::int64_t conv_kernel_size;
};

// How one family names its blocks and the terms of its conv-width identity,
// so that errors speak that family's language.
struct block_naming {
  std::string_view family;   // "delta-net", "Mamba-2"
  std::string_view lead;     // "state", "ssm"
  std::string_view layout;   // "[HV, V, K]"
  std::string_view span;     // "conv_dim - HV*V"
  std::string_view divisor;  // "2*K"
};

result<const recurrent_block_config*> find_block(const recurrent_blocks& blocks,
                                                 const block_naming& naming,
                                                 std::string_view name) {
  const auto it = blocks.find(std::string{name});
  if (it != blocks.end())
    return &it->second;
  std::vector<std::string_view> names;
  for (const auto& entry : blocks)
    names.emplace_back(entry.first);
  return make_error(errc::invalid_argument,
                    fmt::format("not a {} state pool: no '{}' block, got [{}]", naming.family, name,
                                fmt::join(names, ", ")));
}

result<void> check_shape(const recurrent_block_config& block, std::string_view name,
                         std::size_t rank, std::string_view layout) {
  const auto& shape = block.shape();
  if (shape.size() != rank) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} block must have rank {} ({}), got shape [{}]", name, rank,
                                  layout, fmt::join(shape, ", ")));
  }
  for (const std::int64_t d : shape) {
    if (d <= 0) {
      return make_error(errc::invalid_argument,
                        fmt::format("{} block shape [{}] has an axis that is not positive", name,
                                    fmt::join(shape, ", ")));
    }
  }
  return {};
}

result<decoded_blocks> decode_blocks(const recurrent_blocks& blocks, const block_naming& naming) {
  auto lead = find_block(blocks, naming, naming.lead);
  if (!lead)
    return lead.error();
  auto conv = find_block(blocks, naming, "conv");
  if (!conv)
    return conv.error();
  if (auto ok = check_shape(**lead, naming.lead, 3, naming.layout); !ok)
    return ok.error();
  if (auto ok = check_shape(**conv, "conv", 2, "[conv_dim, W - 1]"); !ok)
    return ok.error();

  const auto& s = (*lead)->shape();
  const auto& c = (*conv)->shape();
  const auto ab = checked_mul(s[0], s[1]);
  const auto divisor = checked_mul<std::int64_t>(2, s[2]);
  const std::int64_t span = ab ? c[0] - *ab : -1;
  if (!ab || !divisor || span <= 0 || span % *divisor != 0) {
    return make_error(
        errc::invalid_argument,
        fmt::format("conv block [{}] does not match {} block [{}]: {} = {}, which is not a "
                    "positive multiple of {} = {}",
                    fmt::join(c, ", "), naming.lead, fmt::join(s, ", "), naming.span,
                    ab ? fmt::format("{}", span) : std::string{"overflow"}, naming.divisor,
                    divisor ? fmt::format("{}", *divisor) : std::string{"overflow"}));
  }
  const auto kernel = checked_add<std::int64_t>(c[1], 1);
  if (!kernel)
    return make_error(errc::out_of_range, "conv block width overflows 64 bits");
  return decoded_blocks{s[0], s[1], s[2], span / *divisor, *kernel};
}

recurrent_blocks make_blocks(std::string_view lead, std::vector<std::int64_t> lead_shape,
                             dtype lead_dtype, std::int64_t conv_dim, std::int64_t conv_kernel_size,
                             dtype conv_dtype) {
  recurrent_blocks blocks;
  blocks.emplace(std::string{lead}, recurrent_block_config{std::move(lead_shape), lead_dtype, {0}});
  blocks.emplace("conv", recurrent_block_config{{conv_dim, conv_kernel_size - 1}, conv_dtype, {0}});
  return blocks;
}

constexpr block_naming delta_net_naming{"delta-net", "state", "[HV, V, K]", "conv_dim - HV*V",
                                        "2*K"};
constexpr block_naming mamba2_naming{"Mamba-2", "ssm", "[H, P, N]", "conv_dim - H*P", "2*N"};

}  // namespace

result<recurrent_blocks> delta_net_geometry::to_blocks(dtype state_dtype, dtype conv_dtype) const {
  if (auto ok = check_fields("delta-net", {{"num_k_heads", num_k_heads, 1},
                                           {"num_v_heads", num_v_heads, 1},
                                           {"head_k_dim", head_k_dim, 1},
                                           {"head_v_dim", head_v_dim, 1},
                                           {"conv_kernel_size", conv_kernel_size, 2}});
      !ok) {
    return ok.error();
  }
  const auto width = checked_conv_dim(num_v_heads, head_v_dim, num_k_heads, head_k_dim);
  if (!width) {
    return make_error(errc::out_of_range, "delta-net geometry: conv_dim overflows 64 bits");
  }
  return make_blocks("state", {num_v_heads, head_v_dim, head_k_dim}, state_dtype, *width,
                     conv_kernel_size, conv_dtype);
}

result<delta_net_geometry> delta_net_geometry::from_blocks(const recurrent_blocks& blocks) {
  auto decoded = decode_blocks(blocks, delta_net_naming);
  if (!decoded)
    return decoded.error();
  // state is [HV, V, K]: a = HV, b = V, c = K, and the span is the q and k halves.
  return delta_net_geometry{decoded->quotient, decoded->a, decoded->c, decoded->b,
                            decoded->conv_kernel_size};
}

result<recurrent_blocks> mamba2_geometry::to_blocks(dtype state_dtype, dtype conv_dtype) const {
  if (auto ok = check_fields("Mamba-2", {{"num_heads", num_heads, 1},
                                         {"head_dim", head_dim, 1},
                                         {"state_size", state_size, 1},
                                         {"n_groups", n_groups, 1},
                                         {"conv_kernel_size", conv_kernel_size, 2}});
      !ok) {
    return ok.error();
  }
  const auto width = checked_conv_dim(num_heads, head_dim, n_groups, state_size);
  if (!width) {
    return make_error(errc::out_of_range, "Mamba-2 geometry: conv_dim overflows 64 bits");
  }
  return make_blocks("ssm", {num_heads, head_dim, state_size}, state_dtype, *width,
                     conv_kernel_size, conv_dtype);
}

result<mamba2_geometry> mamba2_geometry::from_blocks(const recurrent_blocks& blocks) {
  auto decoded = decode_blocks(blocks, mamba2_naming);
  if (!decoded)
    return decoded.error();
  // ssm is [H, P, N]: a = H, b = P, c = N, and the span is the B and C groups.
  return mamba2_geometry{decoded->a, decoded->b, decoded->c, decoded->quotient,
                         decoded->conv_kernel_size};
}

}  // namespace mstar::resources
