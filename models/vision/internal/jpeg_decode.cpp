// JPEG through libjpeg-turbo. Its error handler longjmps, so every call into
// it happens in a small function that sets the jump point and holds nothing
// with a destructor; buffers are owned by the caller's frame, which a longjmp
// never crosses, and the decompressor by jpeg_decoder.
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <fmt/format.h>
#include <jerror.h>
#include <jpeglib.h>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "models/vision/internal/decoders.hpp"

namespace mstar::models::vision::internal {
namespace {

// A progressive JPEG may hold any number of scans, each a pass over the whole
// image: refusing more than libjpeg-turbo's recommended limit keeps a tiny
// file from costing minutes.
constexpr int max_scans = 500;

// What libjpeg's callbacks touch: plain data; reached through client_data.
struct jpeg_context {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr errors{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump{};
  std::size_t size = 0;  // of the input, for messages
  char message[JMSG_LENGTH_MAX + 64] = {};
};

jpeg_context* context_of(j_common_ptr cinfo) {
  return static_cast<jpeg_context*>(cinfo->client_data);
}

[[noreturn]] void on_jpeg_error(j_common_ptr cinfo) {
  jpeg_context* context = context_of(cinfo);
  (*cinfo->err->format_message)(cinfo, context->message);
  std::longjmp(context->jump, 1);
}

// Warnings about damaged entropy-coded data leave an image, as PIL keeps it;
// running out of data does not: libjpeg would pad the rest with grey where
// PIL refuses the file as truncated.
void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level >= 0)
    return;  // trace messages
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) {
    jpeg_context* context = context_of(cinfo);
    std::snprintf(context->message, sizeof context->message,
                  "truncated: the data ends after %zu bytes, before the image does", context->size);
    std::longjmp(context->jump, 1);
  }
  cinfo->err->num_warnings++;
}

void on_jpeg_progress(j_common_ptr cinfo) {
  jpeg_context* context = context_of(cinfo);
  if (context->cinfo.input_scan_number > max_scans) {
    std::snprintf(context->message, sizeof context->message, "more than %d scans", max_scans);
    std::longjmp(context->jump, 1);
  }
}

// Owns the decompressor (a fresh, zeroed context is safe to destroy at any
// step: jpeg_destroy ignores a decompressor that was never created).
class jpeg_decoder {
 public:
  jpeg_decoder() : context_(std::make_unique<jpeg_context>()) {
    jpeg_context& c = *context_;
    c.cinfo.err = jpeg_std_error(&c.errors);
    c.errors.error_exit = on_jpeg_error;
    c.errors.emit_message = on_jpeg_message;
    c.cinfo.client_data = &c;
    c.progress.progress_monitor = on_jpeg_progress;
  }
  jpeg_decoder(const jpeg_decoder&) = delete;
  jpeg_decoder& operator=(const jpeg_decoder&) = delete;
  ~jpeg_decoder() { jpeg_destroy_decompress(&context_->cinfo); }

  [[nodiscard]] jpeg_context* context() const noexcept { return context_.get(); }

 private:
  std::unique_ptr<jpeg_context> context_;
};

void read_header_unguarded(jpeg_context* c, const std::uint8_t* data, std::size_t size) {
  jpeg_CreateDecompress(&c->cinfo, JPEG_LIB_VERSION, sizeof(jpeg_decompress_struct));
  // Creation zeroes the struct but for err and client_data.
  c->cinfo.progress = &c->progress;
  jpeg_save_markers(&c->cinfo, JPEG_APP0 + 1, 0xFFFF);  // APP1: EXIF
  jpeg_mem_src(&c->cinfo, data, static_cast<unsigned long>(size));
  if (jpeg_read_header(&c->cinfo, TRUE) != JPEG_HEADER_OK) {
    std::snprintf(c->message, sizeof c->message, "the file holds tables but no image");
    std::longjmp(c->jump, 1);
  }
}

void read_rows_unguarded(jpeg_context* c, const row_layout& layout, std::uint8_t* scratch,
                         std::uint8_t* out) {
  const auto out_stride = static_cast<std::size_t>(layout.width) * 3;
  while (c->cinfo.output_scanline < c->cinfo.output_height) {
    const JDIMENSION y = c->cinfo.output_scanline;
    JSAMPROW row = scratch;
    if (jpeg_read_scanlines(&c->cinfo, &row, 1) != 1) {
      std::snprintf(c->message, sizeof c->message, "a scanline could not be read");
      std::longjmp(c->jump, 1);
    }
    convert_row(layout, scratch, out + y * out_stride);
  }
}

// The guarded steps: false after a libjpeg error, whose text is in the context.
bool read_header(jpeg_context* c, const std::uint8_t* data, std::size_t size) {
  if (setjmp(c->jump))
    return false;
  read_header_unguarded(c, data, size);
  return true;
}

bool start(jpeg_context* c, J_COLOR_SPACE out_space) {
  if (setjmp(c->jump))
    return false;
  c->cinfo.out_color_space = out_space;
  jpeg_start_decompress(&c->cinfo);  // a progressive file's scans are all read here
  return true;
}

bool read_rows(jpeg_context* c, const row_layout* layout, std::uint8_t* scratch,
               std::uint8_t* out) {
  if (setjmp(c->jump))
    return false;
  read_rows_unguarded(c, *layout, scratch, out);
  return true;
}

error jpeg_failure(const jpeg_context& c) {
  return make_error(errc::parse_error,
                    fmt::format("jpeg: cannot decode: {}",
                                c.message[0] != '\0' ? c.message : "libjpeg reported an error"));
}

// PIL's mode by component count: L, RGB or CMYK (which libjpeg converts from
// YCCK itself); anything else it cannot open either.
result<J_COLOR_SPACE> output_space(const jpeg_decompress_struct& cinfo) {
  switch (cinfo.num_components) {
    case 1:
      return JCS_GRAYSCALE;
    case 3:
      return JCS_RGB;
    case 4:
      return JCS_CMYK;
    default:
      return make_error(
          errc::unsupported,
          fmt::format("jpeg: {} colour components (PIL reads 1, 3 or 4)", cinfo.num_components));
  }
}

// The Orientation of the first APP1 segment holding EXIF, as PIL keeps the
// first; 1 without one.
int orientation_of(const jpeg_decompress_struct& cinfo) {
  constexpr std::string_view exif_header{"Exif\0\0", 6};
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1 || m->data_length < exif_header.size())
      continue;
    if (std::string_view{reinterpret_cast<const char*>(m->data), exif_header.size()} != exif_header)
      continue;
    return exif_orientation({m->data + exif_header.size(), m->data_length - exif_header.size()});
  }
  return 1;
}

}  // namespace

result<rgb_image> decode_jpeg(std::span<const std::byte> bytes, const decode_options& options) {
  jpeg_decoder decoder;
  jpeg_context* c = decoder.context();
  c->size = bytes.size();
  if (!read_header(c, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()))
    return jpeg_failure(*c);
  const std::int64_t width = c->cinfo.image_width;
  const std::int64_t height = c->cinfo.image_height;
  if (auto ok = check_pixel_limit("jpeg", width, height, options.max_pixels); !ok)
    return ok.error();
  auto space = output_space(c->cinfo);
  if (!space)
    return space.error();
  if (!start(c, *space))
    return jpeg_failure(*c);
  if (c->cinfo.output_width != width || c->cinfo.output_height != height) {
    return make_error(errc::internal, "jpeg: libjpeg's output size differs from the header's");
  }

  row_layout layout;
  layout.width = width;
  layout.channels = c->cinfo.output_components;
  layout.cmyk = *space == JCS_CMYK;
  layout.alpha = options.alpha;
  std::vector<std::uint8_t> scratch(static_cast<std::size_t>(width) *
                                    static_cast<std::size_t>(c->cinfo.output_components));
  rgb_image image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<std::size_t>(width * height * 3));
  if (!read_rows(c, &layout, scratch.data(), image.pixels.data()))
    return jpeg_failure(*c);
  if (options.apply_exif_orientation)
    return apply_orientation(std::move(image), orientation_of(c->cinfo));
  return image;
}

}  // namespace mstar::models::vision::internal
