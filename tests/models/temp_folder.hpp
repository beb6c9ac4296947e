#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mstar::test {

/// A fresh folder under the system temp dir, removed with everything in it
/// when the object dies.
class temp_folder {
 public:
  temp_folder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mstar-models-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  temp_folder(const temp_folder&) = delete;
  temp_folder& operator=(const temp_folder&) = delete;
  ~temp_folder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  /// The folder.
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

  /// Writes `bytes` to `name` inside the folder and returns its path.
  std::filesystem::path write(const std::string& name, std::string_view bytes) const {
    const auto file = path_ / name;
    std::ofstream out{file, std::ios::binary};
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return file;
  }

 private:
  std::filesystem::path path_;
};

/// The bytes of a safetensors file: the 8-byte little-endian length of
/// `header`, `header`, then `data`.
inline std::string safetensors_bytes(std::string_view header, std::string_view data = {}) {
  std::string out(8, '\0');
  std::uint64_t size = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((size >> (8 * i)) & 0xFF);
  out.append(header).append(data);
  return out;
}

/// The bytes of a file as a string.
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace mstar::test
