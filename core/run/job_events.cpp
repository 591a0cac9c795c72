#include "core/run/job_events.hpp"

#include <utility>

namespace air {

NodeEvent NodeEvent::failed_with(const RunOutcome& outcome) {
  NodeEvent e;
  e.kind = Kind::failed;
  e.outcome = &outcome;
  return e;
}

NodeEvent NodeEvent::quiet_ranks() {
  NodeEvent e;
  e.kind = Kind::quiet;
  return e;
}

NodeEvent NodeEvent::placed_ranks(std::vector<HangRank> places) {
  NodeEvent e;
  e.kind = Kind::placed;
  e.places = std::move(places);
  return e;
}

NodeEvent NodeEvent::no_hang_found() {
  NodeEvent e;
  e.kind = Kind::no_hang;
  return e;
}

NodeEvent NodeEvent::preempted_by(int signal, const NodeSteps& steps, std::chrono::milliseconds grace) {
  NodeEvent e;
  e.kind = Kind::preempted;
  e.signal = signal;
  e.steps = steps;
  e.grace = grace;
  return e;
}

NodeEvent NodeEvent::counted_steps(const NodeSteps& steps) {
  NodeEvent e;
  e.kind = Kind::counted;
  e.steps = steps;
  return e;
}

JobEvent JobEvent::of(Kind kind) {
  JobEvent e;
  e.kind = kind;
  return e;
}

JobEvent JobEvent::stop_at(JobStop stop) {
  JobEvent e;
  e.kind = Kind::stop;
  e.stop = std::move(stop);
  return e;
}

JobEvent JobEvent::failed_with(RemoteFailure failure) {
  JobEvent e;
  e.kind = Kind::failed;
  e.failure = std::move(failure);
  return e;
}

JobEvent JobEvent::places_of(JobPlaces places) {
  JobEvent e;
  e.kind = Kind::places;
  e.places = std::move(places);
  return e;
}

} // namespace air
