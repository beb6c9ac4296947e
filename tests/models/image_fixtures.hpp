#pragma once

// Shared by the image tests: the files of tests/fixtures/images (written by
// make_qwen_images.py from transformers 5.24) and ways to look at them.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "models/safetensors.hpp"
#include "tests/models/temp_folder.hpp"
#include "tests/support/fixtures.hpp"

namespace mstar::test {

/// tests/fixtures/images.
inline std::string images_dir() {
  return fixtures_dir() + "/images";
}

/// The bytes of tests/fixtures/images/<name>.
inline std::string image_file(const std::string& name) {
  return read_bytes(images_dir() + "/" + name);
}

/// `text` as the byte span the decoder takes.
inline std::span<const std::byte> as_bytes(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

/// tests/fixtures/images/expected.safetensors, opened once.
inline const result<models::safetensors_file>& expected_image_tensors() {
  static const auto file = models::safetensors_file::open(images_dir() + "/expected.safetensors");
  return file;
}

/// tests/fixtures/images/expected.json, parsed once.
inline const nlohmann::json& expected_image_cases() {
  static const nlohmann::json doc = load_fixture_json("images/expected.json");
  return doc;
}

/// The raw bytes of tensor `name` of `file`, empty when absent.
inline std::span<const std::byte> tensor_bytes(const models::safetensors_file& file,
                                               std::string_view name) {
  const models::tensor_view* view = file.find(name);
  return view == nullptr ? std::span<const std::byte>{} : view->bytes;
}

}  // namespace mstar::test
