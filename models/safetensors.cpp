#include "models/safetensors.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/checked.hpp"
#include "core/untrusted_json.hpp"
#include "models/internal/mapped_file.hpp"

namespace mstar::models {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is read in place");

using json = nlohmann::json;

struct dtype_info {
  std::string_view name;
  std::uint64_t size;
  std::optional<mstar::dtype> type;
};

// Every dtype the format defines with a whole-byte element, so bounds checks work for
// tensors we will not compute with too.
constexpr std::array<dtype_info, 15> known_dtypes{{
    {"F32", 4, mstar::dtype::float32},
    {"BF16", 2, mstar::dtype::bfloat16},
    {"F16", 2, mstar::dtype::float16},
    {"F64", 8, std::nullopt},
    {"I64", 8, std::nullopt},
    {"U64", 8, std::nullopt},
    {"I32", 4, std::nullopt},
    {"U32", 4, std::nullopt},
    {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},
    {"I8", 1, std::nullopt},
    {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt},
    {"F8_E4M3", 1, std::nullopt},
    {"F8_E5M2", 1, std::nullopt},
}};

const dtype_info* find_dtype(std::string_view name) {
  for (const auto& info : known_dtypes) {
    if (info.name == name)
      return &info;
  }
  return nullptr;
}

// The format's own bound on the JSON header (the reference reader's limit).
constexpr std::uint64_t max_header_bytes = 100'000'000;

// A parsed header entry before its bytes are attached.
struct entry {
  tensor_view view;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// Context for messages: "<file>: tensor '<name>': <reason>".
struct reporter {
  std::string file;

  error fail(std::string_view reason) const {
    return make_error(errc::parse_error, fmt::format("{}: {}", file, reason));
  }
  error fail(std::string_view tensor, std::string_view reason) const {
    return make_error(errc::parse_error,
                      fmt::format("{}: tensor '{}': {}", file, text_excerpt(tensor), reason));
  }
};

result<std::vector<std::int64_t>> parse_shape(const reporter& r, const std::string& name,
                                              const json& shape) {
  if (!shape.is_array())
    return r.fail(name, "'shape' is not an array");
  std::vector<std::int64_t> dims;
  for (const auto& dim : shape) {
    if (!dim.is_number_integer() || dim.get<std::int64_t>() < 0) {
      return r.fail(
          name, fmt::format("'shape' entry {} is not a non-negative integer", json_excerpt(dim)));
    }
    dims.push_back(dim.get<std::int64_t>());
  }
  return dims;
}

result<entry> parse_entry(const reporter& r, const std::string& name, const json& value,
                          std::uint64_t data_size) {
  if (!value.is_object())
    return r.fail(name, "entry is not a JSON object");
  const auto dtype_it = value.find("dtype");
  const auto shape_it = value.find("shape");
  const auto offsets_it = value.find("data_offsets");
  if (dtype_it == value.end() || !dtype_it->is_string())
    return r.fail(name, "no string 'dtype'");
  if (shape_it == value.end())
    return r.fail(name, "no 'shape'");
  if (offsets_it == value.end())
    return r.fail(name, "no 'data_offsets'");
  const auto dtype_name = dtype_it->get<std::string>();
  const dtype_info* info = find_dtype(dtype_name);
  if (info == nullptr)
    return r.fail(name, fmt::format("unknown dtype '{}'", text_excerpt(dtype_name)));
  auto shape = parse_shape(r, name, *shape_it);
  if (!shape)
    return shape.error();
  const json& offsets = *offsets_it;
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return r.fail(name, fmt::format("'data_offsets' {} is not two non-negative integers",
                                    json_excerpt(offsets)));
  }
  entry out;
  out.begin = offsets[0].get<std::uint64_t>();
  out.end = offsets[1].get<std::uint64_t>();
  if (out.begin > out.end) {
    return r.fail(name,
                  fmt::format("data_offsets [{}, {}] end before they begin", out.begin, out.end));
  }
  if (out.end > data_size) {
    return r.fail(name, fmt::format("data_offsets [{}, {}] run past the {}-byte data section",
                                    out.begin, out.end, data_size));
  }
  std::optional<std::uint64_t> bytes = info->size;
  for (const std::int64_t dim : *shape) {
    bytes = bytes ? checked_mul(*bytes, static_cast<std::uint64_t>(dim)) : std::nullopt;
  }
  if (!bytes || *bytes != out.end - out.begin) {
    return r.fail(name, fmt::format("shape and dtype {} need {} bytes but data_offsets [{}, {}] "
                                    "hold {}",
                                    dtype_name, bytes ? fmt::to_string(*bytes) : "overflowing",
                                    out.begin, out.end, out.end - out.begin));
  }
  out.view.name = name;
  out.view.dtype_name = dtype_name;
  out.view.type = info->type;
  out.view.shape = std::move(*shape);
  return out;
}

result<std::map<std::string, std::string>> parse_metadata(const reporter& r, const json& value) {
  if (!value.is_object())
    return r.fail("'__metadata__' is not a JSON object");
  std::map<std::string, std::string> out;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return r.fail(
          fmt::format("'__metadata__' value for '{}' is not a string", text_excerpt(key)));
    }
    out.emplace(key, item.get<std::string>());
  }
  return out;
}

// Parses the header text within the depth limit, refusing a key that appears
// twice in one object (nlohmann would keep the last).
result<json> parse_header_json(const reporter& r, std::string_view text) {
  auto header = parse_untrusted_json<json>(text, "header", {.allow_duplicate_keys = false});
  if (!header)
    return r.fail(header.error().message());
  if (!header->is_object())
    return r.fail("header is not a JSON object");
  return header;
}

// No two tensors with bytes may share any, and together they cover the data
// section exactly, as the format requires: a header length that is off by a
// byte shifts every tensor and shows here, not as NaN logits later.
result<void> check_no_overlap(const reporter& r, std::vector<const entry*> entries,
                              std::uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const entry* a, const entry* b) {
    return std::pair{a->begin, a->end} < std::pair{b->begin, b->end};
  });
  const entry* previous = nullptr;
  for (const entry* e : entries) {
    if (e->begin == e->end)
      continue;
    if (previous != nullptr && e->begin < previous->end) {
      return r.fail(
          e->view.name,
          fmt::format("data_offsets [{}, {}] overlap tensor '{}' at [{}, {}]", e->begin, e->end,
                      text_excerpt(previous->view.name), previous->begin, previous->end));
    }
    if (e->begin > (previous == nullptr ? 0 : previous->end)) {
      return r.fail(
          fmt::format("bytes [{}, {}) of the data section belong to no tensor (is the "
                      "header length right?)",
                      previous == nullptr ? 0 : previous->end, e->begin));
    }
    previous = e;
  }
  const std::uint64_t covered = previous == nullptr ? 0 : previous->end;
  if (covered != data_size) {
    return r.fail(
        fmt::format("the tensors cover {} bytes of the {}-byte data section (is the "
                    "header length right?)",
                    covered, data_size));
  }
  return {};
}

}  // namespace

std::int64_t tensor_view::numel() const noexcept {
  std::int64_t n = 1;
  for (const std::int64_t dim : shape)
    n *= dim;
  return n;
}

safetensors_file::safetensors_file(safetensors_file&&) noexcept = default;
safetensors_file& safetensors_file::operator=(safetensors_file&&) noexcept = default;
safetensors_file::~safetensors_file() = default;

result<safetensors_file> safetensors_file::open(const std::filesystem::path& path) {
  auto mapped = internal::mapped_file::open(path);
  if (!mapped)
    return mapped.error();
  const reporter r{path.string()};
  const std::span<const std::byte> bytes = mapped->bytes();
  if (bytes.size() < 8) {
    return r.fail(
        fmt::format("file is {} bytes, shorter than the 8-byte header length", bytes.size()));
  }
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > bytes.size() - 8) {
    return r.fail(fmt::format("header length {} runs past the end of the {}-byte file", header_size,
                              bytes.size()));
  }
  if (header_size > max_header_bytes) {
    return r.fail(
        fmt::format("header length {} is more than the {} bytes a safetensors header "
                    "may have",
                    header_size, max_header_bytes));
  }
  const auto header_text = std::string_view{reinterpret_cast<const char*>(bytes.data() + 8),
                                            static_cast<std::size_t>(header_size)};
  auto header = parse_header_json(r, header_text);
  if (!header)
    return header.error();
  const std::span<const std::byte> data = bytes.subspan(8 + header_size);

  safetensors_file out;
  std::vector<entry> entries;
  for (const auto& [name, value] : header->items()) {
    if (name == "__metadata__") {
      auto metadata = parse_metadata(r, value);
      if (!metadata)
        return metadata.error();
      out.metadata_ = std::move(*metadata);
      continue;
    }
    auto parsed = parse_entry(r, name, value, data.size());
    if (!parsed)
      return parsed.error();
    entries.push_back(std::move(*parsed));
  }
  std::vector<const entry*> pointers;
  for (const auto& e : entries)
    pointers.push_back(&e);
  if (auto ok = check_no_overlap(r, std::move(pointers), data.size()); !ok)
    return ok.error();

  for (auto& e : entries) {
    e.view.bytes = data.subspan(e.begin, e.end - e.begin);
    std::string name = e.view.name;
    out.tensors_.emplace(std::move(name), std::move(e.view));
  }
  out.path_ = path;
  out.file_ = std::make_unique<internal::mapped_file>(std::move(*mapped));
  return out;
}

const tensor_view* safetensors_file::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

result<const tensor_view*> safetensors_file::get(std::string_view name) const {
  const tensor_view* view = find(name);
  if (view == nullptr) {
    return make_error(errc::not_found,
                      fmt::format("{}: no tensor named '{}'", path_.string(), name));
  }
  if (!view->type) {
    return make_error(errc::unsupported,
                      fmt::format("{}: tensor '{}': unsupported dtype {} (supported: F32, BF16, "
                                  "F16)",
                                  path_.string(), name, view->dtype_name));
  }
  return view;
}

}  // namespace mstar::models
