// --numa-binding planned from a topology: which CPUs each rank may use.
#include "core/run/numa_binding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace air {
namespace {

Error hardware_error(std::string message) { return {ErrorKind::hardware, std::move(message)}; }

std::vector<int> cpus_of_node(const CpuTopology& topo, int node) {
  std::vector<int> out;
  for (const auto& cpu : topo.cpus)
    if (cpu.node == node) out.push_back(cpu.id);
  return out;
}

std::vector<int> cpus_of_socket(const CpuTopology& topo, int node) {
  std::set<int> packages;
  for (const auto& cpu : topo.cpus)
    if (cpu.node == node) packages.insert(cpu.package);
  std::vector<int> out;
  for (const auto& cpu : topo.cpus)
    if (packages.count(cpu.package)) out.push_back(cpu.id);
  return out;
}

/// The node's CPUs grouped by `key` (physical core or L3), each group
/// ascending, keyed by the lowest CPU of the group.
std::map<int, std::vector<int>> groups_of_node(const CpuTopology& topo, int node, bool by_l3) {
  std::map<int, std::vector<int>> groups;
  for (const auto& cpu : topo.cpus) {
    if (cpu.node != node) continue;
    const int key = by_l3 ? (cpu.l3 >= 0 ? cpu.l3 : -1) : cpu.core;
    groups[key].push_back(cpu.id);
  }
  return groups;
}

std::vector<int> exclusive_share(const CpuTopology& topo, int node, int index, int count) {
  const auto cores = groups_of_node(topo, node, false);
  const int per_rank = static_cast<int>(cores.size()) / count;
  const int extra = static_cast<int>(cores.size()) % count;
  const int start = index * per_rank + std::min(index, extra);
  const int end = start + per_rank + (index < extra ? 1 : 0);
  std::vector<int> out;
  int i = 0;
  for (const auto& [key, cpus] : cores) {
    if (i >= start && i < end) out.insert(out.end(), cpus.begin(), cpus.end());
    ++i;
  }
  return out;
}

std::vector<int> core_complex(const CpuTopology& topo, int node, int index) {
  const auto groups = groups_of_node(topo, node, true);
  std::vector<std::pair<int, std::vector<int>>> ordered(groups.begin(), groups.end());
  // Largest first, then the lowest CPU, as binding.py orders them.
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  return ordered[static_cast<std::size_t>(index) % ordered.size()].second;
}

} // namespace

Expected<std::vector<RankBinding>> plan_numa_binding(NumaMode mode, const CpuTopology& topology,
                                                     const std::vector<std::optional<int>>& gpu_nodes,
                                                     bool on_gpus) {
  std::vector<RankBinding> out(gpu_nodes.size());
  if (mode == NumaMode::none) return out;
  std::vector<int> cpu_nodes; // nodes with CPUs air-run may use
  for (int node : topology.nodes)
    if (!cpus_of_node(topology, node).empty()) cpu_nodes.push_back(node);
  if (cpu_nodes.empty()) return hardware_error("--numa-binding: no CPU air-run may use");

  // Each rank's node.
  std::vector<int> nodes(gpu_nodes.size());
  for (std::size_t i = 0; i < gpu_nodes.size(); ++i) {
    if (gpu_nodes[i]) {
      nodes[i] = *gpu_nodes[i];
    } else if (on_gpus && cpu_nodes.size() > 1) {
      return hardware_error(fmt::format(
          "--numa-binding: the NUMA node of local rank {}'s GPU is not known (sysfs numa_node is -1) on a "
          "machine of {} NUMA nodes",
          i, cpu_nodes.size()));
    } else {
      nodes[i] = cpu_nodes[i % cpu_nodes.size()];
    }
    if (cpus_of_node(topology, nodes[i]).empty())
      return hardware_error(fmt::format(
          "--numa-binding: NUMA node {} of local rank {} has no CPU air-run may use", nodes[i], i));
  }

  // The ranks sharing each node, for the modes that split it.
  std::map<int, int> on_node; // node -> ranks bound to it
  std::vector<int> index(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) index[i] = on_node[nodes[i]]++;

  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const int node = nodes[i];
    RankBinding& b = out[i];
    b.memory_node = node;
    switch (mode) {
    case NumaMode::none:
      break;
    case NumaMode::node:
      b.cpus = cpus_of_node(topology, node);
      break;
    case NumaMode::socket:
      b.cpus = cpus_of_socket(topology, node);
      break;
    case NumaMode::exclusive: {
      const auto cores = groups_of_node(topology, node, false).size();
      if (static_cast<int>(cores) < on_node[node])
        return hardware_error(
            fmt::format("--numa-binding exclusive: NUMA node {} has {} physical cores for {} ranks", node,
                        cores, on_node[node]));
      b.cpus = exclusive_share(topology, node, index[i], on_node[node]);
      break;
    }
    case NumaMode::core_complex:
      b.cpus = core_complex(topology, node, index[i]);
      break;
    }
    std::sort(b.cpus.begin(), b.cpus.end());
  }
  return out;
}

int physical_cores(const CpuTopology& topology, const std::vector<int>& cpus) {
  std::set<int> cores;
  for (const auto& cpu : topology.cpus)
    if (std::binary_search(cpus.begin(), cpus.end(), cpu.id)) cores.insert(cpu.core);
  return static_cast<int>(cores.size());
}

} // namespace air
