#pragma once

#include "core/hang/diagnosis.hpp"

#include <map>
#include <vector>

// A hang diagnosed across nodes: node 0's agent gathers every node's ranks'
// places (core/cluster/control.hpp) and names the job's laggards with the same
// rules as one node's diagnosis (core/hang/diagnosis.hpp). Pure.

namespace air {

/// What node 0 gathered for a job-wide hang diagnosis.
struct JobPlaces {
  std::vector<HangRank> ranks;    ///< the answering nodes' ranks by global rank, each with its node
  std::vector<int> missing_nodes; ///< nodes that sent no place in time, in order
};

/// Puts the nodes' places together (node rank -> that node's ranks): sorted by
/// global rank, each marked with its node. A rank that two nodes claim is kept
/// once, from the lower node. Nodes 0..num_nodes-1 without an entry are missing.
JobPlaces merge_places(const std::map<int, std::vector<HangRank>>& by_node, int num_nodes);

/// diagnose_hang over the whole job; the line also names the nodes that did
/// not answer ("...; node 2 sent no places"), whose ranks the rules could not see.
HangDiagnosis diagnose_job_hang(const JobPlaces& places);

} // namespace air
