// plan_numa_binding from recorded topologies (core/run/numa_binding), and the
// binding as make_plan puts it into each rank (CPUs, memory node, OMP_NUM_THREADS).
#include "core/run/numa_binding.hpp"
#include "core/run/plan.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/plan_fixture.hpp"

#include <algorithm>
#include <set>

using air::test::cpu_selection;
using air::test::plan_context;
using air::test::spec_from;

using air::NumaMode;
using Ints = std::vector<int>;
using Nodes = std::vector<std::optional<int>>;

namespace {

/// A machine of `sockets` sockets, `nodes_per_socket` NUMA nodes each, `cores`
/// physical cores per node with two hardware threads (CPU c and c + all
/// cores, as Linux numbers them), and L3 groups of `l3_cores` cores.
air::CpuTopology machine(int sockets, int nodes_per_socket, int cores, int l3_cores) {
  air::CpuTopology t;
  const int nodes = sockets * nodes_per_socket;
  const int all_cores = nodes * cores;
  for (int node = 0; node < nodes; ++node) t.nodes.push_back(node);
  for (int thread = 0; thread < 2; ++thread) {
    for (int c = 0; c < all_cores; ++c) {
      air::CpuInfo cpu;
      cpu.id = c + thread * all_cores;
      cpu.node = c / cores;
      cpu.package = cpu.node / nodes_per_socket;
      cpu.core = c;
      cpu.l3 = l3_cores > 0 ? (c / l3_cores) * l3_cores : -1;
      t.cpus.push_back(cpu);
    }
  }
  return t;
}

std::vector<air::RankBinding> plan(NumaMode mode, const air::CpuTopology& t, const Nodes& nodes,
                                   bool gpus = true) {
  auto r = air::plan_numa_binding(mode, t, nodes, gpus);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::string error_of(NumaMode mode, const air::CpuTopology& t, const Nodes& nodes, bool gpus = true) {
  auto r = air::plan_numa_binding(mode, t, nodes, gpus);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == air::ErrorKind::hardware);
  return r.error().message;
}

Ints range(int from, int to) {
  Ints out;
  for (int i = from; i <= to; ++i) out.push_back(i);
  return out;
}

Ints concat(Ints a, const Ints& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

TEST_CASE("numa binding on one socket: every rank gets the node, exclusive splits its cores", "[numa]") {
  // 1 socket, 1 node, 8 cores / 16 threads; 4 GPUs all on node 0.
  const auto t = machine(1, 1, 8, 0);
  const Nodes gpus{0, 0, 0, 0};
  for (const auto& b : plan(NumaMode::node, t, gpus)) {
    CHECK(b.cpus == range(0, 15));
    CHECK(b.memory_node == 0);
  }
  const auto ex = plan(NumaMode::exclusive, t, gpus);
  CHECK(ex[0].cpus == Ints{0, 1, 8, 9}); // two cores, both threads of each
  CHECK(ex[3].cpus == Ints{6, 7, 14, 15});
  std::set<int> seen;
  for (const auto& b : ex)
    for (int cpu : b.cpus) CHECK(seen.insert(cpu).second); // disjoint
  CHECK(seen.size() == 16);
  // 3 ranks on 8 cores: the first two get one core more, as binding.py.
  const auto three = plan(NumaMode::exclusive, t, {0, 0, 0});
  CHECK(three[0].cpus == Ints{0, 1, 2, 8, 9, 10});
  CHECK(three[1].cpus == Ints{3, 4, 5, 11, 12, 13});
  CHECK(three[2].cpus == Ints{6, 7, 14, 15});
  CHECK(air::physical_cores(t, three[2].cpus) == 2);
  // More ranks than cores cannot be exclusive.
  CHECK(error_of(NumaMode::exclusive, machine(1, 1, 2, 0), {0, 0, 0}) ==
        "--numa-binding exclusive: NUMA node 0 has 2 physical cores for 3 ranks");
}

TEST_CASE("numa binding on two sockets with 8 GPUs: each rank stays on its GPU's node or socket", "[numa]") {
  // 2 sockets x 2 nodes x 8 cores (64 threads); GPUs 0-1 on node 0, 2-3 on 1, 4-5 on 2, 6-7 on 3.
  const auto t = machine(2, 2, 8, 0);
  const Nodes gpus{0, 0, 1, 1, 2, 2, 3, 3};
  const auto node = plan(NumaMode::node, t, gpus);
  CHECK(node[0].cpus == concat(range(0, 7), range(32, 39)));
  CHECK(node[5].cpus == concat(range(16, 23), range(48, 55)));
  CHECK(node[5].memory_node == 2);
  const auto socket = plan(NumaMode::socket, t, gpus);
  CHECK(socket[2].cpus == concat(range(0, 15), range(32, 47))); // node 1 is on socket 0
  CHECK(socket[7].cpus == concat(range(16, 31), range(48, 63)));
  CHECK(socket[7].memory_node == 3);
  const auto ex = plan(NumaMode::exclusive, t, gpus);
  CHECK(ex[6].cpus == concat(range(24, 27), range(56, 59)));
  CHECK(ex[7].cpus == concat(range(28, 31), range(60, 63)));
  // A GPU without a node on a machine of several cannot be placed.
  CHECK(
      error_of(NumaMode::node, t, {0, std::nullopt}) ==
      "--numa-binding: the NUMA node of local rank 1's GPU is not known (sysfs numa_node is -1) on a machine "
      "of 4 NUMA nodes");
}

TEST_CASE("numa binding core-complex: a distinct L3 group per rank while they last", "[numa]") {
  // One node of 16 cores in 4 core complexes of 4 cores (an EPYC-like CCX).
  const auto t = machine(1, 1, 16, 4);
  const auto cc = plan(NumaMode::core_complex, t, {0, 0, 0, 0, 0});
  CHECK(cc[0].cpus == concat(range(0, 3), range(16, 19)));
  CHECK(cc[1].cpus == concat(range(4, 7), range(20, 23)));
  CHECK(cc[3].cpus == concat(range(12, 15), range(28, 31)));
  CHECK(cc[4].cpus == cc[0].cpus); // a fifth rank shares the first group again
  // The largest group comes first: drop CPUs 0-1 (and their threads) from the first group.
  auto smaller = t;
  std::erase_if(smaller.cpus, [](const air::CpuInfo& c) { return c.core < 2; });
  const auto ordered = plan(NumaMode::core_complex, smaller, {0});
  CHECK(ordered[0].cpus == concat(range(4, 7), range(20, 23)));
}

TEST_CASE("numa binding without GPUs: CPU ranks take the nodes in turn", "[numa]") {
  const auto t = machine(2, 1, 4, 0); // two nodes of 4 cores
  const auto node = plan(NumaMode::node, t, {std::nullopt, std::nullopt, std::nullopt}, false);
  CHECK(node[0].cpus == concat(range(0, 3), range(8, 11)));
  CHECK(node[0].memory_node == 0);
  CHECK(node[1].cpus == concat(range(4, 7), range(12, 15)));
  CHECK(node[1].memory_node == 1);
  CHECK(node[2].cpus == node[0].cpus);
  // A node with memory only (CXL, HBM) holds no rank.
  auto with_memory_node = t;
  with_memory_node.nodes.push_back(2);
  const auto skip = plan(NumaMode::node, with_memory_node, {std::nullopt, std::nullopt, std::nullopt}, false);
  CHECK(skip[2].memory_node == 0);
  // One node: a GPU whose node sysfs does not know takes it.
  const auto one = plan(NumaMode::node, machine(1, 1, 2, 0), {std::nullopt}, true);
  CHECK(one[0].cpus == Ints{0, 1, 2, 3});
  // none binds nothing.
  CHECK(plan(NumaMode::none, t, {0})[0].cpus.empty());
}

TEST_CASE("make_plan binds each rank and sets OMP_NUM_THREADS to the cores it owns", "[numa][plan]") {
  auto ctx = plan_context();
  ctx.topology = machine(2, 1, 4, 0);
  auto plan =
      air::make_plan(spec_from("command: [t.py]\nnuma_binding: exclusive\n"), cpu_selection(4), {}, ctx);
  REQUIRE(plan.ok());
  // Ranks 0, 2 on node 0, ranks 1, 3 on node 1: two cores each.
  CHECK(plan->ranks[0].cpu_affinity == Ints{0, 1, 8, 9});
  CHECK(plan->ranks[2].cpu_affinity == Ints{2, 3, 10, 11});
  CHECK(plan->ranks[1].cpu_affinity == Ints{4, 5, 12, 13});
  CHECK(plan->ranks[1].numa_node == 1);
  for (const auto& rank : plan->ranks) CHECK(rank.env.at("OMP_NUM_THREADS") == "2");
  CHECK(plan->notices ==
        std::vector<std::string>{"setting OMP_NUM_THREADS=2 for each rank: the physical cores "
                                 "of its --numa-binding exclusive share; set it to tune"});
  const auto lines = air::describe_plan(*plan);
  CHECK(std::find(lines.begin(), lines.end(), "  numa: cpus 0-1,8-9, memory node 0") != lines.end());

  // node: ranks sharing a node share its cores for OMP; the user's value stays.
  auto shared = air::make_plan(spec_from("command: [t.py]\nnuma_binding: node\n"), cpu_selection(4), {}, ctx);
  REQUIRE(shared.ok());
  CHECK(shared->ranks[0].env.at("OMP_NUM_THREADS") == "2"); // 4 cores, 2 ranks
  auto kept = air::make_plan(spec_from("command: [t.py]\nnuma_binding: node\n"), cpu_selection(4),
                             {{"OMP_NUM_THREADS", "7"}}, ctx);
  REQUIRE(kept.ok());
  CHECK(kept->ranks[3].env.at("OMP_NUM_THREADS") == "7");
  CHECK(kept->notices.empty());

  // Without a binding: no CPUs, OMP_NUM_THREADS=1 as before.
  auto unbound = air::make_plan(spec_from("command: [t.py]\n"), cpu_selection(2), {}, ctx);
  REQUIRE(unbound.ok());
  CHECK(unbound->ranks[0].cpu_affinity.empty());
  CHECK(unbound->ranks[0].numa_node == -1);
  CHECK(unbound->ranks[0].env.at("OMP_NUM_THREADS") == "1");
}

TEST_CASE("make_plan gives torchrun's --virtual-local-rank environment", "[plan][torchrun]") {
  const auto spec = spec_from("command: [t.py]\nvirtual_local_rank: true\n");
  auto plan = air::make_plan(spec, cpu_selection(3), {{"CUDA_VISIBLE_DEVICES", "4, 6,7"}}, plan_context());
  REQUIRE(plan.ok());
  const std::string devices[] = {"4", "6", "7"};
  for (int i = 0; i < 3; ++i) {
    const auto& env = plan->ranks[static_cast<std::size_t>(i)].env;
    CHECK(env.at("LOCAL_RANK") == "0");
    CHECK(env.at("CUDA_VISIBLE_DEVICES") == devices[i]);
    CHECK(env.at("LOCAL_WORLD_SIZE") == "3"); // unchanged, as torchrun's
    CHECK(env.at("RANK") == std::to_string(i));
  }
  // Without CUDA_VISIBLE_DEVICES in the parent: the local rank itself.
  auto bare = air::make_plan(spec, cpu_selection(2), {}, plan_context());
  REQUIRE(bare.ok());
  CHECK(bare->ranks[1].env.at("CUDA_VISIBLE_DEVICES") == "1");
  CHECK(bare->ranks[1].env.at("LOCAL_RANK") == "0");
  // Fewer devices than ranks: torchrun's error.
  auto few = air::make_plan(spec, cpu_selection(2), {{"CUDA_VISIBLE_DEVICES", "3"}}, plan_context());
  REQUIRE_FALSE(few.ok());
  CHECK(few.error().message ==
        "--virtual-local-rank: local rank 1 exceeds available GPUs in CUDA_VISIBLE_DEVICES=3");
  // Off: LOCAL_RANK is the local index and the parent's list stays whole.
  auto off = air::make_plan(spec_from("command: [t.py]\n"), cpu_selection(2),
                            {{"CUDA_VISIBLE_DEVICES", "4,6"}}, plan_context());
  REQUIRE(off.ok());
  CHECK(off->ranks[1].env.at("LOCAL_RANK") == "1");
  CHECK(off->ranks[1].env.at("CUDA_VISIBLE_DEVICES") == "4,6");
}
