// Fuzz target: Slurm's compressed host lists ("node[01-04,7]") and task
// counts ("2(x3),1"), and scontrol's output. The lists expand under small
// bounds: at the real ones (100,000 names) the fuzzer soon keeps inputs that
// reach them, and each then costs milliseconds; the code under test is the same.
#include "core/cluster/slurm.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size); // NOLINT
  constexpr air::HostlistBounds small{1000, 64 * 1024};
  (void)air::expand_hostlist(text, small);
  (void)air::expand_tasks_per_node(text, small);
  (void)air::parse_scontrol_node_addr(text);
  (void)air::parse_scontrol_kill_wait(text);
  (void)air::slurm_master_port(text);
  return 0;
}
