#pragma once

// The `prefix_wire` a Python preprocess stage would send for a prompt
// layout (reference kv-keys-windowing §1.8): unrooted keys, the tail, one
// row per span with the item digests and end keys in hex.

#include "core/hex.hpp"
#include "engine/prompt_layout.hpp"
#include "engine/request.hpp"
#include "resources/kv/layout.hpp"

namespace mstar::test {

/// The wire rows and keys of `layout` at page size `ps`.
inline engine::prefix_wire wire_of(const engine::prompt_layout& layout, std::int64_t ps) {
  const auto keyed = resources::key_prompt(layout.spans, ps).value();
  const auto rows =
      resources::prefix_layout_rows(layout.spans, layout.advances, keyed, ps, "prefill").value();
  engine::prefix_wire w;
  for (const auto& k : keyed.keys)
    w.keys.push_back(to_hex(k));
  w.tail = keyed.tail;
  for (const auto& r : rows) {
    w.layout.push_back({r.length, r.advance, r.walk, r.digest ? to_hex(*r.digest) : "",
                        r.end_key ? to_hex(*r.end_key) : ""});
  }
  w.decode = "text_outputs";
  return w;
}

}  // namespace mstar::test
