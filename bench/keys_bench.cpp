// Page-key throughput: chain() over 128-token pages against raw OpenSSL
// SHA-256 over the very same preimages, measured in the same run.
#include <CLI/CLI.hpp>
#include <cstring>
#include <openssl/evp.h>
#include <random>

#include "bench/harness.hpp"
#include "resources/kv/keys.hpp"

namespace {

using mstar::resources::digest256;
using mstar::resources::token_id;

// The preimage page_key hashes, spelled out independently of the library.
std::vector<std::uint8_t> preimage(const std::vector<std::uint8_t>& prev,
                                   const std::vector<token_id>& tokens) {
  std::vector<std::uint8_t> out;
  auto u32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
      out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  u32(static_cast<std::uint32_t>(prev.size()));
  out.insert(out.end(), prev.begin(), prev.end());
  u32(static_cast<std::uint32_t>(tokens.size() * 4));
  for (auto t : tokens)
    u32(t);
  u32(0);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"keys benchmark: chain() keys/s vs raw OpenSSL SHA-256 over the same preimages"};
  bool as_json = false;
  int pages = 4096;
  int page_size = 128;
  int rounds = 15;
  int repeat = 10;
  app.add_flag("--json", as_json, "One JSON object per line");
  app.add_option("--pages", pages, "Pages per chain")->check(CLI::PositiveNumber);
  app.add_option("--page-size", page_size, "Token ids per page")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "Interleaved rounds (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--repeat", repeat, "Chains per round")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::mt19937 rng{1234};
  std::vector<std::vector<token_id>> data(static_cast<std::size_t>(pages));
  for (auto& p : data) {
    p.resize(static_cast<std::size_t>(page_size));
    for (auto& t : p)
      t = rng() % 151936;  // a real vocabulary's range
  }
  const auto keys = mstar::resources::chain(data).value();
  std::vector<std::vector<std::uint8_t>> preimages;
  std::vector<std::uint8_t> prev;
  for (std::size_t i = 0; i < data.size(); ++i) {
    preimages.push_back(preimage(prev, data[i]));
    prev.assign(keys[i].begin(), keys[i].end());
  }

  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  digest256 sink{};
  std::uint64_t checksum = 0;
  auto subject = [&] {
    for (int r = 0; r < repeat; ++r)
      checksum += mstar::resources::chain(data).value().back()[0];
  };
  auto baseline = [&] {
    for (int r = 0; r < repeat; ++r) {
      for (const auto& pre : preimages) {
        unsigned int len = 0;
        EVP_DigestInit_ex2(ctx, md, nullptr);
        EVP_DigestUpdate(ctx, pre.data(), pre.size());
        EVP_DigestFinal_ex(ctx, sink.data(), &len);
      }
      checksum += sink[0];
    }
  };
  // The baseline must hash what chain() hashes, or the ratio means nothing.
  {
    unsigned int len = 0;
    EVP_DigestInit_ex2(ctx, md, nullptr);
    EVP_DigestUpdate(ctx, preimages.back().data(), preimages.back().size());
    EVP_DigestFinal_ex(ctx, sink.data(), &len);
    if (sink != keys.back()) {
      std::fprintf(stderr, "keys bench: baseline preimage does not reproduce chain()'s key\n");
      return 1;
    }
  }
  const auto [chain_rate, raw_rate] =
      mstar::bench::interleaved_rates(subject, baseline, double(pages) * repeat, rounds);
  EVP_MD_CTX_free(ctx);
  EVP_MD_free(md);
  mstar::bench::report({{"keys",
                         fmt::format("chain_{}_tokens", page_size),
                         "keys_per_s",
                         "1/s",
                         "openssl_sha256",
                         chain_rate,
                         raw_rate,
                         {}}},
                       as_json);
  return checksum == 42 ? 3 : 0;  // keep the work observable
}
