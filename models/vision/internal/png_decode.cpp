// PNG through libpng. libpng reports errors by longjmp, so every call into it
// happens in a small function that sets the jump point and holds nothing
// with a destructor; buffers are owned by the caller's frame, which a longjmp
// never crosses, and the libpng structs by png_reader.
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <png.h>
#include <vector>

#include "models/vision/internal/decoders.hpp"

namespace mstar::models::vision::internal {
namespace {

// What libpng's callbacks touch: plain data only.
struct png_context {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  std::size_t offset = 0;
  char message[256] = {};
  char warning[256] = {};  // the last one: libpng often explains an error in a warning first
};

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
  auto* context = static_cast<png_context*>(png_get_error_ptr(png));
  std::snprintf(context->message, sizeof context->message, "%s", message);
  png_longjmp(png, 1);
}

// Warnings (a bad CRC on an ancillary chunk, an unknown chunk...) leave the
// image readable, as they do for PIL; the last is kept for an error's message.
void on_png_warning(png_structp png, png_const_charp message) {
  auto* context = static_cast<png_context*>(png_get_error_ptr(png));
  std::snprintf(context->warning, sizeof context->warning, "%s", message);
}

void read_png_bytes(png_structp png, png_bytep out, png_size_t count) {
  auto* context = static_cast<png_context*>(png_get_io_ptr(png));
  if (context->size - context->offset < count) {
    std::snprintf(context->message, sizeof context->message,
                  "truncated: the data ends after %zu bytes, before the image does", context->size);
    png_longjmp(png, 1);
  }
  std::memcpy(out, context->data + context->offset, count);
  context->offset += count;
}

// Owns libpng's read and info structs.
class png_reader {
 public:
  explicit png_reader(png_context* context)
      : png_(png_create_read_struct(PNG_LIBPNG_VER_STRING, context, on_png_error, on_png_warning)) {
    if (png_ != nullptr)
      info_ = png_create_info_struct(png_);
  }
  png_reader(const png_reader&) = delete;
  png_reader& operator=(const png_reader&) = delete;
  ~png_reader() {
    if (png_ != nullptr)
      png_destroy_read_struct(&png_, &info_, nullptr);
  }

  [[nodiscard]] bool ok() const noexcept { return png_ != nullptr && info_ != nullptr; }
  [[nodiscard]] png_structp png() const noexcept { return png_; }
  [[nodiscard]] png_infop info() const noexcept { return info_; }

 private:
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

struct png_header {
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  int bit_depth = 0;
  int color_type = 0;
  bool has_trns = false;
  int orientation = 1;  // from an eXIf chunk before the image data
};

struct png_rows {
  int channels = 0;
  int bit_depth = 0;
  std::size_t row_bytes = 0;
  int passes = 1;
};

void read_header_unguarded(png_structp png, png_infop info, png_header* header) {
  // The pixel limit is ours (checked next, before any row buffer exists);
  // libpng's own default of a million per side would refuse first.
  png_set_user_limits(png, 0x7fffffffU, 0x7fffffffU);
  png_read_info(png, info);
  header->width = png_get_image_width(png, info);
  header->height = png_get_image_height(png, info);
  header->bit_depth = png_get_bit_depth(png, info);
  header->color_type = png_get_color_type(png, info);
  header->has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  png_uint_32 exif_size = 0;
  png_bytep exif = nullptr;
  if (png_get_eXIf_1(png, info, &exif_size, &exif) != 0 && exif != nullptr)
    header->orientation = exif_orientation({exif, exif_size});
}

void set_transforms_unguarded(png_structp png, png_infop info, const png_header& header,
                              bool keep_transparency, png_rows* rows) {
  if (header.color_type == PNG_COLOR_TYPE_PALETTE)
    png_set_palette_to_rgb(png);  // RGBA when the palette has a tRNS chunk
  if (header.color_type == PNG_COLOR_TYPE_GRAY && header.bit_depth < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  if (keep_transparency && header.has_trns)
    png_set_tRNS_to_alpha(png);
  rows->passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  rows->channels = png_get_channels(png, info);
  rows->bit_depth = png_get_bit_depth(png, info);
  rows->row_bytes = png_get_rowbytes(png, info);
}

void read_rows_unguarded(png_structp png, const png_rows& rows, const row_layout& layout,
                         std::uint8_t* scratch, std::uint8_t* out, png_uint_32 height) {
  const auto out_stride = static_cast<std::size_t>(layout.width) * 3;
  if (rows.passes == 1) {
    for (png_uint_32 y = 0; y < height; ++y) {
      png_read_row(png, scratch, nullptr);
      convert_row(layout, scratch, out + y * out_stride);
    }
    return;
  }
  // Adam7: every pass fills part of each row of the whole intermediate image.
  for (int pass = 0; pass < rows.passes; ++pass) {
    for (png_uint_32 y = 0; y < height; ++y)
      png_read_row(png, scratch + y * rows.row_bytes, nullptr);
  }
  for (png_uint_32 y = 0; y < height; ++y)
    convert_row(layout, scratch + y * rows.row_bytes, out + y * out_stride);
}

// The guarded steps: false after a libpng error, whose text is in the context.
bool read_header(png_structp png, png_infop info, png_header* header) {
  if (setjmp(png_jmpbuf(png)))
    return false;
  read_header_unguarded(png, info, header);
  return true;
}

bool set_transforms(png_structp png, png_infop info, const png_header* header,
                    bool keep_transparency, png_rows* rows) {
  if (setjmp(png_jmpbuf(png)))
    return false;
  set_transforms_unguarded(png, info, *header, keep_transparency, rows);
  return true;
}

bool read_rows(png_structp png, const png_rows* rows, const row_layout* layout,
               std::uint8_t* scratch, std::uint8_t* out, png_uint_32 height) {
  if (setjmp(png_jmpbuf(png)))
    return false;
  read_rows_unguarded(png, *rows, *layout, scratch, out, height);
  return true;
}

error png_failure(const png_context& context) {
  std::string reason = context.message[0] != '\0' ? context.message : "libpng reported an error";
  if (context.warning[0] != '\0')
    reason += fmt::format(" (after the warning: {})", context.warning);
  return make_error(errc::parse_error, fmt::format("png: cannot decode: {}", reason));
}

}  // namespace

result<rgb_image> decode_png(std::span<const std::byte> bytes, const decode_options& options) {
  png_context context;
  context.data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  context.size = bytes.size();
  png_reader reader{&context};
  if (!reader.ok())
    return make_error(errc::internal, "png: libpng could not create its read structs");
  png_set_read_fn(reader.png(), &context, read_png_bytes);

  png_header header;
  if (!read_header(reader.png(), reader.info(), &header))
    return png_failure(context);
  const std::int64_t width = header.width;
  const std::int64_t height = header.height;
  if (auto ok = check_pixel_limit("png", width, height, options.max_pixels); !ok)
    return ok.error();

  const bool keep_transparency = options.alpha == alpha_mode::composite_on_white;
  png_rows rows;
  if (!set_transforms(reader.png(), reader.info(), &header, keep_transparency, &rows))
    return png_failure(context);

  row_layout layout;
  layout.width = width;
  layout.channels = rows.channels;
  layout.bit_depth = rows.bit_depth;
  layout.gray16_clamps = header.color_type == PNG_COLOR_TYPE_GRAY && header.bit_depth == 16;
  layout.alpha = options.alpha;
  if (rows.channels < 1 || rows.channels > 4 || (rows.bit_depth != 8 && rows.bit_depth != 16)) {
    return make_error(errc::internal, fmt::format("png: unexpected row layout ({} channels of {} "
                                                  "bits) after libpng's transforms",
                                                  rows.channels, rows.bit_depth));
  }

  std::vector<std::uint8_t> scratch(rows.row_bytes *
                                    (rows.passes == 1 ? 1 : static_cast<std::size_t>(height)));
  rgb_image image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<std::size_t>(width * height * 3));
  if (!read_rows(reader.png(), &rows, &layout, scratch.data(), image.pixels.data(),
                 header.height)) {
    return png_failure(context);
  }
  if (options.apply_exif_orientation)
    return apply_orientation(std::move(image), header.orientation);
  return image;
}

}  // namespace mstar::models::vision::internal
