#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "core/untrusted_json.hpp"
#include "models/internal/json_text.hpp"
#include "models/safetensors.hpp"

namespace mstar::models {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view index_name = "model.safetensors.index.json";
constexpr std::string_view single_name = "model.safetensors";

error index_error(const fs::path& index, std::string_view reason) {
  return make_error(errc::parse_error, fmt::format("{}: {}", index.string(), reason));
}

// The weight_map of an index file: tensor name -> file name inside the folder.
result<std::map<std::string, std::string>> read_weight_map(const fs::path& index) {
  auto doc = internal::load_json_file(index);
  if (!doc)
    return doc.error();
  const auto it = doc->is_object() ? doc->find("weight_map") : doc->end();
  if (it == doc->end() || !it->is_object())
    return index_error(index, "no 'weight_map' object");
  std::map<std::string, std::string> out;
  for (const auto& [tensor, file] : it->items()) {
    const bool plain = file.is_string() && !file.get<std::string>().empty() &&
                       fs::path{file.get<std::string>()}.filename() == file.get<std::string>() &&
                       file.get<std::string>() != "..";
    if (!plain) {
      return index_error(index, fmt::format("weight_map entry '{}' is {}, not a file name in "
                                            "the folder",
                                            text_excerpt(tensor), json_excerpt(file)));
    }
    out.emplace(tensor, file.get<std::string>());
  }
  return out;
}

// Every *.safetensors file directly in `folder`, sorted.
std::vector<fs::path> all_safetensors(const fs::path& folder) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator{folder, ec}) {
    if (item.is_regular_file(ec) && item.path().extension() == ".safetensors") {
      out.push_back(item.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

result<safetensors_checkpoint> safetensors_checkpoint::open(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    return make_error(errc::not_found, fmt::format("{}: not a directory", folder.string()));
  }
  safetensors_checkpoint out;
  out.folder_ = folder;
  std::map<std::string, std::string> weight_map;
  std::vector<fs::path> paths;
  if (fs::exists(folder / index_name, ec)) {
    auto map = read_weight_map(folder / index_name);
    if (!map)
      return map.error();
    weight_map = std::move(*map);
    std::set<std::string> names;
    for (const auto& [tensor, file] : weight_map)
      names.insert(file);
    for (const auto& name : names)
      paths.push_back(folder / name);
  } else if (fs::exists(folder / single_name, ec)) {
    paths.push_back(folder / single_name);
  } else {
    paths = all_safetensors(folder);
  }
  if (paths.empty()) {
    return make_error(errc::not_found, fmt::format("{}: no {}, {} or *.safetensors file",
                                                   folder.string(), index_name, single_name));
  }
  for (const auto& path : paths) {
    auto file = safetensors_file::open(path);
    if (!file)
      return file.error();
    out.files_.push_back(std::move(*file));
  }
  for (const auto& file : out.files_) {
    for (const auto& [name, view] : file.tensors()) {
      const auto [it, fresh] = out.index_.emplace(name, &file);
      if (!fresh) {
        return make_error(
            errc::parse_error,
            fmt::format("{}: tensor '{}' is in both {} and {}", folder.string(), text_excerpt(name),
                        it->second->path().filename().string(), file.path().filename().string()));
      }
    }
  }
  for (const auto& [tensor, file] : weight_map) {
    const auto it = out.index_.find(tensor);
    if (it == out.index_.end() || it->second->path().filename() != file) {
      return index_error(folder / index_name,
                         fmt::format("tensor '{}' is mapped to {} but is not in it",
                                     text_excerpt(tensor), text_excerpt(file)));
    }
  }
  return out;
}

const tensor_view* safetensors_checkpoint::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second->find(name);
}

result<const tensor_view*> safetensors_checkpoint::get(std::string_view name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) {
    return make_error(errc::not_found,
                      fmt::format("{}: no tensor named '{}'", folder_.string(), name));
  }
  return it->second->get(name);
}

std::vector<std::string> safetensors_checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, file] : index_)
    out.push_back(name);
  return out;
}

}  // namespace mstar::models
