#pragma once

#include "core/base/error.hpp"

#include <optional>
#include <string>
#include <vector>

namespace air {

/// One logical CPU as sysfs describes it: its NUMA node, its socket, the
/// physical core it is a hardware thread of and the L3 cache it shares.
struct CpuInfo {
  int id = 0;
  int node = 0;    ///< NUMA node (/sys/devices/system/node/nodeN/cpulist)
  int package = 0; ///< socket (topology/physical_package_id)
  int core = 0;    ///< its physical core: the lowest CPU of topology/thread_siblings_list
  int l3 = -1;     ///< its core complex: the lowest CPU of cache/index3/shared_cpu_list; -1: no L3 known
};

/// The CPUs air-run may use, plain data: the pure planner
/// (core/run/numa_binding.hpp) takes it, tests build it by hand from
/// recorded machines, `read_cpu_topology` reads the live one.
struct CpuTopology {
  std::vector<CpuInfo> cpus; ///< online CPUs air-run's affinity allows, by id
  std::vector<int> nodes;    ///< every NUMA node, with CPUs or memory only, ascending
};

/// The live topology from sysfs (node*/cpulist, cpu*/topology/*,
/// cpu*/cache/index3/shared_cpu_list), less the CPUs outside air-run's own
/// affinity (a cgroup cpuset, taskset). A kernel without NUMA nodes in sysfs
/// is one node 0 holding every online CPU. `root` replaces "/sys" (tests).
/// Errors (system) name the file that could not be read.
Expected<CpuTopology> read_cpu_topology(const std::string& root = "/sys");

/// The NUMA node of a PCI device from /sys/bus/pci/devices/<bus id>/numa_node;
/// `pci_bus_id` as NVML gives it ("00000000:18:00.0") or as sysfs names it
/// ("0000:18:00.0"). nullopt when unknown: no such file, or -1 (a machine
/// whose firmware gives the device no node).
std::optional<int> pci_numa_node(const std::string& pci_bus_id, const std::string& root = "/sys");

} // namespace air
