// Fuzz target: Slurm's compressed host lists ("node[01-04,7]") and task
// counts ("2(x3),1"), and scontrol's output.
#include "core/cluster/slurm.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size); // NOLINT
  (void)air::expand_hostlist(text);
  (void)air::expand_tasks_per_node(text);
  (void)air::parse_scontrol_node_addr(text);
  (void)air::parse_scontrol_kill_wait(text);
  (void)air::slurm_master_port(text);
  return 0;
}
