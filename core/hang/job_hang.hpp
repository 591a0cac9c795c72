#pragma once

#include "core/hang/diagnosis.hpp"
#include "core/hang/quiet.hpp"

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
  std::vector<int> done_nodes;    ///< nodes whose ranks all exited 0 (they send no places), in order
};

/// Puts the nodes' places together (node rank -> that node's ranks): sorted by
/// global rank, each marked with its node. A rank that two nodes claim is kept
/// once, from the lower node. Nodes 0..num_nodes-1 without an entry are
/// missing, unless `done` lists them (every rank there exited 0).
JobPlaces merge_places(const std::map<int, std::vector<HangRank>>& by_node, int num_nodes,
                       const std::vector<int>& done = {});

/// judge_quiet over the whole job: each node measured its own ranks' work
/// (HangRank::working, exited_ok), and a node that is done counts as ranks
/// that exited 0. So a rank of node 0 saving a checkpoint while node 1's
/// ranks wait for it at a barrier is quiet, not hung, and so are the ranks
/// left after another node's all finished. A node that sent no places (or an
/// older agent, whose places carry no work) has no working rank. Pure.
QuietVerdict judge_job_quiet(const JobPlaces& places);

/// diagnose_hang over the whole job; the line also names the nodes that did
/// not answer ("...; node 2 sent no places"), whose ranks the rules could not see.
HangDiagnosis diagnose_job_hang(const JobPlaces& places);

} // namespace air
