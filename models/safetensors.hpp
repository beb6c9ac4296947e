#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/result.hpp"

namespace mstar::models {

namespace internal {
class mapped_file;
}

/// One tensor of a safetensors file: its element type, shape and bytes, borrowed
/// from the mapped file that produced it (valid while that file lives).
///
/// The file format is little-endian; so is every host this project builds for.
/// Bytes carry no alignment promise, so readers copy rather than cast.
struct tensor_view {
  std::string name;                  ///< the header's key
  std::string dtype_name;            ///< the header's dtype string ("F32", "I64", ...)
  std::optional<mstar::dtype> type;  ///< set for F32, BF16 and F16; empty for the rest
  std::vector<std::int64_t> shape;   ///< row-major; empty for a scalar
  std::span<const std::byte> bytes;  ///< exactly numel() * element size bytes

  /// Product of the shape (1 for a scalar).
  [[nodiscard]] std::int64_t numel() const noexcept;
};

/// One `.safetensors` file, mapped read-only, its header fully validated.
///
/// `open` checks everything a reader could trip on: the 8-byte header length
/// against the file size, the header being a JSON object without duplicate
/// keys, each entry's dtype, shape and `data_offsets` (in range, begin <= end,
/// not overlapping another tensor, and exactly shape x element size bytes).
/// Any failure is an error naming the file, the tensor and the reason. Tensors
/// of a known dtype this runtime cannot compute in (I64, F64, ...) are listed,
/// and refused by `get`. Move-only; views stay valid across moves. The file
/// must not be truncated by someone else while mapped (that would fault).
class safetensors_file {
 public:
  /// Maps and validates `path`.
  [[nodiscard]] static result<safetensors_file> open(const std::filesystem::path& path);

  /// Moves keep every view valid: the mapping itself does not move.
  safetensors_file(safetensors_file&&) noexcept;
  /// As the move constructor; the old mapping is released.
  safetensors_file& operator=(safetensors_file&&) noexcept;
  /// Unmaps the file; views into it dangle afterwards.
  ~safetensors_file();

  /// The tensor called `name`, or nullptr; any dtype.
  [[nodiscard]] const tensor_view* find(std::string_view name) const;

  /// The tensor called `name`: not_found when absent, unsupported when its dtype
  /// is not F32, BF16 or F16. Messages name the file and the tensor.
  [[nodiscard]] result<const tensor_view*> get(std::string_view name) const;

  /// Every tensor, by name.
  [[nodiscard]] const std::map<std::string, tensor_view, std::less<>>& tensors() const noexcept {
    return tensors_;
  }

  /// The header's optional `__metadata__` string map.
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const noexcept {
    return metadata_;
  }

  /// The path the file was opened from.
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  safetensors_file() = default;

  std::filesystem::path path_;
  std::unique_ptr<internal::mapped_file> file_;
  std::map<std::string, tensor_view, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// The weights of a checkpoint folder, possibly spread over several files.
///
/// Which files: those named by `model.safetensors.index.json`'s `weight_map`
/// when the index exists (each mapped tensor must be in the file the index
/// names); else `model.safetensors` when it exists; else every `*.safetensors`
/// in the folder. A tensor name present in two files is an error.
class safetensors_checkpoint {
 public:
  /// Opens the checkpoint in `folder`.
  [[nodiscard]] static result<safetensors_checkpoint> open(const std::filesystem::path& folder);

  /// Move-only, views valid across moves (the files own the mappings).
  safetensors_checkpoint(safetensors_checkpoint&&) noexcept = default;
  /// As the move constructor.
  safetensors_checkpoint& operator=(safetensors_checkpoint&&) noexcept = default;
  safetensors_checkpoint(const safetensors_checkpoint&) = delete;
  safetensors_checkpoint& operator=(const safetensors_checkpoint&) = delete;
  ~safetensors_checkpoint() = default;

  /// The tensor called `name`, or nullptr.
  [[nodiscard]] const tensor_view* find(std::string_view name) const;

  /// The tensor called `name`, with `safetensors_file::get`'s checks and
  /// messages (the message names the checkpoint folder when it is absent).
  [[nodiscard]] result<const tensor_view*> get(std::string_view name) const;

  /// Every tensor name, sorted.
  [[nodiscard]] std::vector<std::string> names() const;

  /// The opened files, in the order they were read.
  [[nodiscard]] const std::vector<safetensors_file>& files() const noexcept { return files_; }

  /// The folder the checkpoint was opened from.
  [[nodiscard]] const std::filesystem::path& folder() const noexcept { return folder_; }

 private:
  safetensors_checkpoint() = default;

  std::filesystem::path folder_;
  std::vector<safetensors_file> files_;
  std::map<std::string, const safetensors_file*, std::less<>> index_;
};

/// Writes the elements of `tensor` into `out` as float32 (bf16 and f16 are
/// widened exactly). Fails, naming the tensor, when the dtype is unsupported or
/// `out` does not hold exactly numel() floats.
[[nodiscard]] result<void> to_float32(const tensor_view& tensor, std::span<float> out);

/// The elements of `tensor` as a new float32 vector; same failures as above.
[[nodiscard]] result<std::vector<float>> to_float32(const tensor_view& tensor);

/// One IEEE half value (its raw bits) as float32, subnormals, infinities and NaN
/// included.
[[nodiscard]] float float16_to_float(std::uint16_t bits) noexcept;

}  // namespace mstar::models
