#include "core/hang/job_hang.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace air {

JobPlaces merge_places(const std::map<int, std::vector<HangRank>>& by_node, int num_nodes) {
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
  for (int node = 0; node < num_nodes; ++node)
    if (by_node.find(node) == by_node.end()) out.missing_nodes.push_back(node);
  return out;
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
