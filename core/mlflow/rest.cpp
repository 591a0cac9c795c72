// MLflow's REST requests and answers as JSON text, without the network.
#include "core/mlflow/rest.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace air::mlflow {

namespace {

using Json = nlohmann::ordered_json;

Json key_values(const std::vector<KeyValue>& items, std::size_t limit) {
  Json out = Json::array();
  for (const auto& kv : items) out.push_back({{"key", kv.key}, {"value", truncate_value(kv.value, limit)}});
  return out;
}

Json metric_json(const MetricPoint& m) {
  return {{"key", m.key}, {"value", m.value}, {"timestamp", m.timestamp}, {"step", m.step}};
}

// Answers may hold invalid UTF-8 in messages; never throw on them.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::optional<Json> parse_object(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::string excerpt(std::string_view body) {
  std::string out(body.substr(0, 200));
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return body.size() > 200 ? out + "..." : out;
}

Error bad_answer(std::string_view endpoint, std::string_view why, std::string_view body) {
  return Error{ErrorKind::system,
               std::string(endpoint) + ": unexpected answer (" + std::string(why) + "): " + excerpt(body)};
}

// Ids are strings in MLflow's JSON; an integer is accepted too (older servers).
std::optional<std::string> id_field(const Json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) return std::nullopt;
  if (it->is_string() && !it->get<std::string>().empty()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<long long>());
  return std::nullopt;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

} // namespace

std::string api_url(std::string_view base, std::string_view endpoint) {
  std::string out(base);
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out + "/api/2.0/mlflow/" + std::string(endpoint);
}

std::string query_escape(std::string_view text) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool unreserved = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
                            u == '-' || u == '_' || u == '.' || u == '~';
    if (unreserved) {
      out += c;
    } else {
      out += '%';
      out += k_hex[u >> 4];
      out += k_hex[u & 15];
    }
  }
  return out;
}

std::string truncate_value(std::string_view value, std::size_t limit) {
  if (value.size() <= limit || limit < 3) return std::string(value);
  std::size_t cut = limit - 3;
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  return std::string(value.substr(0, cut)) + "...";
}

std::string create_experiment_body(std::string_view name, const std::vector<KeyValue>& tags) {
  Json body;
  body["name"] = name;
  if (!tags.empty()) body["tags"] = key_values(tags, k_max_tag_value);
  return dump(body);
}

std::string create_run_body(std::string_view experiment_id, std::string_view run_name,
                            std::int64_t start_time_ms, const std::vector<KeyValue>& tags) {
  Json body;
  body["experiment_id"] = experiment_id;
  if (!run_name.empty()) body["run_name"] = run_name;
  body["start_time"] = start_time_ms;
  if (!tags.empty()) body["tags"] = key_values(tags, k_max_tag_value);
  return dump(body);
}

std::vector<std::string> log_batch_bodies(std::string_view run_id, const std::vector<KeyValue>& params,
                                          const std::vector<MetricPoint>& metrics,
                                          const std::vector<KeyValue>& tags) {
  std::vector<std::string> bodies;
  std::size_t p = 0;
  std::size_t m = 0;
  std::size_t t = 0;
  while (p < params.size() || m < metrics.size() || t < tags.size()) {
    // Params first (they are immutable and matter most), then tags, then metrics.
    const std::size_t np = std::min(params.size() - p, k_batch_max_params);
    const std::size_t nt = std::min({tags.size() - t, k_batch_max_tags, k_batch_max_items - np});
    const std::size_t nm = std::min({metrics.size() - m, k_batch_max_metrics, k_batch_max_items - np - nt});
    Json body;
    body["run_id"] = run_id;
    if (np > 0) body["params"] = key_values({params.begin() + p, params.begin() + p + np}, k_max_param_value);
    if (nm > 0) {
      Json list = Json::array();
      for (std::size_t i = m; i < m + nm; ++i) list.push_back(metric_json(metrics[i]));
      body["metrics"] = std::move(list);
    }
    if (nt > 0) body["tags"] = key_values({tags.begin() + t, tags.begin() + t + nt}, k_max_tag_value);
    bodies.push_back(dump(body));
    p += np;
    m += nm;
    t += nt;
  }
  return bodies;
}

std::string search_runs_by_tag_body(std::string_view experiment_id, std::string_view key,
                                    std::string_view value) {
  Json body;
  body["experiment_ids"] = Json::array({experiment_id});
  body["filter"] = "tags." + std::string(key) + " = '" + std::string(value) + "'";
  return dump(body);
}

std::string update_run_body(std::string_view run_id, std::string_view status, std::int64_t end_time_ms) {
  Json body;
  body["run_id"] = run_id;
  body["status"] = status;
  body["end_time"] = end_time_ms;
  return dump(body);
}

std::optional<ApiError> parse_api_error(std::string_view body) {
  const auto j = parse_object(body);
  if (!j) return std::nullopt;
  const auto code = j->find("error_code");
  if (code == j->end() || !code->is_string()) return std::nullopt;
  ApiError e;
  e.code = code->get<std::string>();
  const auto message = j->find("message");
  if (message != j->end() && message->is_string()) e.message = message->get<std::string>();
  return e;
}

Expected<std::string> parse_experiment_lookup(std::string_view body) {
  const auto j = parse_object(body);
  if (!j) return bad_answer("experiments/get-by-name", "not a JSON object", body);
  const auto experiment = j->find("experiment");
  if (experiment == j->end() || !experiment->is_object())
    return bad_answer("experiments/get-by-name", "no experiment", body);
  auto id = id_field(*experiment, "experiment_id");
  if (!id) return bad_answer("experiments/get-by-name", "no experiment_id", body);
  return *id;
}

Expected<std::string> parse_experiment_created(std::string_view body) {
  const auto j = parse_object(body);
  if (!j) return bad_answer("experiments/create", "not a JSON object", body);
  auto id = id_field(*j, "experiment_id");
  if (!id) return bad_answer("experiments/create", "no experiment_id", body);
  return *id;
}

namespace {

/// One run object of an answer: `{"info": {...}, "data": ...}`.
Expected<RunRef> run_ref(const Json& run, std::string_view body) {
  if (!run.is_object()) return bad_answer("runs", "no run", body);
  const auto info = run.find("info");
  if (info == run.end() || !info->is_object()) return bad_answer("runs", "no run.info", body);
  RunRef ref;
  auto run_id = id_field(*info, "run_id");
  if (!run_id) run_id = id_field(*info, "run_uuid"); // the older name of the same id
  auto experiment_id = id_field(*info, "experiment_id");
  if (!run_id || !experiment_id) return bad_answer("runs", "no run_id or experiment_id", body);
  ref.run_id = *run_id;
  ref.experiment_id = *experiment_id;
  const auto text = [&](const char* name) {
    const auto it = info->find(name);
    return it != info->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  ref.artifact_uri = text("artifact_uri");
  ref.status = text("status");
  ref.lifecycle_stage = text("lifecycle_stage");
  return ref;
}

} // namespace

Expected<RunRef> parse_run(std::string_view body) {
  const auto j = parse_object(body);
  if (!j) return bad_answer("runs", "not a JSON object", body);
  const auto run = j->find("run");
  if (run == j->end()) return bad_answer("runs", "no run", body);
  return run_ref(*run, body);
}

Expected<std::vector<RunRef>> parse_searched_runs(std::string_view body) {
  const auto j = parse_object(body);
  if (!j) return bad_answer("runs/search", "not a JSON object", body);
  std::vector<RunRef> out;
  const auto runs = j->find("runs");
  if (runs == j->end()) return out; // MLflow leaves the list out when it is empty
  if (!runs->is_array()) return bad_answer("runs/search", "runs is not a list", body);
  for (const auto& run : *runs) {
    auto ref = run_ref(run, body);
    if (!ref) return ref.error();
    out.push_back(std::move(*ref));
  }
  return out;
}

std::optional<std::string> proxied_artifact_path(std::string_view uri) {
  constexpr std::string_view scheme = "mlflow-artifacts:";
  if (!starts_with(uri, scheme)) return std::nullopt;
  std::string_view rest = uri.substr(scheme.size());
  if (starts_with(rest, "//")) { // mlflow-artifacts://host:port/path
    const std::size_t slash = rest.find('/', 2);
    if (slash == std::string_view::npos) return std::nullopt;
    rest = rest.substr(slash);
  }
  while (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty()) return std::nullopt;
  return std::string(rest);
}

std::string artifact_url(std::string_view base, std::string_view proxied_path, std::string_view name) {
  std::string out(base);
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out + "/api/2.0/mlflow-artifacts/artifacts/" + std::string(proxied_path) + "/" + std::string(name);
}

} // namespace air::mlflow
