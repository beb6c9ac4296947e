#pragma once

// Writes a float32 safetensors file (the header JSON, then the tensors'
// bytes in the order added), for tests that make a checkpoint of a shape no
// committed fixture has.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace mstar::test {

class safetensors_writer {
 public:
  void add(const std::string& name, std::vector<std::int64_t> shape, std::vector<float> values) {
    tensors_.emplace_back(name, std::pair{std::move(shape), std::move(values)});
  }

  /// Writes `path`; false when the file could not be written.
  [[nodiscard]] bool write(const std::filesystem::path& path) const {
    nlohmann::json header = nlohmann::json::object();
    std::size_t offset = 0;
    for (const auto& [name, tensor] : tensors_) {
      const std::size_t bytes = tensor.second.size() * sizeof(float);
      header[name] = {
          {"dtype", "F32"}, {"shape", tensor.first}, {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
    std::ofstream out(path, std::ios::binary);
    const auto n = static_cast<std::uint64_t>(text.size());
    char len[8];
    for (int i = 0; i < 8; ++i)
      len[i] = static_cast<char>((n >> (8 * i)) & 0xFF);  // little-endian
    out.write(len, 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, tensor] : tensors_) {
      out.write(reinterpret_cast<const char*>(tensor.second.data()),
                static_cast<std::streamsize>(tensor.second.size() * sizeof(float)));
    }
    return static_cast<bool>(out);
  }

 private:
  std::vector<std::pair<std::string, std::pair<std::vector<std::int64_t>, std::vector<float>>>>
      tensors_;
};

}  // namespace mstar::test
