#include "kernels/shm_arena.hpp"

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <utility>

namespace mstar::kernels {

namespace bip = boost::interprocess;

struct shm_arena::mapping {
  bip::mapped_region region;
};

namespace {

constexpr std::size_t max_name_chars = 200;

bool valid_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

error os_error(const std::string& name, std::string_view action,
               const bip::interprocess_exception& e) {
  const errc code = e.get_error_code() == bip::not_found_error ? errc::not_found : errc::io_error;
  return make_error(code, "shm segment '" + name + "': " + std::string{action} + ": " + e.what());
}

}  // namespace

result<std::string> shm_arena::canonical_name(std::string_view name) {
  const std::string_view bare = name.starts_with('/') ? name.substr(1) : name;
  const auto fail = [&](std::string_view rule) {
    return make_error(errc::invalid_argument,
                      "shm segment name '" + std::string{name} + "': " + std::string{rule});
  };
  if (bare.empty())
    return fail("is empty");
  if (bare.size() > max_name_chars)
    return fail("is longer than 200 characters");
  if (bare == "." || bare == "..")
    return fail("is '.' or '..'");
  for (const char c : bare) {
    if (!valid_name_char(c))
      return fail("may only hold [A-Za-z0-9._-] after the leading '/'");
  }
  // '/', not "/": GCC 12 under -O3 flags a one-character literal + std::string&&
  // (bogus -Wrestrict, GCC PR 105329).
  return '/' + std::string{bare};
}

result<shm_arena> shm_arena::create(std::string_view name, std::size_t bytes) {
  auto canonical = canonical_name(name);
  if (!canonical)
    return canonical.error();
  const std::string& id = *canonical;
  if (bytes == 0) {
    return make_error(errc::invalid_argument, "shm segment '" + id + "': bytes must be > 0");
  }
  std::unique_ptr<mapping> map;
  try {
    bip::shared_memory_object object{bip::create_only, id.c_str(), bip::read_write};
    try {
      object.truncate(static_cast<bip::offset_t>(bytes));
      // Reserve the pages now: a tmpfs too small for the segment (a
      // container's 64 MB /dev/shm) is an error here, not a SIGBUS later.
      if (const int rc =
              ::posix_fallocate(object.get_mapping_handle().handle, 0, static_cast<off_t>(bytes));
          rc != 0) {
        bip::shared_memory_object::remove(id.c_str());
        return make_error(errc::out_of_range,
                          fmt::format("shm segment '{}': no room for {} bytes in /dev/shm ({})", id,
                                      bytes, std::strerror(rc)));
      }
      map = std::make_unique<mapping>(mapping{bip::mapped_region{object, bip::read_write}});
    } catch (const bip::interprocess_exception& e) {
      bip::shared_memory_object::remove(id.c_str());
      return os_error(id, "sizing or mapping", e);
    }
  } catch (const bip::interprocess_exception& e) {
    if (e.get_error_code() == bip::already_exists_error) {
      return make_error(errc::invalid_argument, "shm segment '" + id + "' already exists");
    }
    return os_error(id, "creating", e);
  }
  // ftruncate already reads as zeros; writing them faults every page in now,
  // on the set-up path, instead of on the first transfer.
  std::memset(map->region.get_address(), 0, bytes);
  return shm_arena{std::move(map), id, true};
}

result<shm_arena> shm_arena::open(std::string_view name) {
  auto canonical = canonical_name(name);
  if (!canonical)
    return canonical.error();
  const std::string& id = *canonical;
  try {
    bip::shared_memory_object object{bip::open_only, id.c_str(), bip::read_write};
    bip::offset_t bytes = 0;
    if (!object.get_size(bytes) || bytes <= 0) {
      return make_error(errc::not_found, "shm segment '" + id + "' has no size yet");
    }
    // MAP_POPULATE: the page tables of the whole mapping are filled now, so
    // a peer's first copies out of it do not take a minor fault per 4 KiB
    // (about 0.3 ms per MB measured on a pull: half its time).
    auto map = std::make_unique<mapping>(
        mapping{bip::mapped_region{object, bip::read_write, 0, 0, nullptr, MAP_POPULATE}});
    return shm_arena{std::move(map), id, false};
  } catch (const bip::interprocess_exception& e) {
    return os_error(id, "opening", e);
  }
}

bool shm_arena::remove(std::string_view name) {
  auto canonical = canonical_name(name);
  return canonical && bip::shared_memory_object::remove(canonical->c_str());
}

shm_arena::shm_arena(std::unique_ptr<mapping> region, std::string name, bool owner) noexcept
    : region_(std::move(region)),
      data_(static_cast<std::byte*>(region_->region.get_address())),
      size_(region_->region.get_size()),
      name_(std::move(name)),
      owner_(owner) {}

shm_arena::shm_arena(shm_arena&& other) noexcept
    : region_(std::move(other.region_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      name_(std::move(other.name_)),
      owner_(std::exchange(other.owner_, false)) {}

shm_arena& shm_arena::operator=(shm_arena&& other) noexcept {
  if (this != &other) {
    release();
    region_ = std::move(other.region_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    name_ = std::move(other.name_);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

shm_arena::~shm_arena() {
  release();
}

void shm_arena::release() noexcept {
  // Unmap first, then drop the name: a peer that opens between the two steps
  // still finds a whole segment.
  region_.reset();
  if (owner_)
    bip::shared_memory_object::remove(name_.c_str());
  data_ = nullptr;
  size_ = 0;
  owner_ = false;
}

}  // namespace mstar::kernels
