#include "core/hang/flight_recorder.hpp"

#include <nlohmann/json.hpp>

namespace air {

std::optional<FlightRecorderState> parse_flight_recorder(std::string_view json_text) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("entries") || !doc["entries"].is_array()) return std::nullopt;
  std::optional<FlightRecorderState> out;
  try {
    for (const auto& e : doc["entries"]) {
      if (!e.is_object()) continue;
      // The default group only: a job's other groups (tensor parallel, ...)
      // have sequences of their own that are not comparable across ranks.
      if (e.value("pg_id", -1) != 0 || e.value("is_p2p", false)) continue;
      const auto seq = e.value("collective_seq_id", std::uint64_t{0});
      if (!out) out = FlightRecorderState{};
      const std::string state = e.value("state", std::string());
      if (state == "completed" && seq > out->last_completed) out->last_completed = seq;
      if (seq >= out->last_enqueued) {
        out->last_enqueued = seq;
        out->last_op = e.value("profiling_name", std::string());
        out->last_state = state;
      }
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt; // a field of another type: not a dump this reader knows
  }
  return out;
}

} // namespace air
