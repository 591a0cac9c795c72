// Node 0's gathering of one job-wide hang diagnosis. Pure.
#include "core/cluster/hang_round.hpp"

namespace air {

int HangRound::start(Clock::time_point now, std::chrono::milliseconds wait) {
  ++number_;
  deadline_ = now + wait;
  places_.clear();
  counts_.clear();
  work_.clear();
  return number_;
}

void HangRound::take_place(int round, int node, int count, const HangRank& place) {
  if (!deadline_ || round != number_) return;
  auto& places = places_[node];
  counts_[node] = count;
  if (places.size() < static_cast<std::size_t>(count)) places.push_back(place);
}

void HangRound::take_work(int round, int node, int rank, bool working, bool exited_ok) {
  if (!deadline_ || round != number_) return;
  work_[{node, rank}] = {working, exited_ok};
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
                                             Clock::time_point now, const std::vector<int>& done) {
  if (!deadline_) return std::nullopt;
  bool all = true;
  for (const int node : awaited)
    if (!node_complete(node)) all = false;
  if (!all && now < *deadline_) return std::nullopt;
  deadline_.reset();
  // An agent that sends no `work` (an older air-run) leaves its ranks as they came: not working.
  for (auto& [node, places] : places_)
    for (HangRank& place : places)
      if (const auto work = work_.find({node, place.rank}); work != work_.end()) {
        place.working = work->second.first;
        place.exited_ok = work->second.second;
      }
  JobPlaces job = merge_places(places_, num_nodes, done);
  places_.clear();
  counts_.clear();
  work_.clear();
  return job;
}

void HangRound::cancel() { deadline_.reset(); }

} // namespace air
