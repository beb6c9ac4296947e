#include "launcher/tool/sim_parse.hpp"

#include <fmt/format.h>
#include <limits>

#include "resources/recurrent/geometry.hpp"

namespace mstar::tool {

using namespace mstar::resources;

namespace {

constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();

result<std::vector<fork>> parse_forks(const json& arr, const std::string& what) {
  if (!arr.is_array())
    return make_error(errc::invalid_argument, what + " must be an array");
  std::vector<fork> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const auto& f = arr[i];
    if (!f.is_array() || f.size() != 2 || !f[0].is_string() || !f[1].is_string()) {
      return make_error(errc::invalid_argument,
                        fmt::format("{}[{}] must be [\"from_label\", \"to_label\"]", what, i));
    }
    out.emplace_back(f[0].get<std::string>(), f[1].get<std::string>());
  }
  return out;
}

// Reads `config.kv.<name>` into `out` when present: a whole number in
// [1, the largest Int] (the page geometry is int32, as kernels address it).
template <class Int>
result<void> read_size(const json& kv, const char* name, Int& out) {
  if (!kv.contains(name))
    return {};
  auto v =
      to_int(kv.at(name), fmt::format("config.kv.{}", name), 1, std::numeric_limits<Int>::max());
  if (!v)
    return v.error();
  out = static_cast<Int>(*v);
  return {};
}

}  // namespace

result<std::string> get_string(const json& obj, std::string_view name, std::string_view what) {
  auto f = field(obj, name);
  if (!f)
    return f.error().with_context(what);
  if (!(*f)->is_string()) {
    return make_error(errc::invalid_argument, fmt::format("{}.{} must be a string", what, name));
  }
  return (*f)->get<std::string>();
}

result<std::int64_t> get_int(const json& obj, std::string_view name, std::string_view what,
                             std::int64_t lo, std::int64_t hi) {
  auto f = field(obj, name);
  if (!f)
    return f.error().with_context(what);
  return to_int(**f, fmt::format("{}.{}", what, name), lo, hi);
}

result<kv_pool_config> parse_kv_config(const json& c, std::string& model) {
  if (auto ok = check_fields(c, "config.kv",
                             {"page_size", "max_num_pages", "num_layers", "num_kv_heads",
                              "head_dim", "prefix_cache", "prefix_cache_salt", "dtype", "model"});
      !ok) {
    return ok.error();
  }
  kv_pool_config cfg;
  auto& g = cfg.geometry;
  g.dtype = dtype::float32;
  for (const auto& ok :
       {read_size(c, "page_size", g.page_size), read_size(c, "max_num_pages", cfg.max_num_pages),
        read_size(c, "num_layers", g.num_layers), read_size(c, "num_kv_heads", g.num_kv_heads),
        read_size(c, "head_dim", g.head_dim)}) {
    if (!ok)
      return ok.error();
  }
  if (c.contains("prefix_cache")) {
    if (!c.at("prefix_cache").is_boolean()) {
      return make_error(errc::invalid_argument, "config.kv.prefix_cache must be true or false");
    }
    cfg.prefix_cache = c.at("prefix_cache").get<bool>();
  }
  if (c.contains("prefix_cache_salt")) {
    auto s = get_string(c, "prefix_cache_salt", "config.kv");
    if (!s)
      return s.error();
    cfg.prefix_cache_salt = *s;
  }
  if (c.contains("dtype")) {
    auto s = get_string(c, "dtype", "config.kv");
    if (!s)
      return s.error();
    auto d = parse_dtype(*s);
    if (!d)
      return d.error().with_context("config.kv.dtype");
    g.dtype = *d;
  }
  model = "mstar-tool-sim";
  if (c.contains("model")) {
    auto s = get_string(c, "model", "config.kv");
    if (!s)
      return s.error();
    model = *s;
  }
  if (auto ok = cfg.validate(); !ok)
    return ok.error().with_context("config.kv");
  return cfg;
}

namespace {

// A KV-shaped step part named `part` ("kv", or "recurrent" whose fields
// are a subset), with messages naming that part.
result<std::shared_ptr<kv_step>> parse_step_part(const json& k, const std::string& part) {
  if (auto ok = check_fields(
          k, part, {"segments", "commit", "pre_forks", "post_forks", "fork_rids", "retention"});
      !ok) {
    return ok.error();
  }
  auto step = std::make_shared<kv_step>();
  auto segs = field(k, "segments");
  if (!segs)
    return segs.error().with_context(part);
  if (!(*segs)->is_array())
    return make_error(errc::invalid_argument, part + ".segments must be an array");
  for (std::size_t i = 0; i < (*segs)->size(); ++i) {
    const json& s = (**segs)[i];
    const std::string what = fmt::format("{}.segments[{}]", part, i);
    if (auto ok = check_fields(s, what, {"rid", "label", "span"}); !ok)
      return ok.error();
    auto rid = get_string(s, "rid", what);
    if (!rid)
      return rid.error();
    std::string label = "main";
    if (s.contains("label")) {
      auto l = get_string(s, "label", what);
      if (!l)
        return l.error();
      label = *l;
    }
    auto span = get_int(s, "span", what, 0, std::numeric_limits<std::int32_t>::max());
    if (!span)
      return span.error();
    step->segments.push_back({*rid, label, *span});
  }
  if (k.contains("commit")) {
    if (!k.at("commit").is_boolean())
      return make_error(errc::invalid_argument, part + ".commit must be a boolean");
    step->commit = k.at("commit").get<bool>();
  }
  for (const char* name : {"pre_forks", "post_forks"}) {
    if (!k.contains(name))
      continue;
    auto forks = parse_forks(k.at(name), part + "." + name);
    if (!forks)
      return forks.error();
    (std::string_view{name} == "pre_forks" ? step->pre_forks : step->post_forks) = *forks;
  }
  if (k.contains("fork_rids")) {
    const auto& r = k.at("fork_rids");
    if (!r.is_array())
      return make_error(errc::invalid_argument, part + ".fork_rids must be an array");
    std::vector<request_id> rids;
    for (const auto& x : r) {
      if (!x.is_string())
        return make_error(errc::invalid_argument, part + ".fork_rids holds strings");
      rids.push_back(x.get<std::string>());
    }
    step->fork_rids = rids;
  }
  if (k.contains("retention")) {
    const auto& r = k.at("retention");
    if (!r.is_array())
      return make_error(errc::invalid_argument, part + ".retention must be an array");
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::string what = fmt::format("{}.retention[{}]", part, i);
      if (auto ok =
              check_fields(r[i], what, {"rid", "label", "context_budget", "protected_prefix"});
          !ok) {
        return ok.error();
      }
      auto rid = get_string(r[i], "rid", what);
      if (!rid)
        return rid.error();
      std::string label = "main";
      if (r[i].contains("label")) {
        auto l = get_string(r[i], "label", what);
        if (!l)
          return l.error();
        label = *l;
      }
      auto budget =
          get_int(r[i], "context_budget", what, std::numeric_limits<std::int64_t>::min(), i64_max);
      if (!budget)
        return budget.error();
      std::int64_t prefix = 0;
      if (r[i].contains("protected_prefix")) {
        auto p = get_int(r[i], "protected_prefix", what, std::numeric_limits<std::int64_t>::min(),
                         i64_max);
        if (!p)
          return p.error();
        prefix = *p;
      }
      auto policy = retention_policy::make(*budget, prefix);
      if (!policy)
        return policy.error().with_context(what);
      step->retention[{*rid, label}] = *policy;
    }
  }
  return step;
}

}  // namespace

result<std::shared_ptr<kv_step>> parse_kv_step(const json& k) {
  return parse_step_part(k, "kv");
}

result<recurrent_state_config> parse_recurrent_config(const json& c) {
  if (auto ok = check_fields(c, "config.recurrent",
                             {"num_layers", "max_slots", "geometry", "disable_sink_slot",
                              "state_dtype", "conv_dtype"});
      !ok) {
    return ok.error();
  }
  auto layers = get_int(c, "num_layers", "config.recurrent", 1, 1 << 20);
  if (!layers)
    return layers.error();
  recurrent_state_config cfg;
  cfg.num_layers = *layers;
  if (c.contains("max_slots")) {
    auto slots = get_int(c, "max_slots", "config.recurrent", 1, 1 << 24);
    if (!slots)
      return slots.error();
    cfg.max_slots = *slots;
  }
  if (c.contains("disable_sink_slot")) {
    if (!c.at("disable_sink_slot").is_boolean()) {
      return make_error(errc::invalid_argument,
                        "config.recurrent.disable_sink_slot must be a boolean");
    }
    cfg.disable_sink_slot = c.at("disable_sink_slot").get<bool>();
  }
  mstar::dtype state = mstar::dtype::float32, conv = mstar::dtype::float32;
  for (auto [name, out] : {std::pair{"state_dtype", &state}, std::pair{"conv_dtype", &conv}}) {
    if (!c.contains(name))
      continue;
    auto s = get_string(c, name, "config.recurrent");
    if (!s)
      return s.error();
    auto d = parse_dtype(*s);
    if (!d)
      return d.error().with_context(fmt::format("config.recurrent.{}", name));
    *out = *d;
  }
  auto g = field(c, "geometry");
  if (!g)
    return g.error().with_context("config.recurrent");
  const std::string what = "config.recurrent.geometry";
  auto family = get_string(**g, "family", what);
  if (!family)
    return family.error();
  // Reads each named field of the geometry into its member.
  auto read = [&](std::initializer_list<std::pair<const char*, std::int64_t*>> fields,
                  std::initializer_list<std::string_view> allowed) -> result<void> {
    if (auto ok = check_fields(**g, what, allowed); !ok)
      return ok.error();
    for (const auto& [name, out] : fields) {
      auto v = get_int(**g, name, what, 1, 1 << 24);
      if (!v)
        return v.error();
      *out = *v;
    }
    return {};
  };
  result<recurrent_blocks> blocks = make_error(errc::invalid_argument, "no geometry");
  if (*family == "mamba2") {
    mamba2_geometry geo;
    auto ok =
        read({{"num_heads", &geo.num_heads},
              {"head_dim", &geo.head_dim},
              {"state_size", &geo.state_size},
              {"n_groups", &geo.n_groups},
              {"conv_kernel_size", &geo.conv_kernel_size}},
             {"family", "num_heads", "head_dim", "state_size", "n_groups", "conv_kernel_size"});
    if (!ok)
      return ok.error();
    blocks = geo.to_blocks(state, conv);
  } else if (*family == "delta_net") {
    delta_net_geometry geo;
    auto ok = read(
        {{"num_k_heads", &geo.num_k_heads},
         {"num_v_heads", &geo.num_v_heads},
         {"head_k_dim", &geo.head_k_dim},
         {"head_v_dim", &geo.head_v_dim},
         {"conv_kernel_size", &geo.conv_kernel_size}},
        {"family", "num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim", "conv_kernel_size"});
    if (!ok)
      return ok.error();
    blocks = geo.to_blocks(state, conv);
  } else {
    return make_error(
        errc::invalid_argument,
        fmt::format("{}.family must be \"mamba2\" or \"delta_net\", got \"{}\"", what, *family));
  }
  if (!blocks)
    return blocks.error().with_context(what);
  cfg.blocks = std::move(*blocks);
  if (auto ok = cfg.validate(); !ok)
    return ok.error().with_context("config.recurrent");
  return cfg;
}

result<std::shared_ptr<recurrent_step>> parse_recurrent_step(const json& r, bool& capture) {
  if (auto ok = check_fields(r, "recurrent",
                             {"segments", "pre_forks", "post_forks", "fork_rids", "capture"});
      !ok) {
    return ok.error();
  }
  // Segments, forks and fork_rids read exactly like the KV part's.
  json as_kv = json::object();
  for (const char* name : {"segments", "pre_forks", "post_forks", "fork_rids"}) {
    if (r.contains(name))
      as_kv[name] = r.at(name);
  }
  auto kv = parse_step_part(as_kv, "recurrent");
  if (!kv)
    return kv.error();
  auto step = std::make_shared<recurrent_step>();
  step->segments = std::move((*kv)->segments);
  step->pre_forks = std::move((*kv)->pre_forks);
  step->post_forks = std::move((*kv)->post_forks);
  step->fork_rids = std::move((*kv)->fork_rids);
  if (r.contains("capture")) {
    if (!r.at("capture").is_boolean()) {
      return make_error(errc::invalid_argument, "recurrent.capture must be a boolean");
    }
    capture = capture || r.at("capture").get<bool>();
  }
  return step;
}

}  // namespace mstar::tool
