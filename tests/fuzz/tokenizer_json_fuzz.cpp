// libFuzzer target over tokenizer.json: bpe_tokenizer::parse either refuses
// the text or returns a tokenizer that encodes (two fixed sentences and a
// prefix of the input itself) to ids below its vocab_size and decodes them
// back. Split patterns in the input are compiled and run by Oniguruma.
//
//   build-fuzz/tests/fuzz/mstar-fuzz-tokenizer-json -max_total_time=60 CORPUS
//   tests/fuzz/corpus/tokenizer_json
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "models/tokenizer.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

void round_trip(const mstar::models::bpe_tokenizer& tok, std::string_view text) {
  const auto ids = tok.encode(text);
  for (const auto id : ids) {
    if (static_cast<std::int64_t>(id) >= tok.vocab_size())
      mstar::fuzz::fail("tokenizer: encode gave an id past vocab_size");
  }
  (void)tok.decode(ids);
  (void)tok.decode(ids, /*skip_special=*/true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  auto tok = mstar::models::bpe_tokenizer::parse(text);
  if (!tok) {
    if (tok.error().message().empty())
      mstar::fuzz::fail("tokenizer: a refusal without a message");
    return 0;
  }
  if (tok->vocab_size() <= 0)
    mstar::fuzz::fail("tokenizer: accepted an empty vocabulary");
  round_trip(*tok, "Hello, world! 123 \xc3\xa9t\xc3\xa9  \n\tend");
  // Special tokens, a combining mark, bytes that are not UTF-8, CJK, CR LF.
  round_trip(*tok,
             "<|im_start|>I'LL e\xcc\x81 \xff\xfe\xed\xa0\x80 \xe4\xb8\xad\r\n\r\n<|im_end|>");
  round_trip(*tok, text.substr(0, std::min<std::size_t>(text.size(), 256)));
  return 0;
}
