#include "transport/descriptor.hpp"

#include <limits>
#include <nlohmann/json.hpp>

#include "core/hex.hpp"
#include "core/untrusted_json.hpp"

namespace mstar::transport {

namespace {

using json = nlohmann::json;

caf::error bad_field(std::string_view field, std::string_view rule) {
  return failure(mstar::errc::invalid_argument,
                 "arena descriptor: field '" + std::string{field} + "' " + std::string{rule});
}

// The field `name` of `object` as T, or an error naming it.
template <class T>
caf::expected<T> field(const json& object, std::string_view name) {
  const auto it = object.find(name);
  if (it == object.end())
    return bad_field(name, "is missing");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return bad_field(name, "has the wrong type");
  }
}

// The first error among `xs`, or none when all hold values.
template <class... Ts>
caf::error first_error(const caf::expected<Ts>&... xs) {
  caf::error found;
  const auto take = [&](const auto& x) {
    if (!found && !x)
      found = x.error();
  };
  (take(xs), ...);
  return found;
}

caf::expected<byte_buffer> hex_field(const json& object, std::string_view name) {
  auto text = field<std::string>(object, name);
  if (!text)
    return text.error();
  auto bytes = from_hex(*text);
  if (!bytes)
    return bad_field(name, "is not hex: " + bytes.error().message());
  return std::move(*bytes);
}

caf::expected<arena_layout> layout_from(const json& object) {
  arena_layout layout;
  auto kind = field<int>(object, "kind");
  auto name = field<std::string>(object, "name");
  auto layers = field<std::uint64_t>(object, "num_layers");
  auto units = field<std::uint64_t>(object, "num_units");
  auto unit_bytes = field<std::uint64_t>(object, "unit_bytes");
  if (auto e = first_error(kind, name, layers, units, unit_bytes))
    return e;
  if (*kind != static_cast<int>(arena_kind::kv_pages) &&
      *kind != static_cast<int>(arena_kind::recurrent_block)) {
    return bad_field("layout.kind", "is not 1 (kv_pages) or 2 (recurrent_block)");
  }
  layout.kind = static_cast<arena_kind>(*kind);
  layout.name = std::move(*name);
  layout.num_layers = *layers;
  layout.num_units = *units;
  layout.unit_bytes = *unit_bytes;
  if (auto ok = layout.validate(); !ok)
    return ok.error();
  return layout;
}

// The optional "cuda_ipc" object; absent is fine (older owners, host arenas).
caf::expected<std::optional<cuda_ipc_export>> cuda_ipc_from(const json& object) {
  const auto it = object.find("cuda_ipc");
  if (it == object.end() || it->is_null())
    return std::optional<cuda_ipc_export>{};
  if (!it->is_object())
    return bad_field("cuda_ipc", "is not an object");
  auto handle = hex_field(*it, "handle");
  auto offset = field<std::uint64_t>(*it, "offset");
  auto bus = field<std::string>(*it, "pci_bus_id");
  if (auto e = first_error(handle, offset, bus))
    return e;
  if (handle->size() != cuda_ipc_handle_bytes)
    return bad_field("cuda_ipc.handle",
                     "is not " + std::to_string(cuda_ipc_handle_bytes) + " bytes");
  if (bus->empty())
    return bad_field("cuda_ipc.pci_bus_id", "is empty");
  return std::optional<cuda_ipc_export>{
      cuda_ipc_export{std::move(*handle), *offset, std::move(*bus)}};
}

}  // namespace

arena_layout arena_layout::kv(const kernels::kv_geometry& geometry, std::uint64_t num_pages) {
  return arena_layout{arena_kind::kv_pages, "kv", 1, num_pages, geometry.page_bytes()};
}

arena_layout arena_layout::recurrent(std::string name, std::uint64_t num_layers,
                                     std::uint64_t max_slots, std::uint64_t slot_bytes) {
  return arena_layout{arena_kind::recurrent_block, std::move(name), num_layers, max_slots,
                      slot_bytes};
}

caf::expected<void> arena_layout::validate() const {
  const auto bad = [&](std::string_view what) {
    return failure(mstar::errc::invalid_argument,
                   "arena layout '" + name + "': " + std::string{what});
  };
  if (num_layers == 0 || num_units == 0 || unit_bytes == 0)
    return bad("num_layers, num_units and unit_bytes must be > 0");
  if (kind == arena_kind::kv_pages && num_layers != 1)
    return bad("a KV page arena has num_layers 1 (a page holds every layer)");
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  if (num_units > max / unit_bytes || num_layers > max / (num_units * unit_bytes))
    return bad("size overflows 64 bits");
  return {};
}

std::string to_json(const arena_descriptor& d) {
  const json layout{{"kind", static_cast<int>(d.layout.kind)},
                    {"name", d.layout.name},
                    {"num_layers", d.layout.num_layers},
                    {"num_units", d.layout.num_units},
                    {"unit_bytes", d.layout.unit_bytes}};
  json out{{"owner", d.owner},
           {"worker_address", to_hex(d.worker_address)},
           {"packed_key", to_hex(d.packed_key)},
           {"base", d.base},
           {"size", d.size},
           {"layout", layout},
           {"memory", d.memory == memory_kind::cuda ? "cuda" : "host"},
           {"host", d.host},
           {"shm_name", d.shm_name},
           {"pid", d.pid}};
  if (d.cuda_ipc) {
    out["cuda_ipc"] = json{{"handle", to_hex(d.cuda_ipc->handle)},
                           {"offset", d.cuda_ipc->offset},
                           {"pci_bus_id", d.cuda_ipc->pci_bus_id}};
  }
  return out.dump();
}

caf::expected<arena_descriptor> descriptor_from_json(std::string_view text) {
  auto parsed = mstar::parse_untrusted_json<json>(text, "arena descriptor");
  if (!parsed)
    return failure(mstar::errc::parse_error, parsed.error().message());
  const json& object = *parsed;
  if (!object.is_object())
    return failure(mstar::errc::parse_error, "arena descriptor: not a JSON object");
  arena_descriptor d;
  auto owner = field<std::string>(object, "owner");
  auto address = hex_field(object, "worker_address");
  auto key = hex_field(object, "packed_key");
  auto base = field<std::uint64_t>(object, "base");
  auto size = field<std::uint64_t>(object, "size");
  auto layout_json = field<json>(object, "layout");
  auto memory = field<std::string>(object, "memory");
  auto host = field<std::string>(object, "host");
  auto shm = field<std::string>(object, "shm_name");
  auto pid = field<std::int64_t>(object, "pid");
  if (auto e = first_error(owner, address, key, base, size, layout_json, memory, host, shm, pid))
    return e;
  auto layout = layout_from(*layout_json);
  if (!layout)
    return layout.error();
  if (*memory != "host" && *memory != "cuda")
    return bad_field("memory", "is not 'host' or 'cuda'");
  if (layout->bytes() > *size)
    return bad_field("layout", "describes more bytes than 'size' registers");
  if (address->empty())
    return bad_field("worker_address", "is empty");
  auto ipc = cuda_ipc_from(object);
  if (!ipc)
    return ipc.error();
  if (*ipc && *memory != "cuda")
    return bad_field("cuda_ipc", "is set on a host arena ('memory' is not 'cuda')");
  d.owner = std::move(*owner);
  d.worker_address = std::move(*address);
  d.packed_key = std::move(*key);
  d.base = *base;
  d.size = *size;
  d.layout = std::move(*layout);
  d.memory = *memory == "cuda" ? memory_kind::cuda : memory_kind::host;
  d.host = std::move(*host);
  d.shm_name = std::move(*shm);
  d.pid = *pid;
  d.cuda_ipc = std::move(*ipc);
  return d;
}

}  // namespace mstar::transport
