// `mstar-tool keys`: JSON Lines in, one JSON line out per input line.
#include <fmt/format.h>
#include <iostream>
#include <limits>
#include <string>

#include "core/checked.hpp"
#include "core/hex.hpp"
#include "core/untrusted_json.hpp"
#include "launcher/tool/commands.hpp"
#include "launcher/tool/json_args.hpp"
#include "launcher/tool/prefix_rows.hpp"
#include "resources/kv/generation.hpp"
#include "resources/kv/keys.hpp"
#include "resources/kv/layout.hpp"

namespace mstar::tool {
namespace {

using resources::digest256;

constexpr auto keys_help =
    R"(Page keys, one request per line (JSON Lines on stdin, one JSON line out
per input line; bytes are lowercase hex).

  {"fn":"fingerprint","fields":[{"bytes":"<hex>"} | {"text":"<utf-8>"} | {"int":n}
                                | {"float":x} | {"bool":b} | {"none":null} ...]}
      -> {"digest":"<hex>"}   (numbers, booleans and none hash as Python's str())
  {"fn":"page_key","prev":"<hex>","tokens":[ids],"items":[{"start","offset","length","digest"}]}
      -> {"key":"<hex>"}
  {"fn":"end_key", ...page_key fields..., "end":e} -> {"key":"<hex>"}
  {"fn":"page_items","spans":[[length, "<hex>"|null]...],"page_size":n}
      -> {"items_by_page":{"<page>":[items]}}
  {"fn":"chain","pages":[[ids]...],"items_by_page":{"<page>":[items]},"root":"<hex>"}
      -> {"keys":["<hex>"...]}
  {"fn":"layout","page_size":n,"root":"<hex>","walk":"prefill",
   "spans":[{"ids":[...]} | {"length":l,"digest":"<hex>","advance":a}]}
      -> {"keys":[...],"tail":[ids on the last partial page],"items_by_page":{...},
          "prefix_layout":[[length, advance, walk, digest|null, end_key|null]...]}
      (prefix_layout: the rows a Python preprocess stage sends; end_key only for
      an item ending inside a page; advance defaults to the span's length)
  {"fn":"extend", ...layout fields..., "sampled":[ids]}
      -> {"keyed_pages":n,"whole_page_keys":["<hex>"...],"unkeyed":[ids]}
      (the prompt's keys extended by sampled ids as the engine keys generated
      pages: a partial page's items leave it less room for ids)
  {"fn":"extend","page_size":n,"prefix_keys":["<hex>"...],"prefix_tail":[ids],
   "prefix_layout":[rows],"prefix_decode":"<name>"|null,"sampled":[ids]}
      -> the same, from a stream as a Python preprocess stage sends it

A line that is not valid JSON, names an unknown fn or has invalid arguments
yields {"error":"<what and why>"}; later lines are still processed and the
exit code is 1 if any line failed. Token ids must be in [0, 2^32).)";

// Refuses a layout of more than max_pages_per_line pages before it is made.
result<void> check_pages(std::uint64_t slots, std::int64_t page_size) {
  if (page_size < 1)
    return make_error(errc::invalid_argument,
                      fmt::format("page_size must be >= 1, got {}", page_size));
  const std::uint64_t pages = slots / static_cast<std::uint64_t>(page_size) +
                              (slots % static_cast<std::uint64_t>(page_size) != 0 ? 1 : 0);
  if (pages <= max_pages_per_line)
    return {};
  return make_error(errc::out_of_range,
                    fmt::format("{} slots at page_size {} make {} pages, more than the {} one "
                                "line may lay out",
                                slots, page_size, pages, max_pages_per_line));
}

result<json> optional_items(const json& req, std::string_view name) {
  if (!req.contains(name))
    return json::array();
  return req.at(name);
}

result<json> run_fingerprint(const json& req) {
  if (auto ok = check_fields(req, "request", {"fn", "fields"}); !ok)
    return ok.error();
  auto fields = field(req, "fields");
  if (!fields)
    return fields.error();
  if (!(*fields)->is_array()) {
    return make_error(errc::invalid_argument, "fields must be an array");
  }
  // Own every field's bytes first; fingerprint_field only borrows.
  std::vector<std::vector<std::uint8_t>> owned;
  for (std::size_t i = 0; i < (*fields)->size(); ++i) {
    const json& f = (**fields)[i];
    const std::string what = fmt::format("fields[{}]", i);
    if (!f.is_object() || f.size() != 1) {
      return make_error(errc::invalid_argument,
                        what +
                            " must be an object with exactly one of bytes, text, int, float, "
                            "bool, none");
    }
    // Hold the iterator: items() yields proxies that die with the statement.
    const auto entry = f.begin();
    const std::string& kind = entry.key();
    const json& value = entry.value();
    std::string text;
    if (kind == "bytes") {
      auto b = to_bytes(value, what + ".bytes");
      if (!b)
        return b.error();
      owned.push_back(std::move(*b));
      continue;
    } else if (kind == "text" && value.is_string()) {
      text = value.get<std::string>();
    } else if (kind == "int" && value.is_number_integer()) {
      text = value.dump();
    } else if (kind == "float" && value.is_number()) {
      text = resources::python_float_text(value.get<double>());
    } else if (kind == "bool" && value.is_boolean()) {
      text = value.get<bool>() ? "True" : "False";
    } else if (kind == "none" && value.is_null()) {
      text = "None";
    } else {
      return make_error(errc::invalid_argument,
                        fmt::format("{}: '{}' with a {} value is not a field kind (bytes: hex "
                                    "string, text: string, int, float, bool, none: null)",
                                    what, text_excerpt(kind), value.type_name()));
    }
    owned.emplace_back(text.begin(), text.end());
  }
  const std::vector<resources::byte_view> views(owned.begin(), owned.end());
  return json{{"digest", to_hex(resources::fingerprint(std::span{views}))}};
}

result<json> run_page_key(const json& req, bool with_end) {
  if (auto ok = with_end ? check_fields(req, "request", {"fn", "prev", "tokens", "items", "end"})
                         : check_fields(req, "request", {"fn", "prev", "tokens", "items"});
      !ok) {
    return ok.error();
  }
  auto prev = optional_bytes(req, "prev");
  if (!prev)
    return prev.error();
  auto tokens_json = field(req, "tokens");
  if (!tokens_json)
    return tokens_json.error();
  auto tokens = to_tokens(**tokens_json, "tokens");
  if (!tokens)
    return tokens.error();
  auto items_json = optional_items(req, "items");
  auto items = to_items(*items_json, "items");
  if (!items)
    return items.error();
  if (!with_end) {
    auto key = resources::page_key(*prev, *tokens, *items);
    if (!key)
      return key.error();
    return json{{"key", to_hex(*key)}};
  }
  auto end_json = field(req, "end");
  if (!end_json)
    return end_json.error();
  auto end = to_int(**end_json, "end", 0, std::numeric_limits<std::uint32_t>::max());
  if (!end)
    return end.error();
  auto key = resources::end_key(*prev, *tokens, *items, static_cast<std::uint64_t>(*end));
  if (!key)
    return key.error();
  return json{{"key", to_hex(*key)}};
}

result<json> run_page_items(const json& req) {
  if (auto ok = check_fields(req, "request", {"fn", "spans", "page_size"}); !ok)
    return ok.error();
  auto spans_json = array_field(req, "spans");
  if (!spans_json)
    return spans_json.error();
  std::vector<resources::layout_span> spans;
  for (std::size_t i = 0; i < (*spans_json)->size(); ++i) {
    const json& s = (**spans_json)[i];
    const std::string what = fmt::format("spans[{}]", i);
    if (!s.is_array() || s.size() != 2) {
      return make_error(errc::invalid_argument, what + " must be [length, \"<hex>\" | null]");
    }
    auto length = to_int(s[0], what + "[0] (length)", 0, std::numeric_limits<std::int64_t>::max());
    if (!length)
      return length.error();
    resources::layout_span span{static_cast<std::uint64_t>(*length), std::nullopt};
    if (!s[1].is_null()) {
      auto d = to_bytes(s[1], what + "[1] (digest)");
      if (!d)
        return d.error();
      span.digest = std::move(*d);
    }
    spans.push_back(std::move(span));
  }
  auto ps_json = field(req, "page_size");
  if (!ps_json)
    return ps_json.error();
  auto ps = to_int(**ps_json, "page_size", 1, std::numeric_limits<std::int64_t>::max());
  if (!ps)
    return ps.error();
  std::uint64_t slots = 0;
  for (const auto& span : spans) {
    const auto sum = checked_add(slots, span.length);
    if (!sum) {
      return make_error(errc::out_of_range,
                        "the spans cover more than 2^64 slots, more than a layout can key");
    }
    slots = *sum;
  }
  if (auto ok = check_pages(slots, *ps); !ok)
    return ok.error();
  auto items = resources::page_items(spans, *ps);
  if (!items)
    return items.error();
  return json{{"items_by_page", items_by_page_json(*items)}};
}

result<json> run_chain(const json& req) {
  if (auto ok = check_fields(req, "request", {"fn", "pages", "items_by_page", "root"}); !ok) {
    return ok.error();
  }
  auto pages_json = array_field(req, "pages");
  if (!pages_json)
    return pages_json.error();
  std::vector<std::vector<resources::token_id>> pages;
  for (std::size_t i = 0; i < (*pages_json)->size(); ++i) {
    auto ids = to_tokens((**pages_json)[i], fmt::format("pages[{}]", i));
    if (!ids)
      return ids.error();
    pages.push_back(std::move(*ids));
  }
  resources::items_by_page items;
  if (req.contains("items_by_page")) {
    auto parsed = to_items_by_page(req.at("items_by_page"), "items_by_page");
    if (!parsed)
      return parsed.error();
    items = std::move(*parsed);
  }
  auto root = optional_bytes(req, "root");
  if (!root)
    return root.error();
  auto keys = resources::chain(pages, items, *root);
  if (!keys)
    return keys.error();
  return json{{"keys", keys_json(*keys)}};
}

result<resources::prompt_span> to_prompt_span(const json& s, const std::string& what) {
  if (s.is_object() && s.contains("ids")) {
    if (auto ok = check_fields(s, what, {"ids"}); !ok)
      return ok.error();
    auto ids = to_tokens(s.at("ids"), what + ".ids");
    if (!ids)
      return ids.error();
    return resources::prompt_span{resources::id_span{std::move(*ids)}};
  }
  if (auto ok = check_fields(s, what, {"length", "digest", "advance"}); !ok)
    return ok.error();
  auto length = field(s, "length");
  auto digest = field(s, "digest");
  if (!length || !digest) {
    return make_error(errc::invalid_argument,
                      what + " must be {\"ids\":[...]} or {\"length\":l,\"digest\":\"<hex>\"}");
  }
  auto l = to_int(**length, what + ".length", 1, std::numeric_limits<std::uint32_t>::max());
  if (!l)
    return l.error();
  auto d = to_bytes(**digest, what + ".digest");
  if (!d)
    return d.error();
  return resources::prompt_span{
      resources::item_span{static_cast<std::uint64_t>(*l), std::move(*d)}};
}

// A prompt layout as `layout` and `extend` read it: its spans and page size,
// refused before anything is keyed when it would make too many pages.
struct layout_request {
  std::vector<resources::prompt_span> spans;
  std::vector<std::uint64_t> advances;  ///< per span: its "advance", else its length
  std::int64_t page_size = 0;
};

result<layout_request> to_layout_request(const json& req) {
  auto spans_json = array_field(req, "spans");
  if (!spans_json)
    return spans_json.error();
  layout_request out;
  for (std::size_t i = 0; i < (*spans_json)->size(); ++i) {
    const json& s = (**spans_json)[i];
    const std::string what = fmt::format("spans[{}]", i);
    auto span = to_prompt_span(s, what);
    if (!span)
      return span.error();
    const auto* ids = std::get_if<resources::id_span>(&*span);
    std::uint64_t advance = ids ? ids->ids.size() : std::get<resources::item_span>(*span).length;
    if (!ids && s.contains("advance")) {
      auto a =
          to_int(s.at("advance"), what + ".advance", 0, std::numeric_limits<std::uint32_t>::max());
      if (!a)
        return a.error();
      advance = static_cast<std::uint64_t>(*a);
    }
    out.spans.push_back(std::move(*span));
    out.advances.push_back(advance);
  }
  auto ps_json = field(req, "page_size");
  if (!ps_json)
    return ps_json.error();
  auto ps = to_int(**ps_json, "page_size", 1, std::numeric_limits<std::int64_t>::max());
  if (!ps)
    return ps.error();
  out.page_size = *ps;
  std::uint64_t slots = 0;  // each span is below 2^32 slots: no overflow
  for (const auto& span : out.spans) {
    const auto* ids = std::get_if<resources::id_span>(&span);
    slots += ids ? ids->ids.size() : std::get<resources::item_span>(span).length;
  }
  if (auto ok = check_pages(slots, out.page_size); !ok)
    return ok.error();
  return out;
}

result<json> run_layout(const json& req) {
  if (auto ok = check_fields(req, "request", {"fn", "page_size", "root", "spans", "walk"}); !ok) {
    return ok.error();
  }
  // The Python stage names the model's prefill walk; "prefill" is ours.
  std::string walk = "prefill";
  if (req.contains("walk")) {
    if (!req.at("walk").is_string())
      return make_error(errc::invalid_argument, "walk must be a string");
    walk = req.at("walk").get<std::string>();
  }
  auto layout = to_layout_request(req);
  if (!layout)
    return layout.error();
  auto root = optional_bytes(req, "root");
  if (!root)
    return root.error();
  auto keyed = resources::key_prompt(layout->spans, layout->page_size, *root);
  if (!keyed)
    return keyed.error();
  auto rows = resources::prefix_layout_rows(layout->spans, layout->advances, *keyed,
                                            layout->page_size, walk, *root);
  if (!rows)
    return rows.error();
  return json{{"keys", keys_json(keyed->keys)},
              {"tail", keyed->tail},
              {"items_by_page", items_by_page_json(keyed->items)},
              {"prefix_layout", prefix_rows_json(*rows)}};
}

// The chain generation starts from, for a prompt given as spans.
result<resources::page_chain> chain_of_layout(const json& req) {
  auto layout = to_layout_request(req);
  if (!layout)
    return layout.error();
  auto root = optional_bytes(req, "root");
  if (!root)
    return root.error();
  auto keyed = resources::key_prompt(layout->spans, layout->page_size, *root);
  if (!keyed)
    return keyed.error();
  return resources::start_page_chain(*keyed, layout->page_size, *root);
}

// The chain generation starts from, for a stream as a Python preprocess
// stage sends it: the seed the engine would ingest.
result<resources::page_chain> chain_of_python(const json& req) {
  auto ps_json = field(req, "page_size");
  if (!ps_json)
    return ps_json.error();
  auto ps = to_int(**ps_json, "page_size", 1, std::numeric_limits<std::int64_t>::max());
  if (!ps)
    return ps.error();
  auto stream = to_python_stream(req, *ps);
  if (!stream)
    return stream.error();
  return resources::start_page_chain(stream->seed, *ps);
}

// What the engine keys after a prompt once sampled ids arrive: the prompt is
// keyed as `layout` keys it, then the ids go through extend_page_chain, the
// function the KV pool keys generated pages with.
result<json> run_extend(const json& req) {
  const bool python = req.contains("prefix_keys");
  if (auto ok = python
                    ? check_fields(req, "request",
                                   {"fn", "page_size", "prefix_keys", "prefix_tail",
                                    "prefix_layout", "prefix_decode", "sampled"})
                    : check_fields(req, "request", {"fn", "page_size", "root", "spans", "sampled"});
      !ok) {
    return ok.error();
  }
  auto sampled_json = field(req, "sampled");
  if (!sampled_json)
    return sampled_json.error();
  auto sampled = to_tokens(**sampled_json, "sampled");
  if (!sampled)
    return sampled.error();
  auto chain = python ? chain_of_python(req) : chain_of_layout(req);
  if (!chain)
    return chain.error();
  const std::int64_t ps = req.at("page_size").get<std::int64_t>();  // checked by chain_of_*
  if (auto ok = check_pages(sampled->size(), ps); !ok)
    return ok.error().with_context("sampled");
  // A Python stream without prefix_decode declares no decode walk: the
  // engine keys none of its generated pages (§1.8), so neither does this.
  const bool decodes =
      !python || (req.contains("prefix_decode") && !req["prefix_decode"].is_null());
  if (decodes) {
    if (auto added = resources::extend_page_chain(*chain, *sampled, ps); !added)
      return added.error();
  }
  const auto whole = std::span{chain->keys}.first(static_cast<std::size_t>(chain->keyed_pages));
  return json{{"keyed_pages", chain->keyed_pages},
              {"whole_page_keys", keys_json(whole)},
              {"unkeyed", chain->unkeyed}};
}

result<json> run_line(const std::string& line) {
  auto parsed = parse_line(line);
  if (!parsed)
    return parsed.error();
  const json& req = *parsed;
  if (!req.is_object())
    return make_error(errc::invalid_argument, "a request must be a JSON object");
  auto fn = field(req, "fn");
  if (!fn)
    return fn.error();
  if (!(*fn)->is_string())
    return make_error(errc::invalid_argument, "fn must be a string");
  const auto& name = (*fn)->get_ref<const std::string&>();
  if (name == "fingerprint")
    return run_fingerprint(req);
  if (name == "page_key")
    return run_page_key(req, false);
  if (name == "end_key")
    return run_page_key(req, true);
  if (name == "page_items")
    return run_page_items(req);
  if (name == "chain")
    return run_chain(req);
  if (name == "layout")
    return run_layout(req);
  if (name == "extend")
    return run_extend(req);
  return make_error(errc::invalid_argument,
                    fmt::format("unknown fn '{}' (fingerprint, page_key, end_key, page_items, "
                                "chain, layout, extend)",
                                text_excerpt(name)));
}

}  // namespace

json answer_keys_line(const std::string& line, bool too_long, std::size_t number, bool& valid) {
  auto out = too_long ? result<json>{line_too_long()} : run_line(line);
  valid = static_cast<bool>(out);
  if (!out)
    return json{{"error", fmt::format("line {}: {}", number, out.error().message())}};
  return std::move(*out);
}

void add_keys_command(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("keys", "Compute page keys: JSON Lines on stdin, one JSON line out");
  cmd->footer(keys_help);
  cmd->callback([&exit_code] {
    std::string line;
    std::size_t number = 0;
    bool too_long = false;
    while (read_line(std::cin, line, too_long)) {
      ++number;
      bool valid = true;
      const json out = answer_keys_line(line, too_long, number, valid);
      std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
      if (!valid)
        exit_code = 1;
    }
    std::cout.flush();
  });
}

}  // namespace mstar::tool
