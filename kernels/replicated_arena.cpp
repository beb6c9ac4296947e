// The replicated arena: every byte movement applied to each rank's member.
#include "kernels/replicated_arena.hpp"

#include <string>

namespace mstar::kernels {
namespace {

constexpr const char* transfer_refusal = "transfer of tensor-parallel pools is not supported yet";

// `failed` with the member that met it named in its message.
error naming_member(int rank, const error& failed) {
  return make_error(failed.code(),
                    "replicated arena member " + std::to_string(rank) + ": " + failed.message());
}

}  // namespace

result<std::unique_ptr<replicated_arena>> replicated_arena::make(
    std::vector<std::unique_ptr<arena>> members) {
  if (members.empty())
    return make_error(errc::invalid_argument, "replicated arena: no members");
  for (std::size_t r = 0; r < members.size(); ++r) {
    if (members[r] == nullptr) {
      return make_error(errc::invalid_argument,
                        "replicated arena: member " + std::to_string(r) + " is null");
    }
    if (members[r]->size() != members[0]->size()) {
      return make_error(errc::invalid_argument, "replicated arena: member " + std::to_string(r) +
                                                    " holds " + std::to_string(members[r]->size()) +
                                                    " bytes, member 0 " +
                                                    std::to_string(members[0]->size()));
    }
    if (members[r]->kind() != members[0]->kind()) {
      return make_error(errc::invalid_argument, "replicated arena: member " + std::to_string(r) +
                                                    " is in another kind of memory than member 0");
    }
  }
  return std::unique_ptr<replicated_arena>(new replicated_arena(std::move(members)));
}

arena& replicated_arena::member(int rank) {
  if (rank < 0 || rank >= members())
    return *members_[0];
  return *members_[static_cast<std::size_t>(rank)];
}

void replicated_arena::copy_pages(const kv_geometry& geometry, std::span<const std::int32_t> src,
                                  std::span<const std::int32_t> dst) {
  for (auto& m : members_)
    m->copy_pages(geometry, src, dst);
}

void replicated_arena::copy_slots(const kv_geometry& geometry, std::int32_t src, std::int32_t dst,
                                  std::size_t slots) {
  for (auto& m : members_)
    m->copy_slots(geometry, src, dst, slots);
}

void replicated_arena::zero_pages(const kv_geometry& geometry,
                                  std::span<const std::int32_t> pages) {
  for (auto& m : members_)
    m->zero_pages(geometry, pages);
}

// Packing one member's bytes would send a part of the state as if it were
// the whole; the sticky error fails the transfer instead, touching nothing.
void replicated_arena::refuse_transfer() {
  transfer_refused_ = true;
}

void replicated_arena::pack_pages(const kv_geometry&, std::span<const std::int32_t>, std::byte*) {
  refuse_transfer();
}

void replicated_arena::unpack_pages(const kv_geometry&, std::span<const std::int32_t>,
                                    const std::byte*) {
  refuse_transfer();
}

void replicated_arena::copy_slot(const slot_block& block, std::int32_t src, std::int32_t dst) {
  for (auto& m : members_)
    m->copy_slot(block, src, dst);
}

void replicated_arena::zero_slot(const slot_block& block, std::int32_t slot) {
  for (auto& m : members_)
    m->zero_slot(block, slot);
}

void replicated_arena::pack_slot(const slot_block&, std::int32_t, std::byte*) {
  refuse_transfer();
}

void replicated_arena::unpack_slot(const slot_block&, std::int32_t, const std::byte*) {
  refuse_transfer();
}

result<void> replicated_arena::read(std::size_t offset, std::span<std::byte> out) const {
  if (auto ok = members_[0]->read(offset, out); !ok)
    return naming_member(0, ok.error());
  return {};
}

result<void> replicated_arena::write(std::size_t offset, std::span<const std::byte> in) {
  for (std::size_t r = 0; r < members_.size(); ++r) {
    if (auto ok = members_[r]->write(offset, in); !ok)
      return naming_member(static_cast<int>(r), ok.error());
  }
  return {};
}

result<void> replicated_arena::status() const {
  if (transfer_refused_)
    return make_error(errc::unsupported, transfer_refusal);
  for (std::size_t r = 0; r < members_.size(); ++r) {
    if (auto ok = members_[r]->status(); !ok)
      return naming_member(static_cast<int>(r), ok.error());
  }
  return {};
}

result<void> replicated_arena::synchronize() {
  // Every member waits, even after one failed: none keeps work queued.
  result<void> first;
  for (std::size_t r = 0; r < members_.size(); ++r) {
    if (auto ok = members_[r]->synchronize(); !ok && first)
      first = naming_member(static_cast<int>(r), ok.error());
  }
  if (transfer_refused_)
    return make_error(errc::unsupported, transfer_refusal);
  return first;
}

arena_factory replicated_arena_factory(std::vector<arena_factory> members) {
  return [members = std::move(members)](std::size_t bytes) -> result<std::unique_ptr<arena>> {
    std::vector<std::unique_ptr<arena>> made;
    made.reserve(members.size());
    for (std::size_t r = 0; r < members.size(); ++r) {
      auto a = make_arena(members[r], bytes);
      if (!a)
        return naming_member(static_cast<int>(r), a.error());
      made.push_back(std::move(*a));
    }
    auto replicated = replicated_arena::make(std::move(made));
    if (!replicated)
      return replicated.error();
    return std::unique_ptr<arena>(std::move(*replicated));
  };
}

}  // namespace mstar::kernels
