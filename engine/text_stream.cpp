#include "engine/text_stream.hpp"

#include <algorithm>

namespace mstar::engine {
namespace {

// Bytes a sequence with this lead byte spans (1 for invalid leads, which
// then stand alone).
std::size_t sequence_length(unsigned char lead) noexcept {
  if (lead < 0x80)
    return 1;
  if ((lead & 0xE0) == 0xC0)
    return 2;
  if ((lead & 0xF0) == 0xE0)
    return 3;
  if ((lead & 0xF8) == 0xF0)
    return 4;
  return 1;
}

}  // namespace

std::size_t complete_utf8_prefix(std::string_view bytes) noexcept {
  // Only the last lead byte (at most 3 back) can start an incomplete sequence.
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if ((c & 0xC0) == 0x80)
      continue;  // a continuation byte: keep looking for the lead
    return sequence_length(c) > back ? n - back : n;
  }
  return n;
}

text_stream::text_stream(const models::tokenizer* tok, std::vector<std::string> stop_strings)
    : tok_(tok), stops_(std::move(stop_strings)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

text_stream::piece text_stream::push(std::span<const token_id> ids) {
  piece out;
  if (stopped_ || tok_ == nullptr)
    return out;
  pending_ += tok_->decode(ids, /*skip_special=*/true);
  // Any partial match was held back in pending, so a whole match lies there.
  const std::string& window = pending_;
  std::size_t match = std::string::npos;
  for (const auto& s : stops_)
    match = std::min(match, window.find(s));
  if (match != std::string::npos) {
    out.text = window.substr(0, match);
    out.stopped = true;
    stopped_ = true;
    pending_.clear();  // `window` refers to it: the text was copied above
    released_ += out.text;
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string,
  // and an incomplete UTF-8 tail.
  std::size_t hold = 0;
  for (const auto& s : stops_) {
    for (std::size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  const std::size_t cut =
      complete_utf8_prefix(std::string_view{pending_}.substr(0, pending_.size() - hold));
  out.text = pending_.substr(0, cut);
  pending_.erase(0, cut);
  released_ += out.text;
  return out;
}

std::string text_stream::flush() {
  std::string out;
  if (stopped_)
    return out;
  const std::size_t cut = complete_utf8_prefix(pending_);
  out = pending_.substr(0, cut);
  if (cut < pending_.size())
    out += "\xEF\xBF\xBD";  // U+FFFD for the cut tail
  pending_.clear();
  released_ += out;
  return out;
}

}  // namespace mstar::engine
