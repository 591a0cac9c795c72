// A hang diagnosed across nodes: the nodes' places put together on node 0.
#include "core/hang/job_hang.hpp"
#include "tests/unit/catch.hpp"

#include <map>
#include <string>
#include <vector>

using air::HangRank;

namespace {

HangRank waiting(int rank, std::uint64_t seq = 4) {
  HangRank r;
  r.rank = rank;
  r.counted = true;
  r.in_collective = true;
  r.collective = "all_reduce";
  r.collective_seq = seq;
  r.since = "12:01:03";
  r.place = "<module> at stuck.py:16";
  return r;
}

HangRank outside(int rank) {
  HangRank r;
  r.rank = rank;
  r.counted = true;
  r.collective_seq = 3;
  r.place = "stuck_here at stuck.py:7";
  return r;
}

} // namespace

TEST_CASE("nodes' places merge by global rank, each marked with its node", "[diagnosis][job]") {
  // Node 1 answered first, and lists its ranks out of order.
  std::map<int, std::vector<HangRank>> by_node;
  by_node[1] = {outside(3), waiting(2)};
  by_node[0] = {waiting(0), waiting(1)};
  const air::JobPlaces job = air::merge_places(by_node, 2);
  REQUIRE(job.ranks.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(job.ranks[static_cast<std::size_t>(i)].rank == i);
  CHECK(job.ranks[0].node == 0);
  CHECK(job.ranks[1].node == 0);
  CHECK(job.ranks[2].node == 1);
  CHECK(job.ranks[3].node == 1);
  CHECK(job.missing_nodes.empty());

  // The laggard sits on node 1; node 0 alone could not have named it.
  const auto d = air::diagnose_job_hang(job);
  CHECK(d.laggards == std::vector<int>{3});
  CHECK(d.line == "rank 3 (node 1) is in stuck_here at stuck.py:7; ranks 0, 1 and 2 wait in all_reduce #4 at "
                  "<module> at stuck.py:16 since 12:01:03");
  CHECK(air::diagnose_hang(by_node[0]).laggards.empty());
}

TEST_CASE("a node that sent no places is named, and a rank claimed twice counts once", "[diagnosis][job]") {
  std::map<int, std::vector<HangRank>> by_node;
  by_node[0] = {waiting(0), waiting(1)};
  by_node[2] = {waiting(1, 9), outside(5)}; // rank 1 again: node 0's wins
  const air::JobPlaces job = air::merge_places(by_node, 3);
  REQUIRE(job.ranks.size() == 3);
  CHECK(job.ranks[1].rank == 1);
  CHECK(job.ranks[1].node == 0);
  CHECK(job.ranks[1].collective_seq == 4);
  CHECK(job.ranks[2].rank == 5);
  CHECK(job.missing_nodes == std::vector<int>{1});
  const auto d = air::diagnose_job_hang(job);
  CHECK(d.laggards == std::vector<int>{5});
  CHECK(d.line.find("rank 5 (node 2) is in stuck_here at stuck.py:7") == 0);
  CHECK(d.line.size() > std::string("; node 1 sent no places").size());
  CHECK(d.line.substr(d.line.size() - 23) == "; node 1 sent no places");

  const air::JobPlaces none = air::merge_places({}, 2);
  CHECK(none.ranks.empty());
  CHECK(air::diagnose_job_hang(none).line == "nodes 0 and 1 sent no places");
}

TEST_CASE("one node's diagnosis names no node", "[diagnosis][job]") {
  const auto d = air::diagnose_hang({waiting(0), outside(1)});
  CHECK(d.line.find("rank 1 is in stuck_here") == 0);
}

TEST_CASE("mismatched collectives across nodes name the node of a rank alone in one", "[diagnosis][job]") {
  // Rank 2 (node 1) alone called broadcast_object_list; the others wait in barrier.
  std::map<int, std::vector<HangRank>> by_node;
  HangRank saving = waiting(2);
  saving.collective = "broadcast_object_list";
  HangRank three = waiting(3);
  three.collective = "barrier";
  HangRank zero = three;
  zero.rank = 0;
  HangRank one = three;
  one.rank = 1;
  by_node[0] = {zero, one};
  by_node[1] = {saving, three};
  const auto d = air::diagnose_job_hang(air::merge_places(by_node, 2));
  CHECK(d.laggards.empty());
  CHECK(d.line == "ranks wait in different collectives: ranks 0, 1 and 3 in barrier #4 at <module> at "
                  "stuck.py:16 since 12:01:03; rank 2 (node 1) in broadcast_object_list #4 at <module> at "
                  "stuck.py:16 since 12:01:03");
}
