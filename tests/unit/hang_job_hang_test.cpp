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

TEST_CASE("a rank of node 0 saving a checkpoint while node 1's ranks wait for it is quiet, not hung",
          "[diagnosis][job][quiet]") {
  // Node 0 measured rank 0's work (a silent torch.save: CPU and disk); rank 1
  // and node 1's ranks wait at the barrier. Node 1 alone looks hung.
  std::map<int, std::vector<HangRank>> by_node;
  HangRank saving = outside(0);
  saving.working = true;
  by_node[0] = {saving, waiting(1)};
  by_node[1] = {waiting(2), waiting(3)};
  air::JobPlaces job = air::merge_places(by_node, 2);
  const air::QuietVerdict quiet = air::judge_job_quiet(job);
  CHECK(quiet.kind == air::Quiet::working);
  CHECK(quiet.working == std::vector<int>{0});

  // The same places from an older agent carry no work: a hang, as before.
  job.ranks[0].working = false;
  CHECK(air::judge_job_quiet(job).kind == air::Quiet::hang);
  CHECK(air::diagnose_job_hang(job).laggards == std::vector<int>{0});

  // A rank inside a collective never counts as working (a spinning wait burns CPU).
  job.ranks[1].working = true;
  CHECK(air::judge_job_quiet(job).kind == air::Quiet::hang);
}

TEST_CASE("ranks left after another node's all exited 0 are nobody's hang", "[diagnosis][job][quiet]") {
  // Node 1 is done (its ranks exited 0, it sends no places); node 0's rank 0
  // uploads next to no CPU, its rank 1 exited 0 too.
  std::map<int, std::vector<HangRank>> by_node;
  HangRank uploading = outside(0);
  HangRank finished = outside(1);
  finished.running = false;
  by_node[0] = {uploading};
  const air::JobPlaces alone = air::merge_places(by_node, 2, {1});
  CHECK(alone.missing_nodes.empty());
  CHECK(alone.done_nodes == std::vector<int>{1});
  CHECK(air::judge_job_quiet(alone).kind == air::Quiet::finished);
  // Without node 1's `done`, node 1 is missing and nothing finished: a hang.
  CHECK(air::judge_job_quiet(air::merge_places(by_node, 2)).kind == air::Quiet::hang);

  // A rank of another node that exited 0 counts the same, told by its `work` line.
  by_node[1] = {finished};
  air::JobPlaces job = air::merge_places(by_node, 2);
  CHECK(air::judge_job_quiet(job).kind == air::Quiet::hang); // its exit status is unknown
  job.ranks[1].exited_ok = true;
  CHECK(air::judge_job_quiet(job).kind == air::Quiet::finished);
  // But a rank that waits in a collective for the finished ones waits for ever.
  job.ranks[0] = waiting(0);
  CHECK(air::judge_job_quiet(job).kind == air::Quiet::hang);

  CHECK(air::judge_job_quiet(air::merge_places({}, 2)).kind == air::Quiet::hang); // nothing seen
}
