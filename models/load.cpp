#include "models/load.hpp"

#include <fmt/format.h>

#include "core/untrusted_json.hpp"
#include "models/nemotron_h.hpp"
#include "models/qwen3_5.hpp"
#include "models/tensor_parallel_lm.hpp"

namespace mstar::models {

result<std::unique_ptr<causal_lm>> load_causal_lm(const std::filesystem::path& folder,
                                                  const run_options& run) {
  if (run.tensor_parallel_ranks > 1) {
    if (run.tensor_parallel && run.tensor_parallel->size() > 1) {
      return make_error(errc::invalid_argument,
                        "tensor_parallel_ranks and a tensor_parallel group are exclusive");
    }
    return make_tensor_parallel(run, run.tensor_parallel_ranks, [folder](const run_options& r) {
      return load_causal_lm(folder, r);
    });
  }
  auto type = read_model_type(folder);
  if (!type)
    return type.error();
  auto up = [](auto loaded) -> result<std::unique_ptr<causal_lm>> {
    if (!loaded)
      return loaded.error();
    return std::unique_ptr<causal_lm>(std::move(*loaded));
  };
  if (type->empty() || *type == "nemotron_h")
    return up(nemotron_h_model::load(folder, run));
  if (*type == "qwen3_5" || *type == "qwen3_5_text") {
    if (run.tensor_parallel && run.tensor_parallel->size() > 1) {
      return make_error(errc::unsupported,
                        fmt::format("{}: tensor parallelism is not supported for model_type '{}' "
                                    "(nemotron_h only)",
                                    (folder / "config.json").string(), *type));
    }
    return up(qwen3_5_model::load(folder, run));
  }
  return make_error(errc::unsupported,
                    fmt::format("{}: model_type '{}' is not supported (nemotron_h, qwen3_5, "
                                "qwen3_5_text)",
                                (folder / "config.json").string(), text_excerpt(*type)));
}

}  // namespace mstar::models
