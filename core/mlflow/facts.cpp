// The launch facts a run records, gathered from the launch and the machine.
#include "core/mlflow/git.hpp"
#include "core/mlflow/record.hpp"
#include "core/os/host.hpp"

#include <filesystem>

namespace air::mlflow {

LaunchFacts gather_launch_facts(const LaunchSpec& spec, const Selection& selection, int num_nodes,
                                const std::string& air_run_id, const Environment& env) {
  LaunchFacts f;
  f.world_size = selection.ranks * num_nodes;
  f.num_nodes = num_nodes;
  f.accelerator_type = selection.accelerator_type;
  f.timeout = spec.timeout.value;
  f.command = spec.command.value;
  f.air_run_id = air_run_id;
  f.host = host_name();
  f.user = env_or(env, "USER", env_or(env, "LOGNAME"));
  f.gpus = selection.cpu ? std::vector<GpuInfo>() : selection.gpus;
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  if (!ec) f.git_commit = git_commit(cwd);
  return f;
}

} // namespace air::mlflow
