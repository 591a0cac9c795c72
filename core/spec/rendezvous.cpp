// The torchrun rendezvous keys (rdzv_backend, rdzv_endpoint, rdzv_id,
// rdzv_conf, standalone, nnodes MIN:MAX): parsing and the rules between them.
#include "core/spec/rendezvous.hpp"

#include "core/base/duration.hpp"
#include "core/base/text.hpp"

#include <algorithm>

namespace air {

namespace {

/// The backends air-run implements, as torchrun spells them.
constexpr std::string_view k_backends[] = {"static", "c10d"};

/// rdzv_conf keys air-run acts on; torchrun's others (is_host, store_type,
/// timeout, ...) are accepted and have no effect here.
constexpr std::string_view k_timeout_keys[] = {"join_timeout", "last_call_timeout", "read_timeout"};

} // namespace

Expected<Endpoint> parse_endpoint(std::string_view text, std::string_view what) {
  const std::string prefix(what);
  Endpoint e;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos)
      return usage_error(prefix + ": unclosed '[' in " + single_quoted(text) + " (IPv6 as [ADDR]:PORT)");
    e.host = std::string(text.substr(1, close - 1));
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        return usage_error(prefix + ": expected ':PORT' after ']' in " + single_quoted(text));
      port = rest.substr(1);
      if (port.empty()) return usage_error(prefix + ": empty port in " + single_quoted(text));
    }
  } else {
    const std::size_t colon = text.rfind(':');
    const bool one_colon = colon != std::string_view::npos && text.find(':') == colon;
    e.host = std::string(one_colon ? text.substr(0, colon) : text);
    if (one_colon) {
      port = text.substr(colon + 1);
      if (port.empty()) return usage_error(prefix + ": empty port in " + single_quoted(text));
    }
  }
  if (e.host.empty())
    return usage_error(prefix + ": no host in " + single_quoted(text) + " (expected HOST[:PORT])");
  if (!port.empty()) {
    if (!all_digits(port) || port.size() > 5 || std::stoi(std::string(port)) > 65535)
      return usage_error(prefix + ": bad port " + single_quoted(port) + " in " + single_quoted(text));
    e.port = std::stoi(std::string(port));
  }
  return e;
}

Expected<std::vector<std::pair<std::string, std::string>>> parse_rdzv_conf(std::string_view text,
                                                                           std::string_view what) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue; // "a=1," as torchrun's split tolerates
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return usage_error(std::string(what) + ": expected KEY=VALUE, got " + single_quoted(item));
    out.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
  }
  return out;
}

Status settle_rendezvous(LaunchSpec& spec, const PlaceOf& place) {
  auto& backend = spec.rdzv_backend;
  if (std::find(std::begin(k_backends), std::end(k_backends), backend.value) == std::end(k_backends)) {
    return usage_error(place(backend.origin, "rdzv_backend") + ": " + single_quoted(backend.value) +
                       " is not supported; air-run's rendezvous backends are static and c10d");
  }
  if (spec.standalone.value) {
    if (spec.nnodes.value > 1) {
      return usage_error(place(spec.standalone.origin, "standalone") + ": runs one node, but " +
                         place(spec.nnodes.origin, "nnodes") + " asks for " +
                         std::to_string(spec.nnodes.value));
    }
    backend.value = "c10d";
    backend.origin = spec.standalone.origin;
  }

  if (!spec.rdzv_conf.value.empty()) {
    const std::string where = place(spec.rdzv_conf.origin, "rdzv_conf");
    auto pairs = parse_rdzv_conf(spec.rdzv_conf.value, where);
    if (!pairs) return pairs.error();
    for (const auto& [key, value] : *pairs) {
      if (std::find(std::begin(k_timeout_keys), std::end(k_timeout_keys), key) == std::end(k_timeout_keys))
        continue;
      auto d = parse_duration(value, where + ": " + key);
      if (!d) return d.error();
      if (d->count() <= 0) return usage_error(where + ": " + key + ": must be greater than zero");
      if (key == "join_timeout" && spec.join_timeout.is_default()) {
        spec.join_timeout.value = *d;
        spec.join_timeout.origin = spec.rdzv_conf.origin;
      } else if (key == "last_call_timeout") {
        spec.last_call_timeout.value = *d;
        spec.last_call_timeout.origin = spec.rdzv_conf.origin;
      } else if (key == "read_timeout") {
        spec.read_timeout.value = *d;
        spec.read_timeout.origin = spec.rdzv_conf.origin;
      }
    }
  }

  if (!spec.rdzv_id.value.empty() && spec.run_id.is_default()) {
    const auto& id = spec.rdzv_id.value;
    const bool safe = std::all_of(id.begin(), id.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
             c == '_' || c == '-';
    });
    if (!safe || id == "." || id == "..") {
      return usage_error(
          place(spec.rdzv_id.origin, "rdzv_id") +
          ": becomes the run id, which may contain only letters, digits, '.', '_' and '-', got " +
          single_quoted(id));
    }
    spec.run_id.value = id;
    spec.run_id.origin = spec.rdzv_id.origin;
  }

  const bool c10d = backend.value == "c10d";
  if (!c10d && spec.nnodes_min.value != spec.nnodes.value) {
    return usage_error(place(spec.nnodes.origin, "nnodes") + ": MIN:MAX needs rdzv_backend c10d; static "
                                                             "rendezvous runs a fixed number of nodes");
  }
  // One node under c10d: the rendezvous host, "localhost" for --standalone
  // (which meets at localhost:0), is where this node binds; the ranks see this
  // host's name (master_addr_from_one_node_c10d).
  const bool one_c10d_node = c10d && spec.nnodes.value == 1 && spec.master_addr.is_default();
  if (one_c10d_node && spec.standalone.value) {
    spec.master_addr.value = "localhost";
    spec.master_addr.origin = spec.standalone.origin;
  }
  if (spec.rdzv_endpoint.value.empty()) {
    if (c10d && spec.nnodes.value > 1 && !spec.standalone.value) {
      return usage_error(place(backend.origin, "rdzv_backend") +
                         ": c10d on several nodes needs rdzv_endpoint HOST[:PORT], the agent that hosts "
                         "the join");
    }
    return ok_status();
  }
  const std::string where = place(spec.rdzv_endpoint.origin, "rdzv_endpoint");
  auto endpoint = parse_endpoint(spec.rdzv_endpoint.value, where);
  if (!endpoint) return endpoint.error();
  if (one_c10d_node && !spec.standalone.value) {
    spec.master_addr.value = endpoint->host;
    spec.master_addr.origin = spec.rdzv_endpoint.origin;
  }
  if (!c10d) {
    // Static rendezvous: the endpoint is rank 0's store, as torchrun's static handler reads it.
    spec.master_addr.value = endpoint->host;
    spec.master_addr.origin = spec.rdzv_endpoint.origin;
    if (endpoint->port >= 0) {
      spec.master_port.value = endpoint->port;
      spec.master_port.origin = spec.rdzv_endpoint.origin;
    }
  }
  return ok_status();
}

bool master_addr_from_one_node_c10d(const LaunchSpec& spec) {
  const auto same = [](const Origin& a, const Origin& b) { return a.kind == b.kind && a.where == b.where; };
  const Origin& from = spec.master_addr.origin;
  return spec.rdzv_backend.value == "c10d" && spec.nnodes.value == 1 && !spec.master_addr.is_default() &&
         ((spec.standalone.value && same(from, spec.standalone.origin)) ||
          (!spec.rdzv_endpoint.is_default() && same(from, spec.rdzv_endpoint.origin)));
}

} // namespace air
