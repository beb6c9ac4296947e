#pragma once

// Files from outside the process (model folders, prompt files, deployment
// files) are opened here: only regular files, never blocking (a FIFO where a
// file should be would otherwise hang the open forever), and read within a
// size bound. Errors name the path once and say what is wrong with it.

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/result.hpp"

namespace mstar {

/// The largest text file (config, tokenizer, prompts, deployment) read whole
/// by default: far above any real one (a large tokenizer.json is ~35 MB).
inline constexpr std::uint64_t default_max_text_file_bytes = std::uint64_t{256} << 20;

/// A regular file open for reading; the one owner of its descriptor.
class input_file {
 public:
  /// Opens `path` for reading if it is a regular file (symbolic links are
  /// followed). Fails with not_found ("<path>: no such file"), io_error
  /// naming what the path is instead ("<path>: is a directory, not a
  /// file", "... is a FIFO (named pipe), not a regular file", a device,
  /// a socket) or the system's reason ("<path>: cannot open: Permission
  /// denied"). Never blocks.
  [[nodiscard]] static result<input_file> open(const std::filesystem::path& path);

  input_file(input_file&& other) noexcept;
  input_file& operator=(input_file&& other) noexcept;
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;
  ~input_file();

  /// The open descriptor (blocking mode; regular files never block).
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The file's size when it was opened.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }

  /// The whole file, if it holds at most `max_bytes` ("<path>: is N bytes,
  /// more than the M this reader accepts" otherwise; a file that grows past
  /// the bound while read is refused the same way).
  [[nodiscard]] result<std::string> read_all(std::uint64_t max_bytes) const;

 private:
  input_file(int fd, std::uint64_t size, std::filesystem::path path) noexcept
      : fd_(fd), size_(size), path_(std::move(path)) {}

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::filesystem::path path_;
};

/// input_file::open then read_all: the whole of a regular file of at most
/// `max_bytes`.
[[nodiscard]] result<std::string> read_input_file(
    const std::filesystem::path& path, std::uint64_t max_bytes = default_max_text_file_bytes);

}  // namespace mstar
