#include "core/hang/job_hang.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace air {

JobPlaces merge_places(const std::map<int, std::vector<HangRank>>& by_node, int num_nodes,
                       const std::vector<int>& done) {
  JobPlaces out;
  std::set<int> seen;
  for (const auto& [node, ranks] : by_node) { // in node order: the lower node wins a claimed rank
    for (HangRank r : ranks) {
      if (!seen.insert(r.rank).second) continue;
      r.node = node;
      out.ranks.push_back(std::move(r));
    }
  }
  std::stable_sort(out.ranks.begin(), out.ranks.end(),
                   [](const HangRank& a, const HangRank& b) { return a.rank < b.rank; });
  for (int node = 0; node < num_nodes; ++node) {
    if (by_node.find(node) != by_node.end()) continue;
    if (std::find(done.begin(), done.end(), node) != done.end())
      out.done_nodes.push_back(node);
    else
      out.missing_nodes.push_back(node);
  }
  return out;
}

QuietVerdict judge_job_quiet(const JobPlaces& places) {
  if (places.ranks.empty()) return {}; // nothing seen: a hang, as before
  std::vector<QuietRank> ranks;
  for (const HangRank& h : places.ranks) {
    QuietRank q;
    q.rank = h.rank;
    q.running = h.running;
    q.exited_ok = !h.running && h.exited_ok;
    q.in_collective = h.in_collective;
    q.working = h.running && h.working;
    ranks.push_back(q);
  }
  // A node that is done stands for its ranks, all exited 0 (their numbers do not matter here).
  if (!places.done_nodes.empty()) {
    QuietRank done;
    done.rank = -1;
    done.running = false;
    done.exited_ok = true;
    ranks.push_back(done);
  }
  return judge_quiet(ranks);
}

HangDiagnosis diagnose_job_hang(const JobPlaces& places) {
  HangDiagnosis d = diagnose_hang(places.ranks);
  if (!places.missing_nodes.empty()) {
    if (!d.line.empty()) d.line += "; ";
    d.line += (places.missing_nodes.size() == 1 ? "node " : "nodes ") + rank_words(places.missing_nodes) +
              " sent no places";
  }
  return d;
}

} // namespace air
