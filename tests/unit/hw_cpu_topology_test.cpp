// read_cpu_topology and pci_numa_node (core/hw/cpu_topology) against a recorded sysfs tree (a copy
// of the files they read from a two-node machine), under a temporary root.
#include "core/hw/cpu_topology.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <sched.h>

#include <filesystem>
#include <fstream>

namespace {

void put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text << "\n";
}

/// Two nodes of two cores with two threads each (CPUs 0-1 + 4-5 on node 0,
/// 2-3 + 6-7 on node 1), one socket per node, one L3 per node, and a memory-only node 2.
void two_node_machine(const std::string& root) {
  put(root + "/devices/system/node/node0/cpulist", "0-1,4-5");
  put(root + "/devices/system/node/node1/cpulist", "2-3,6-7");
  put(root + "/devices/system/node/node2/cpulist", "");
  put(root + "/devices/system/node/possible", "0-2"); // not a node directory
  for (int cpu = 0; cpu < 8; ++cpu) {
    const std::string dir = root + "/devices/system/cpu/cpu" + std::to_string(cpu);
    const int core = cpu % 4;
    put(dir + "/topology/physical_package_id", core < 2 ? "0" : "1");
    put(dir + "/topology/thread_siblings_list", std::to_string(core) + "," + std::to_string(core + 4));
    put(dir + "/cache/index3/shared_cpu_list", core < 2 ? "0-1,4-5" : "2-3,6-7");
  }
  put(root + "/bus/pci/devices/0000:18:00.0/numa_node", "1");
  put(root + "/bus/pci/devices/0000:3b:00.0/numa_node", "-1");
}

} // namespace

TEST_CASE("the topology is read from sysfs, less the CPUs air-run may not use", "[numa]") {
  const air::test::TempDir dir;
  const std::string root = dir.file("sys");
  two_node_machine(root);
  cpu_set_t mine;
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  auto topo = air::read_cpu_topology(root);
  INFO((topo ? std::string() : topo.error().message));
  REQUIRE(topo.ok());
  CHECK(topo->nodes == std::vector<int>{0, 1, 2});
  for (const auto& cpu : topo->cpus) {
    INFO(cpu.id);
    CHECK(CPU_ISSET(cpu.id, &mine));
    CHECK(cpu.node == (cpu.id % 4 < 2 ? 0 : 1));
    CHECK(cpu.package == cpu.node);
    CHECK(cpu.core == cpu.id % 4);
    CHECK(cpu.l3 == (cpu.node == 0 ? 0 : 2));
  }
  int allowed = 0;
  for (int cpu = 0; cpu < 8; ++cpu) allowed += CPU_ISSET(cpu, &mine) ? 1 : 0;
  CHECK(static_cast<int>(topo->cpus.size()) == allowed);

  // A GPU's node, by NVML's bus id or sysfs's; -1 and a missing device are unknown.
  CHECK(air::pci_numa_node("00000000:18:00.0", root) == std::optional<int>(1));
  CHECK(air::pci_numa_node("0000:18:00.0", root) == std::optional<int>(1));
  CHECK(air::pci_numa_node("00000000:3B:00.0", root) == std::nullopt);
  CHECK(air::pci_numa_node("00000000:99:00.0", root) == std::nullopt);
}

TEST_CASE("without NUMA in sysfs, every online CPU is on node 0", "[numa]") {
  const air::test::TempDir dir;
  const std::string root = dir.file("sys");
  put(root + "/devices/system/cpu/online", "0");
  put(root + "/devices/system/cpu/cpu0/topology/physical_package_id", "0");
  auto topo = air::read_cpu_topology(root);
  REQUIRE(topo.ok());
  CHECK(topo->nodes == std::vector<int>{0});
  cpu_set_t mine;
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  if (CPU_ISSET(0, &mine)) {
    REQUIRE(topo->cpus.size() == 1);
    CHECK(topo->cpus[0].core == 0); // no siblings file: its own core
    CHECK(topo->cpus[0].l3 == -1);  // no L3 known
  }
  // Nothing readable: an error naming the file.
  auto missing = air::read_cpu_topology(dir.file("nowhere"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("nowhere/devices/system/cpu/online") != std::string::npos);
}
