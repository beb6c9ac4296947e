#include "models/internal/unicode_normalize.hpp"

#include <cstdlib>
#include <memory>
#include <utf8proc.h>

#include "models/internal/pretokenize.hpp"

namespace mstar::models::internal {
namespace {

struct free_deleter {
  void operator()(utf8proc_uint8_t* p) const { std::free(p); }
};

utf8proc_option_t options_of(normal_form form) {
  switch (form) {
    case normal_form::nfc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case normal_form::nfd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case normal_form::nfkc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case normal_form::nfkd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return UTF8PROC_STABLE;
}

bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80)
      return false;
  }
  return true;
}

// Appends `run` (UTF-8) in `form`; unchanged if utf8proc refuses it.
void append_normalized(std::string& out, std::string_view run, normal_form form) {
  if (is_ascii(run)) {  // every form leaves ASCII as it is
    out.append(run);
    return;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                   static_cast<utf8proc_ssize_t>(run.size()), &mapped, options_of(form));
  const std::unique_ptr<utf8proc_uint8_t, free_deleter> owned{mapped};
  if (length < 0 || mapped == nullptr) {
    out.append(run);
    return;
  }
  out.append(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length));
}

}  // namespace

std::optional<normal_form> normal_form_named(std::string_view type) noexcept {
  if (type == "NFC")
    return normal_form::nfc;
  if (type == "NFD")
    return normal_form::nfd;
  if (type == "NFKC")
    return normal_form::nfkc;
  if (type == "NFKD")
    return normal_form::nfkd;
  return std::nullopt;
}

std::string normalize(std::string_view text, normal_form form) {
  std::string out;
  out.reserve(text.size());
  for (const utf8_run& run : utf8_runs(text)) {
    if (run.valid) {
      append_normalized(out, run.text, form);
    } else {
      out.append(run.text);
    }
  }
  return out;
}

std::string normalize(std::string_view text, std::span<const normal_form> forms) {
  std::string out{text};
  for (const normal_form form : forms)
    out = normalize(out, form);
  return out;
}

}  // namespace mstar::models::internal
