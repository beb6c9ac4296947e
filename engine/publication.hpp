#pragma once

// What a prefill node's pools publish about a request and what a decode
// node's pools answer when they adopt it (ARCHITECTURE.md "Disaggregated
// prefill and decode"): per label, each pool's part. At run time each pool
// actor owns a one-pool `pool_set`, so a publication is assembled from the
// parts with `merge`. Plain aggregates of std types and the resources'
// transfer values, so the actors layer can give each an `inspect` overload.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "resources/kv/transfer.hpp"
#include "resources/recurrent/transfer.hpp"

namespace mstar::engine {

/// One stream's published parts: one per pool that holds the label.
struct published_stream {
  std::optional<resources::kv_export> kv;
  std::optional<resources::recurrent_export> recurrent;

  friend bool operator==(const published_stream&, const published_stream&) = default;
};

/// Every stream of one request as the prefill node's pools publish it.
struct publication {
  /// By label.
  std::map<std::string, published_stream> streams;

  /// Adds `other`'s parts (another pool set's publish of the same request).
  /// invalid_argument, and nothing changed, when both carry the same part
  /// of the same label.
  [[nodiscard]] result<void> merge(const publication& other);
  /// Whether any stream carries a KV part.
  [[nodiscard]] bool has_kv() const;
  /// Whether any stream carries a recurrent part.
  [[nodiscard]] bool has_recurrent() const;

  friend bool operator==(const publication&, const publication&) = default;
};

/// One stream's adopted parts, one per pool that adopted the label: what
/// the transfer agent must copy (`kv->fetch`, `recurrent`).
struct adopted_stream {
  std::optional<resources::kv_import> kv;
  std::optional<resources::recurrent_import> recurrent;

  friend bool operator==(const adopted_stream&, const adopted_stream&) = default;
};

/// Every stream of one request as the decode node's pools adopted it.
struct adoption {
  /// By label.
  std::map<std::string, adopted_stream> streams;

  /// Adds `other`'s parts (another pool set's adopt of the same request);
  /// invalid_argument, and nothing changed, when both carry the same part.
  [[nodiscard]] result<void> merge(const adoption& other);

  friend bool operator==(const adoption&, const adoption&) = default;
};

}  // namespace mstar::engine
