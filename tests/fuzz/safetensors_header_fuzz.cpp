// libFuzzer target over a safetensors file. The first byte picks the form:
// odd, the rest is the whole file; even, the rest is the header's JSON and
// the target adds the 8-byte length before it and 256 data bytes after, so
// the fuzzer spends its time inside the header. safetensors_file::open either
// refuses the file or lists tensors whose bytes lie inside the file and
// convert to float32 (AddressSanitizer checks each read).
//
//   build-fuzz/tests/fuzz/mstar-fuzz-safetensors-header -max_total_time=60 CORPUS
//   tests/fuzz/corpus/safetensors_header
#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "models/safetensors.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

/// A memory-backed regular file reopened by path on every input.
int the_file() {
  static const int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0)
    mstar::fuzz::fail("memfd_create failed");
  return fd;
}

void write_all(int fd, const std::string& bytes) {
  if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
    mstar::fuzz::fail("cannot reset the file");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const auto n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0)
      mstar::fuzz::fail("cannot write the file");
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::string rest{reinterpret_cast<const char*>(data) + 1, size - 1};
  std::string file;
  if ((data[0] & 1U) != 0) {
    file = rest;
  } else {
    std::uint64_t n = rest.size();
    for (int i = 0; i < 8; ++i)
      file.push_back(static_cast<char>((n >> (8 * i)) & 0xffU));
    file += rest;
    for (int i = 0; i < 256; ++i)
      file.push_back(static_cast<char>(i * 37));
  }
  const int fd = the_file();
  write_all(fd, file);
  auto opened = mstar::models::safetensors_file::open("/proc/self/fd/" + std::to_string(fd));
  if (!opened) {
    if (opened.error().message().empty())
      mstar::fuzz::fail("safetensors: a refusal without a message");
    return 0;
  }
  for (const auto& [name, view] : opened->tensors()) {
    if (view.numel() < 0)
      mstar::fuzz::fail("safetensors: a tensor with a negative element count");
    auto got = opened->get(name);
    if (!got)
      continue;  // a listed dtype this runtime cannot compute in
    auto floats = mstar::models::to_float32(**got);
    if (floats && floats->size() != static_cast<std::size_t>(view.numel()))
      mstar::fuzz::fail("safetensors: to_float32 gave the wrong element count");
  }
  return 0;
}
