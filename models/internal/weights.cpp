#include "models/internal/weights.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <sstream>

#include "resources/kv/keys.hpp"

namespace mstar::models::internal {

result<std::vector<float>> read_tensor(const safetensors_checkpoint& ckpt, const std::string& name,
                                       std::vector<std::int64_t> shape) {
  auto t = ckpt.get(name);
  if (!t)
    return t.error();
  if ((*t)->shape != shape) {
    return make_error(errc::invalid_argument,
                      fmt::format("{}: tensor '{}' has shape [{}], config.json implies [{}]",
                                  ckpt.folder().string(), name, fmt::join((*t)->shape, ", "),
                                  fmt::join(shape, ", ")));
  }
  return to_float32(**t);
}

std::string weights_fingerprint(std::string_view family, const std::filesystem::path& folder,
                                const safetensors_checkpoint& ckpt) {
  std::ifstream in{folder / "config.json", std::ios::binary};
  std::stringstream config;
  config << in.rdbuf();
  std::string files;
  for (const auto& f : ckpt.files()) {
    std::error_code ec;
    files += fmt::format("{}:{};", f.path().filename().string(),
                         std::filesystem::file_size(f.path(), ec));
  }
  const auto d = resources::fingerprint(family, config.str(), files);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace mstar::models::internal
