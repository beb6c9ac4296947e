#pragma once

#include <span>
#include <string_view>

#include "models/jinja/builtins.hpp"

namespace mstar::models::jinja::internal {

struct filter_entry {
  std::string_view name;
  filter_fn fn;
};

/// Filters over sequences and numbers (filters.cpp).
[[nodiscard]] std::span<const filter_entry> sequence_filters();

/// Filters over text, and tojson (filters_text.cpp).
[[nodiscard]] std::span<const filter_entry> text_filters();

}  // namespace mstar::models::jinja::internal
