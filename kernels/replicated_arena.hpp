#pragma once

// One pool's bytes kept once per tensor-parallel rank. The ranks of a
// tensor-parallel model share one scheduler and one pool bookkeeping (the
// conductor broadcasts the step; no rank decides alone), but each rank's
// forward reads and writes its own part of the KV heads and recurrent state,
// in its own memory (its device). So a pool made for such a model owns a
// `replicated_arena`: N members of equal size, member r from rank r's
// factory. Every byte movement the pool asks for (copy, zero, write) is
// applied to each member in rank order: the layouts agree, so the same page
// and slot ids mean the same place in every member. Rank r's model binds
// its forward to `member(r).data()`.
//
// `data()`, `kind()` and `read` are member 0's. Packing and unpacking (the
// P/D transfer of pages and slots) would need every member's bytes to
// travel; they are refused for now: the arena records the sticky error
// "transfer of tensor-parallel pools is not supported yet" and leaves every
// member as it was.

#include <memory>
#include <vector>

#include "kernels/arena.hpp"

namespace mstar::kernels {

class replicated_arena final : public arena {
 public:
  /// An arena over `members` (one per rank, rank 0 first, at least one, all
  /// of one size and kind), or invalid_argument naming what differs.
  [[nodiscard]] static result<std::unique_ptr<replicated_arena>> make(
      std::vector<std::unique_ptr<arena>> members);

  [[nodiscard]] int members() const noexcept { return static_cast<int>(members_.size()); }
  /// Member `rank`; out of range is a programming error (member 0 then).
  [[nodiscard]] arena& member(int rank) override;

  [[nodiscard]] memory_kind kind() const noexcept override { return members_[0]->kind(); }
  [[nodiscard]] std::byte* data() noexcept override { return members_[0]->data(); }
  [[nodiscard]] const std::byte* data() const noexcept override { return members_[0]->data(); }
  [[nodiscard]] std::size_t size() const noexcept override { return members_[0]->size(); }

  void copy_pages(const kv_geometry& geometry, std::span<const std::int32_t> src,
                  std::span<const std::int32_t> dst) override;
  void copy_slots(const kv_geometry& geometry, std::int32_t src, std::int32_t dst,
                  std::size_t slots) override;
  void zero_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages) override;
  void pack_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages,
                  std::byte* staging) override;
  void unpack_pages(const kv_geometry& geometry, std::span<const std::int32_t> pages,
                    const std::byte* staging) override;

  void copy_slot(const slot_block& block, std::int32_t src, std::int32_t dst) override;
  void zero_slot(const slot_block& block, std::int32_t slot) override;
  void pack_slot(const slot_block& block, std::int32_t slot, std::byte* staging) override;
  void unpack_slot(const slot_block& block, std::int32_t slot, const std::byte* staging) override;

  /// Member 0's bytes (every member holds the same layout).
  [[nodiscard]] result<void> read(std::size_t offset, std::span<std::byte> out) const override;
  /// Into every member, in rank order; the first failure, naming its member.
  [[nodiscard]] result<void> write(std::size_t offset, std::span<const std::byte> in) override;
  /// The refused transfer's error, else the first member's error in rank
  /// order, naming the member.
  [[nodiscard]] result<void> status() const override;
  [[nodiscard]] result<void> synchronize() override;

 private:
  explicit replicated_arena(std::vector<std::unique_ptr<arena>> members)
      : members_(std::move(members)) {}
  void refuse_transfer();

  std::vector<std::unique_ptr<arena>> members_;
  bool transfer_refused_ = false;
};

/// A factory whose arenas are replicated over one arena per entry of
/// `members` (rank r's pool memory; empty entries mean host memory).
[[nodiscard]] arena_factory replicated_arena_factory(std::vector<arena_factory> members);

}  // namespace mstar::kernels
