// Which connections node 0 keeps while the nodes join (see join_admission.hpp).
#include "core/cluster/join_admission.hpp"

#include <map>

namespace air {

namespace {

/// The oldest connection from `source` that never authenticated and is past the grace time.
std::optional<std::size_t> oldest_silent(const std::vector<WaitingConnection>& waiting,
                                         const std::string& source, std::chrono::steady_clock::time_point now,
                                         const AdmissionLimits& limits) {
  std::optional<std::size_t> oldest;
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    const auto& w = waiting[i];
    if (w.source != source || w.authenticated || now - w.connected < limits.grace) continue;
    if (!oldest || w.connected < waiting[*oldest].connected) oldest = i;
  }
  return oldest;
}

/// The source holding the most waiting connections ("" when none wait).
std::string busiest_source(const std::vector<WaitingConnection>& waiting) {
  std::map<std::string, std::size_t> count;
  std::string busiest;
  std::size_t most = 0;
  for (const auto& w : waiting) {
    if (const std::size_t n = ++count[w.source]; n > most) {
      most = n;
      busiest = w.source;
    }
  }
  return busiest;
}

Admission make_room(std::optional<std::size_t> victim) {
  if (!victim) return {Admission::Verdict::refuse, 0};
  return {Admission::Verdict::evict_then_admit, *victim};
}

} // namespace

Admission admit_connection(const std::vector<WaitingConnection>& waiting, const std::string& source,
                           std::chrono::steady_clock::time_point now, const AdmissionLimits& limits) {
  std::size_t same = 0;
  for (const auto& w : waiting) same += w.source == source ? 1 : 0;
  if (same >= limits.max_per_source) return make_room(oldest_silent(waiting, source, now, limits));
  if (waiting.size() >= limits.max_waiting)
    return make_room(oldest_silent(waiting, busiest_source(waiting), now, limits));
  return {};
}

std::optional<std::size_t> connection_to_drop(const std::vector<WaitingConnection>& waiting,
                                              std::chrono::steady_clock::time_point now,
                                              const AdmissionLimits& limits) {
  return oldest_silent(waiting, busiest_source(waiting), now, limits);
}

} // namespace air
