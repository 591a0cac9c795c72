// Node 0's gathering of one job-wide hang diagnosis. Pure.
#include "core/cluster/hang_round.hpp"

namespace air {

int HangRound::start(Clock::time_point now, std::chrono::milliseconds wait) {
  ++number_;
  deadline_ = now + wait;
  places_.clear();
  counts_.clear();
  return number_;
}

void HangRound::take_place(int round, int node, int count, const HangRank& place) {
  if (!deadline_ || round != number_) return;
  auto& places = places_[node];
  counts_[node] = count;
  if (places.size() < static_cast<std::size_t>(count)) places.push_back(place);
}

void HangRound::take_places(int node, const std::vector<HangRank>& places) {
  if (!deadline_) return;
  places_[node] = places;
  counts_[node] = static_cast<int>(places.size());
}

bool HangRound::node_complete(int node) const {
  const auto count = counts_.find(node);
  const auto places = places_.find(node);
  return count != counts_.end() && places != places_.end() &&
         places->second.size() >= static_cast<std::size_t>(count->second);
}

std::optional<JobPlaces> HangRound::complete(const std::vector<int>& awaited, int num_nodes,
                                             Clock::time_point now) {
  if (!deadline_) return std::nullopt;
  bool all = true;
  for (const int node : awaited)
    if (!node_complete(node)) all = false;
  if (!all && now < *deadline_) return std::nullopt;
  deadline_.reset();
  JobPlaces job = merge_places(places_, num_nodes);
  places_.clear();
  counts_.clear();
  return job;
}

void HangRound::cancel() { deadline_.reset(); }

} // namespace air
