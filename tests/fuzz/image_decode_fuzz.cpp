// libFuzzer target over image bytes: decode_image (PNG through libpng, JPEG
// through libjpeg-turbo, both reporting errors by longjmp) either refuses
// with a message or returns exactly width x height RGB pixels within the
// pixel limit, in both alpha modes; a decoded image then runs through the
// Qwen2-VL preprocessing (smart_resize, the bicubic resize, patchify), whose
// output must have the shape its grid says.
//
//   build-fuzz/tests/fuzz/mstar-fuzz-image-decode -max_total_time=60 CORPUS
//   tests/fuzz/corpus/image_decode
#include <cstddef>
#include <cstdint>
#include <span>

#include "models/vision/image_decode.hpp"
#include "models/vision/image_processor.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

using namespace mstar::models::vision;

constexpr std::int64_t pixel_limit = std::int64_t{1} << 20;

void check_preprocessing(const rgb_image& image) {
  image_processor_config config;
  config.patch_size = 16;
  config.min_pixels = 256;
  config.max_pixels = 4096;
  const auto patches = preprocess_image(image, config);
  if (!patches) {
    if (patches.error().message().empty())
      mstar::fuzz::fail("preprocess: a refusal without a message");
    return;
  }
  const auto& grid = patches->grid_thw;
  if (grid[0] != 1 || grid[1] <= 0 || grid[2] <= 0 || grid[1] % 2 != 0 || grid[2] % 2 != 0)
    mstar::fuzz::fail("preprocess: a grid that is not 1 x even x even");
  if (patches->num_patches != grid[1] * grid[2] ||
      patches->pixel_values.size() !=
          static_cast<std::size_t>(patches->num_patches * patches->patch_dim)) {
    mstar::fuzz::fail("preprocess: pixel_values disagree with the grid");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes{reinterpret_cast<const std::byte*>(data), size};
  for (const alpha_mode alpha : {alpha_mode::drop, alpha_mode::composite_on_white}) {
    const auto image = decode_image(bytes, {.max_pixels = pixel_limit, .alpha = alpha});
    if (!image) {
      if (image.error().message().empty())
        mstar::fuzz::fail("decode: a refusal without a message");
      continue;
    }
    if (image->width <= 0 || image->height <= 0 || image->width * image->height > pixel_limit)
      mstar::fuzz::fail("decode: a size outside (0, limit]");
    if (image->pixels.size() != static_cast<std::size_t>(image->width * image->height * 3))
      mstar::fuzz::fail("decode: a pixel buffer that is not width x height x 3");
    if (alpha == alpha_mode::drop && image->width * image->height <= 65536)
      check_preprocessing(*image);
  }
  return 0;
}
