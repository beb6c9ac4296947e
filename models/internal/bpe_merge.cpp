#include "models/internal/bpe_merge.hpp"

#include <functional>
#include <queue>

namespace mstar::models::internal {
namespace {

constexpr std::size_t none = static_cast<std::size_t>(-1);

// A symbol of the word; merged-away symbols stay in place, marked dead.
struct symbol {
  token_id id;
  std::size_t previous;  // none at the start
  std::size_t next;      // none at the end
  bool alive;
};

// A merge of the symbol at `at` with the one after it, waiting its turn.
struct candidate {
  std::uint32_t rank;
  std::size_t at;
  token_id result;

  bool operator>(const candidate& other) const {
    return rank != other.rank ? rank > other.rank : at > other.at;
  }
};

}  // namespace

void apply_merges(const merge_table& merges, std::vector<token_id>& symbols) {
  const std::size_t n = symbols.size();
  if (n < 2)
    return;
  std::vector<symbol> word(n);
  for (std::size_t i = 0; i < n; ++i)
    word[i] = {symbols[i], i == 0 ? none : i - 1, i + 1 == n ? none : i + 1, true};
  std::priority_queue<candidate, std::vector<candidate>, std::greater<>> queue;
  const auto offer = [&](std::size_t at) {
    const std::size_t next = word[at].next;
    if (next == none)
      return;
    if (const auto* m = merges.find(word[at].id, word[next].id))
      queue.push({m->rank, at, m->result});
  };
  for (std::size_t i = 0; i + 1 < n; ++i)
    offer(i);
  while (!queue.empty()) {
    const candidate top = queue.top();
    queue.pop();
    symbol& left = word[top.at];
    if (!left.alive || left.next == none)
      continue;
    symbol& right = word[left.next];
    // A candidate whose pair has changed since it was queued is stale.
    const auto* m = merges.find(left.id, right.id);
    if (m == nullptr || m->result != top.result)
      continue;
    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (left.next != none)
      word[left.next].previous = top.at;
    if (left.previous != none)
      offer(left.previous);
    offer(top.at);
  }
  symbols.clear();
  for (std::size_t at = 0; at != none; at = word[at].next)
    symbols.push_back(word[at].id);
}

}  // namespace mstar::models::internal
