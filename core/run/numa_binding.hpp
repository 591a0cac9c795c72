#pragma once

#include "core/base/error.hpp"
#include "core/hw/cpu_topology.hpp"
#include "core/spec/torchrun_values.hpp"

#include <optional>
#include <vector>

namespace air {

/// Where one rank runs: the CPUs it may use and the NUMA node its memory
/// is preferred on.
struct RankBinding {
  std::vector<int> cpus; ///< ascending
  int memory_node = -1;
};

/// Plans --numa-binding for the ranks of this node, in local-rank order, as
/// torch/numa/binding.py defines each mode. `gpu_nodes[i]` is the NUMA node
/// of local rank i's GPU; nullopt when it has none (CPU ranks) or sysfs
/// does not know it. `on_gpus` tells them apart. Pure.
///  - node: every CPU of the rank's node;
///  - socket: every CPU of the sockets that node's CPUs are on;
///  - exclusive: the node's physical cores (every hardware thread of each)
///    split into equal disjoint shares among the ranks on that node, in
///    rank order, the first ranks one core more when they do not divide;
///  - core-complex: the node's L3 groups, largest first, a distinct one per
///    rank of that node while they last (then again from the first).
/// CPU ranks take the nodes with CPUs in turn (rank i: the i-th mod their
/// number), and so does a GPU rank whose node is unknown on a machine of one
/// such node. The memory node is the rank's node.
/// Errors (hardware): a GPU's node unknown on a machine of several nodes, a
/// node with no CPU air-run may use, fewer physical cores than ranks (exclusive).
Expected<std::vector<RankBinding>> plan_numa_binding(NumaMode mode, const CpuTopology& topology,
                                                     const std::vector<std::optional<int>>& gpu_nodes,
                                                     bool on_gpus);

/// How many physical cores of `topology` a CPU set touches: a rank's share
/// for OMP_NUM_THREADS.
int physical_cores(const CpuTopology& topology, const std::vector<int>& cpus);

} // namespace air
