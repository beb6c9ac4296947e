// Embedding mstar-cpp: start the engine on a model folder, submit prompts
// from several threads, stream one answer with the blocking handle and one
// with a callback, read the counters, stop. Run: mstar-embed-example [DIR].
#include <atomic>
#include <cstdio>
#include <iostream>
#include <string_view>
#include <thread>

#include "actors/runtime.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view{argv[1]} == "--help") {
    std::puts("mstar-embed-example [MODEL_DIR]: the embedding API on a model (default: embedded)");
    return 0;
  }
  mstar::actors::runtime_options options;
  options.model = argc > 1 ? argv[1] : MSTAR_EMBEDDED_MODEL_DIR;
  auto rt = mstar::actors::runtime::start(options);
  if (!rt) {
    std::fprintf(stderr, "embed: %s\n", rt.error().message().c_str());
    return 1;
  }
  auto& engine = **rt;

  // A blocking handle: deltas arrive as the engine steps.
  mstar::engine::request_spec spec;
  spec.text = "Once upon a time";
  spec.stop.max_tokens = 16;
  auto handle = engine.submit(spec);
  std::cout << *spec.text;
  while (auto d = handle.next()) {
    std::cout << d->text << std::flush;
    if (d->finished)
      std::cout << "\n[" << mstar::engine::to_string(*d->finished) << "]\n";
  }

  // Four threads submitting at once, deltas through a callback.
  std::atomic<int> tokens{0}, finished{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&engine, &tokens, &finished, t] {
      mstar::engine::request_spec s;
      s.prompt = {5, 6, static_cast<std::uint32_t>(7 + t)};
      s.stop.max_tokens = 8;
      engine.submit(s, [&](const mstar::engine::delta& d) {
        tokens += static_cast<int>(d.tokens.size());
        if (d.finished)
          ++finished;
      });
    });
  }
  for (auto& th : threads)
    th.join();
  engine.stop();  // drains: every request above has finished after this
  std::printf("%d callback requests finished, %d tokens\n", finished.load(), tokens.load());
  return finished.load() == 4 ? 0 : 1;
}
