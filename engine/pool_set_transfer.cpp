// pool_set: publishing a request's streams on a prefill node and adopting
// them on a decode node, across the pools the set holds.
#include <fmt/format.h>

#include "engine/pool_set.hpp"

namespace mstar::engine {

result<publication> pool_set::publish(const resources::request_id& rid) {
  if ((kv_ && kv_->exported(rid)) || (rec_ && rec_->exported(rid))) {
    return make_error(
        errc::invalid_argument,
        fmt::format("request {} is published already (release_publication first)", rid));
  }
  // Every hold of `rid` is this call's from here on, so undoing drops all.
  const auto undo = [&] {
    if (kv_ && kv_->exported(rid))
      (void)kv_->release_export(rid);
    if (rec_ && rec_->exported(rid))
      (void)rec_->release_export(rid);
  };
  publication out;
  if (kv_) {
    for (const auto& label : kv_->labels(rid)) {
      auto part = kv_->export_stream(rid, label);
      if (!part) {
        undo();
        return part.error();
      }
      out.streams[label].kv = std::move(*part);
    }
  }
  if (rec_) {
    for (const auto& label : rec_->labels(rid)) {
      auto part = rec_->export_slot(rid, label);
      if (!part) {
        undo();
        return part.error();
      }
      out.streams[label].recurrent = *part;
    }
  }
  if (out.streams.empty()) {
    return make_error(errc::not_found,
                      fmt::format("request {} holds no stream in this pool set to publish", rid));
  }
  return out;
}

result<void> pool_set::release_publication(const resources::request_id& rid) {
  bool any = false;
  if (kv_ && kv_->exported(rid)) {
    (void)kv_->release_export(rid);
    any = true;
  }
  if (rec_ && rec_->exported(rid)) {
    (void)rec_->release_export(rid);
    any = true;
  }
  if (!any)
    return make_error(errc::not_found, fmt::format("request {} has no publication held", rid));
  return {};
}

result<adoption> pool_set::adopt(const resources::request_id& rid, const publication& from) {
  if ((kv_ && !kv_->labels(rid).empty()) || (rec_ && !rec_->labels(rid).empty())) {
    return make_error(errc::invalid_argument,
                      fmt::format("request {} already holds streams in this pool set", rid));
  }
  if ((kv_ && !from.has_kv()) || (rec_ && !from.has_recurrent())) {
    return make_error(errc::invalid_argument,
                      fmt::format("the publication of request {} carries no {} part, which this "
                                  "pool set keeps",
                                  rid, kv_ && !from.has_kv() ? "KV" : "recurrent"));
  }
  // Every import of `rid` is this call's (it held no stream before).
  const auto undo = [&] {
    if (kv_ && kv_->importing(rid))
      (void)kv_->abort_import(rid);
    if (rec_ && rec_->importing(rid))
      (void)rec_->abort_import(rid);
  };
  adoption out;
  for (const auto& [label, part] : from.streams) {
    if (!kv_ || !part.kv)
      continue;
    auto taken = kv_->import_stream(rid, label, *part.kv);
    if (!taken) {
      undo();
      return taken.error();
    }
    out.streams[label].kv = std::move(*taken);
  }
  for (const auto& [label, part] : from.streams) {
    if (!rec_ || !part.recurrent)
      continue;
    auto taken = rec_->import_slot(rid, label, *part.recurrent);
    if (!taken) {
      undo();
      return taken.error();
    }
    out.streams[label].recurrent = *taken;
  }
  return out;
}

result<void> pool_set::finish_adopt(const resources::request_id& rid) {
  bool any = false;
  if (kv_ && kv_->importing(rid)) {
    if (auto ok = kv_->finish_import(rid); !ok)
      return ok;
    any = true;
  }
  if (rec_ && rec_->importing(rid)) {
    if (auto ok = rec_->finish_import(rid); !ok)
      return ok;
    any = true;
  }
  if (!any)
    return make_error(errc::not_found, fmt::format("request {} is not being adopted", rid));
  return {};
}

result<void> pool_set::abort_adopt(const resources::request_id& rid) {
  bool any = false;
  if (kv_ && kv_->importing(rid)) {
    (void)kv_->abort_import(rid);
    any = true;
  }
  if (rec_ && rec_->importing(rid)) {
    (void)rec_->abort_import(rid);
    any = true;
  }
  if (!any)
    return make_error(errc::not_found, fmt::format("request {} is not being adopted", rid));
  return {};
}

}  // namespace mstar::engine
