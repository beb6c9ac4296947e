// mstar-serve: an OpenAI-compatible HTTP server over the engine's actors.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/runtime.hpp"
#include "launcher/common/chat.hpp"
#include "launcher/common/engine_cli.hpp"
#include "launcher/common/guarded_main.hpp"
#include "launcher/common/served.hpp"
#include "models/load.hpp"
#include "serve/http_server.hpp"
#include "serve/runtime_port.hpp"

namespace {

struct options {
  std::string model = MSTAR_EMBEDDED_MODEL_DIR;
  std::string served_name;
  std::int64_t max_model_len = 0;
  mstar::serve::server_options http;
  std::size_t max_outstanding = 1024;
  std::string api_key;
  bool quiet = false;
  mstar::launcher::engine_cli engine;
};

int fail(const std::string& message) {
  spdlog::error("mstar-serve: {}", message);
  return 2;
}

void add_options(CLI::App& app, options& opt) {
  app.add_option("--model", opt.model, "Model folder (config.json, *.safetensors, tokenizer)");
  app.add_option("--served-model-name", opt.served_name,
                 "The model name clients send (default: the folder's name)");
  app.add_option("--host", opt.http.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", opt.http.port, "Port to listen on (0: any free port)")
      ->capture_default_str();
  app.add_option("--api-key", opt.api_key,
                 "Require 'Authorization: Bearer KEY' on /v1 routes (or set MSTAR_API_KEY)");
  app.add_option("--max-model-len", opt.max_model_len,
                 "Longest prompt + completion (default: the model's and the KV pool's limit)")
      ->check(CLI::Range(2, 1 << 24));
  app.add_option("--max-queue", opt.max_outstanding,
                 "Generation requests in the engine at once (running and waiting); more get 429")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-body-bytes", opt.http.max_body_bytes, "Larger request bodies get 413")
      ->check(CLI::Range(1024, 1 << 30))
      ->capture_default_str();
  app.add_option("--http-threads", opt.http.threads,
                 "HTTP I/O threads (0: a quarter of the cores, 2 to 8)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  app.add_option("--shutdown-grace", opt.http.shutdown_grace,
                 "Seconds in-flight requests get to finish on SIGINT/SIGTERM before cancelling")
      ->capture_default_str();
  app.add_flag("--no-request-log", opt.quiet, "No log line per request");
  mstar::launcher::add_engine_options(app, opt.engine);
}

int run(int argc, char** argv) {
  CLI::App app{
      "mstar-serve: an OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, "
      "/v1/models, /health, /metrics).\nWithout --model it serves the embedded default model."};
  options opt;
  add_options(app, opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("mstar-serve"));  // logs on stderr
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  if (opt.api_key.empty()) {
    if (const char* env = std::getenv("MSTAR_API_KEY"))
      opt.api_key = env;
  }
  auto run = mstar::launcher::run_options_of(opt.engine);
  if (!run)
    return fail(run.error().message());
  spdlog::info("loading {}", opt.model);
  auto loaded = mstar::models::load_causal_lm(opt.model, *run);
  if (!loaded)
    return fail(loaded.error().message());
  auto chat = mstar::launcher::load_chat(opt.model, (*loaded)->tok());
  auto fitted = mstar::launcher::fit_pools_to_device(opt.model, **loaded, opt.engine.device,
                                                     mstar::launcher::memory_fit_of(opt.engine),
                                                     opt.engine.engine);
  if (!fitted)
    return fail(fitted.error().message());
  if (!fitted->empty())
    spdlog::info("{}", *fitted);
  auto made = mstar::actors::runtime::start(std::move(*loaded), opt.engine.engine);
  if (!made)
    return fail(made.error().message());
  auto& rt = **made;
  const auto& model = rt.model();
  if (auto warmed = rt.warm_up(); !warmed)
    return fail(warmed.error().message());
  auto stats = rt.stats();
  if (!stats)
    return fail(stats.error().message());

  auto served = mstar::launcher::served_model_of(
      model, opt.model, opt.served_name, opt.max_model_len,
      stats->kv_pages * opt.engine.engine.pools.page_size, static_cast<bool>(chat.render));
  const auto images = mstar::launcher::load_images(opt.model, model);
  served.images = images.support;

  mstar::serve::service_options so;
  so.api_key = opt.api_key;
  so.max_outstanding = opt.max_outstanding;
  mstar::serve::runtime_port port{rt};
  auto svc = std::make_shared<mstar::serve::service>(&port, served, chat.render, so);
  opt.http.log_requests = !opt.quiet;
  auto server = mstar::serve::http_server::start(svc, opt.http);
  if (!server)
    return fail(server.error().message());
  spdlog::info(
      "model {} on {} ({}), {} parameters, context {} tokens, chat template: {}, images: {}",
      served.name, model.device_name(), std::string{mstar::to_string(model.compute_dtype())},
      model.num_parameters(), served.max_context, chat.describe, images.describe);
  spdlog::info("serving on http://{}:{} (Ctrl-C stops){}", opt.http.host, (*server)->port(),
               opt.api_key.empty() ? "" : "; /v1 routes need the API key");
  (*server)->run_until_signal();
  rt.stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mstar::launcher::guarded_main("mstar-serve", [&] { return run(argc, argv); });
}
