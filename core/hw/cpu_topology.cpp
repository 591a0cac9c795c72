// The machine's CPU and NUMA topology, read from sysfs.
#include "core/hw/cpu_topology.hpp"

#include "core/base/duration.hpp"
#include "core/base/text.hpp"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace air {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return std::string(trim(buffer.str()));
}

Expected<std::vector<int>> read_cpu_list(const std::string& path) {
  const auto text = read_text(path);
  if (!text) return sys_error("read " + path, ENOENT);
  return parse_rank_list(*text, path);
}

std::optional<int> read_int(const std::string& path) {
  const auto text = read_text(path);
  if (!text || text->empty()) return std::nullopt;
  const bool negative = text->front() == '-';
  const std::string_view digits = std::string_view(*text).substr(negative ? 1 : 0);
  if (digits.empty() || !all_digits(digits) || digits.size() > 9) return std::nullopt;
  const int value = std::stoi(std::string(digits));
  return negative ? -value : value;
}

// The lowest CPU of a list file, or `fallback` when it cannot be read.
int lowest_of(const std::string& path, int fallback) {
  auto list = read_cpu_list(path);
  return list && !list->empty() ? list->front() : fallback;
}

} // namespace

Expected<CpuTopology> read_cpu_topology(const std::string& root) {
  namespace fs = std::filesystem;
  CpuTopology topo;
  std::vector<std::pair<int, int>> cpu_node; // (cpu, node)
  const std::string node_dir = root + "/devices/system/node";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(node_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || !all_digits(name.substr(4)) || name.size() == 4) continue;
    const int node = std::stoi(name.substr(4));
    auto cpus = read_cpu_list(entry.path().string() + "/cpulist");
    if (!cpus) return cpus.error();
    topo.nodes.push_back(node);
    for (int cpu : *cpus) cpu_node.emplace_back(cpu, node);
  }
  if (topo.nodes.empty()) {
    // No NUMA in sysfs: one node with every online CPU.
    auto online = read_cpu_list(root + "/devices/system/cpu/online");
    if (!online) return online.error();
    topo.nodes.push_back(0);
    for (int cpu : *online) cpu_node.emplace_back(cpu, 0);
  }
  std::sort(topo.nodes.begin(), topo.nodes.end());
  std::sort(cpu_node.begin(), cpu_node.end());

  // Only the CPUs air-run may run on (its cpuset, taskset): a rank bound
  // elsewhere would be refused by the kernel.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool have_mask = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0;
  for (const auto& [cpu, node] : cpu_node) {
    if (have_mask && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed))) continue;
    const std::string dir = root + "/devices/system/cpu/cpu" + std::to_string(cpu);
    CpuInfo info;
    info.id = cpu;
    info.node = node;
    info.package = read_int(dir + "/topology/physical_package_id").value_or(0);
    info.core = lowest_of(dir + "/topology/thread_siblings_list", cpu);
    info.l3 = lowest_of(dir + "/cache/index3/shared_cpu_list", -1);
    topo.cpus.push_back(info);
  }
  return topo;
}

std::optional<int> pci_numa_node(const std::string& pci_bus_id, const std::string& root) {
  // NVML pads the PCI domain to 8 digits; sysfs names devices with 4, in lower case.
  std::string id = lower(pci_bus_id);
  const auto colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);
  const auto node = read_int(root + "/bus/pci/devices/" + id + "/numa_node");
  if (!node || *node < 0) return std::nullopt;
  return node;
}

} // namespace air
