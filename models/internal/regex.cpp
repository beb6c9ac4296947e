#include "models/internal/regex.hpp"

#include <limits>
#include <memory>
#include <mutex>
#include <oniguruma.h>
#include <optional>
#include <utility>

#include "models/internal/pretokenize.hpp"

namespace mstar::models::internal {
namespace {

// Backtracking budget: Oniguruma's default per start position (what
// `tokenizers` runs with), and per search that plus 64 a byte of the text, so
// a pattern that is exponential on the text gives up after about one start
// position's worth instead of running for minutes, while real pre-tokenizer
// patterns (a few retries a position) never come near it.
constexpr unsigned long retry_limit_in_match = 10'000'000;
constexpr unsigned long retries_per_byte = 64;

unsigned long retry_limit_in_search(std::size_t text_size) {
  const unsigned long most = std::numeric_limits<unsigned long>::max();
  if (text_size > (most - retry_limit_in_match) / retries_per_byte)
    return 0;  // unlimited: the sum would not fit
  return retry_limit_in_match + retries_per_byte * text_size;
}

// Compiles one pattern at a time, as the `onig` crate does (onig_new may
// touch Oniguruma's shared tables); searches on compiled patterns need no lock.
std::mutex& compile_mutex() {
  static std::mutex mutex;
  return mutex;
}

void ensure_initialized() {
  static const bool initialized = [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    return onig_initialize(encodings, 1) == ONIG_NORMAL;
  }();
  (void)initialized;
}

const OnigUChar* bytes(std::string_view text) {
  return reinterpret_cast<const OnigUChar*>(text.data());
}

struct region_deleter {
  void operator()(OnigRegion* region) const { onig_region_free(region, 1); }
};
struct param_deleter {
  void operator()(OnigMatchParam* param) const { onig_free_match_param(param); }
};

}  // namespace

result<regex> regex::compile(std::string_view pattern, syntax kind) {
  if (!is_valid_utf8(pattern))
    return make_error(errc::parse_error, "the pattern is not valid UTF-8");
  ensure_initialized();
  OnigRegex compiled = nullptr;
  OnigErrorInfo info{};
  const std::lock_guard<std::mutex> lock{compile_mutex()};
  const int rc = onig_new(&compiled, bytes(pattern), bytes(pattern) + pattern.size(),
                          ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                          kind == syntax::literal ? ONIG_SYNTAX_ASIS : ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN] = {};
    onig_error_code_to_str(message, rc, &info);
    return make_error(errc::parse_error, reinterpret_cast<const char*>(message));
  }
  return regex{compiled};
}

regex::regex(regex&& other) noexcept : compiled_(std::exchange(other.compiled_, nullptr)) {}

regex& regex::operator=(regex&& other) noexcept {
  if (this != &other) {
    if (compiled_ != nullptr)
      onig_free(compiled_);
    compiled_ = std::exchange(other.compiled_, nullptr);
  }
  return *this;
}

regex::~regex() {
  if (compiled_ != nullptr)
    onig_free(compiled_);
}

std::vector<byte_span> regex::find_all(std::string_view text) const {
  std::vector<byte_span> out;
  if (text.empty() || compiled_ == nullptr)
    return out;
  const std::unique_ptr<OnigRegion, region_deleter> region{onig_region_new()};
  const std::unique_ptr<OnigMatchParam, param_deleter> param{onig_new_match_param()};
  if (!region || !param)
    return out;
  onig_initialize_match_param(param.get());
  onig_set_retry_limit_in_match_of_match_param(param.get(), retry_limit_in_match);
  onig_set_retry_limit_in_search_of_match_param(param.get(), retry_limit_in_search(text.size()));
  const OnigUChar* begin = bytes(text);
  const OnigUChar* end = begin + text.size();
  std::size_t from = 0;
  std::optional<std::size_t> last_match_end;
  while (from <= text.size()) {
    onig_region_clear(region.get());
    const int at = onig_search_with_param(compiled_, begin, end, begin + from, end, region.get(),
                                          ONIG_OPTION_NONE, param.get());
    if (at < 0)
      break;  // no further match, or a backtracking limit
    const auto match_begin = static_cast<std::size_t>(region->beg[0]);
    const auto match_end = static_cast<std::size_t>(region->end[0]);
    if (match_begin == match_end && last_match_end == match_end) {
      from += from < text.size() ? decode_utf8(text, from).length : 1;
      continue;
    }
    from = match_end;
    last_match_end = match_end;
    out.push_back({match_begin, match_end});
  }
  return out;
}

bool is_unicode_space(char32_t code_point) noexcept {
  ensure_initialized();
  return ONIGENC_IS_CODE_SPACE(ONIG_ENCODING_UTF8, code_point) != 0;
}

bool is_unicode_word(char32_t code_point) noexcept {
  ensure_initialized();
  return ONIGENC_IS_CODE_WORD(ONIG_ENCODING_UTF8, code_point) != 0;
}

}  // namespace mstar::models::internal
