// Which node this agent is: Slurm's environment, static flags, or one node.
#include "core/cluster/placement.hpp"

#include "core/cluster/slurm.hpp"

#include <fmt/format.h>

namespace air {

namespace {

template <typename T> void derive(Setting<T>& setting, T value, const char* variable) {
  setting.value = std::move(value);
  setting.origin = Origin{Origin::Kind::env, variable};
}

/// The name --dry-run would show for a setting's source, for error messages.
std::string place(const Origin& origin, const char* key) {
  switch (origin.kind) {
  case Origin::Kind::flag:
    return origin.where.empty() ? key : origin.where;
  case Origin::Kind::env:
    return origin.where;
  case Origin::Kind::file:
    return origin.where + ": " + key;
  case Origin::Kind::default_value:
    break;
  }
  return key;
}

/// A run id made from the job id: only the characters run ids allow.
std::string run_id_for(const SlurmEnv& slurm) {
  std::string id = "slurm-" + slurm.job_id + "." + std::to_string(slurm.step_id.value_or(0));
  for (char& c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return id;
}

Status apply_slurm(LaunchSpec& spec, const SlurmEnv& slurm, ClusterContext& c) {
  const std::string node =
      slurm.node_name.empty() ? "node " + std::to_string(slurm.node_id) : slurm.node_name;
  if (slurm.tasks_on_this_node > 1 || slurm.local_id > 0) {
    return usage_error(fmt::format(
        "srun started {} air-run tasks on {} ({}); run one air-run per node with `srun --ntasks-per-node=1`: "
        "air-run starts the ranks itself",
        std::max(slurm.tasks_on_this_node, slurm.local_id + 1), node,
        slurm.tasks_per_node_text.empty() ? "SLURM_LOCALID=" + std::to_string(slurm.local_id)
                                          : slurm.tasks_per_node_text));
  }
  c.source = "slurm";
  c.job_id = slurm.job_id;
  c.gpus = slurm.gpus;
  c.node_name = slurm.node_name;
  if (spec.nnodes.is_default()) {
    derive(spec.nnodes, slurm.num_nodes, "SLURM_STEP_NUM_NODES");
    derive(spec.nnodes_min, slurm.num_nodes, "SLURM_STEP_NUM_NODES"); // a plain N, not 1:N
  }
  if (spec.node_rank.is_default()) derive(spec.node_rank, slurm.node_id, "SLURM_NODEID");
  if (spec.nnodes.value == slurm.num_nodes) c.nodes = slurm.nodes;
  // On one node the loopback default is always reachable; node names may not resolve.
  if (spec.master_addr.is_default() && !slurm.nodes.empty() && spec.nnodes.value > 1) {
    derive(spec.master_addr, slurm.nodes.front(), "SLURM_STEP_NODELIST");
    c.master_is_slurm_node = true;
  }
  if (spec.master_port.is_default() && spec.nnodes.value > 1) {
    derive(spec.master_port, slurm_master_port(slurm.job_id), "SLURM_JOB_ID");
  }
  if (spec.run_id.is_default()) derive(spec.run_id, run_id_for(slurm), "SLURM_JOB_ID");
  return ok_status();
}

} // namespace

std::string ClusterContext::describe_node(int rank) const {
  if (rank >= 0 && static_cast<std::size_t>(rank) < nodes.size())
    return fmt::format("node {} ({})", rank, nodes[static_cast<std::size_t>(rank)]);
  if (rank == node_rank && !node_name.empty()) return fmt::format("node {} ({})", rank, node_name);
  return fmt::format("node {}", rank);
}

Expected<ClusterContext> apply_cluster(LaunchSpec& spec, const Environment& env,
                                       const std::string& host_name) {
  ClusterContext c;
  c.node_name = host_name;
  auto slurm = read_slurm_env(env);
  if (!slurm) return slurm.error();
  const bool nodes_given = !spec.nnodes.is_default() || !spec.node_rank.is_default();

  if (*slurm && (*slurm)->step_id) {
    AIR_TRY(apply_slurm(spec, **slurm, c));
  } else {
    if (*slurm && (*slurm)->num_nodes > 1 && !nodes_given) {
      c.notices.push_back(fmt::format(
          "Slurm job {} has {} nodes, but air-run was not started by srun: running on this node only; use "
          "`srun --ntasks-per-node=1 air-run ...` to run one agent per node",
          (*slurm)->job_id, (*slurm)->num_nodes));
    }
    if (*slurm && !(*slurm)->node_name.empty()) c.node_name = (*slurm)->node_name;
    if (spec.nnodes.value > 1) {
      c.source = "static";
      if (spec.master_port.value == 0) {
        spec.master_port.value = k_static_master_port; // torchrun's default; origin stays "default"
      }
    }
  }

  c.num_nodes = spec.nnodes.value;
  c.node_rank = spec.node_rank.value;
  c.min_nodes = spec.nnodes_min.value;
  c.last_call_timeout = spec.last_call_timeout.value;
  c.read_timeout = spec.read_timeout.value;
  if (c.source == "static" && spec.rdzv_backend.value == "c10d") {
    auto endpoint =
        parse_endpoint(spec.rdzv_endpoint.value, place(spec.rdzv_endpoint.origin, "rdzv_endpoint"));
    if (!endpoint) return endpoint.error();
    if (!spec.node_rank.is_default()) {
      c.notices.push_back(
          fmt::format("air-run: {} is not used with c10d rendezvous: node ranks are handed out "
                      "in order of arrival",
                      place(spec.node_rank.origin, "node_rank")));
    }
    c.source = "c10d";
    c.c10d = true;
    c.node_rank = -1;
    c.master_host = endpoint->host;
    c.control_port = endpoint->port >= 0 ? endpoint->port : k_c10d_default_port;
    if (spec.master_addr.is_default()) {
      spec.master_addr.value = endpoint->host;
      spec.master_addr.origin = spec.rdzv_endpoint.origin;
    }
    if (spec.master_port.is_default()) spec.master_port.value = 0; // node 0 picks one
    c.master_port = spec.master_port.value;
    c.join_timeout = spec.join_timeout.value;
    if (c.join_timeout.count() <= 0)
      return usage_error(place(spec.join_timeout.origin, "join_timeout") + ": must be greater than zero");
    return c;
  }
  if (c.node_rank >= c.num_nodes) {
    return usage_error(fmt::format("{}: node rank {} is outside 0..{} ({} = {})",
                                   place(spec.node_rank.origin, "node_rank"), c.node_rank, c.num_nodes - 1,
                                   place(spec.nnodes.origin, "nnodes"), c.num_nodes));
  }
  if (c.num_nodes > 1 && c.source == "single") c.source = "static";
  c.master_host = spec.master_addr.value;
  c.master_port = spec.master_port.value;
  c.join_timeout = spec.join_timeout.value;
  if (!c.multi_node()) return c;

  if (c.join_timeout.count() <= 0) {
    return usage_error(place(spec.join_timeout.origin, "join_timeout") + ": must be greater than zero");
  }
  if (spec.control_port.value != 0) {
    c.control_port = spec.control_port.value;
  } else if (c.master_port < 65535) {
    c.control_port = c.master_port + 1;
  } else {
    return usage_error(fmt::format("{}: port 65535 leaves no room for the control port (master_port + 1); "
                                   "set control_port",
                                   place(spec.master_port.origin, "master_port")));
  }
  if (c.control_port == c.master_port) {
    return usage_error(fmt::format("{}: the control port must differ from the master port {}",
                                   place(spec.control_port.origin, "control_port"), c.master_port));
  }
  return c;
}

std::string expand_node_placeholders(const std::string& text, const ClusterContext& cluster) {
  std::string out = text;
  const auto replace_all = [&out](std::string_view from, const std::string& to) {
    for (std::size_t pos = 0; (pos = out.find(from, pos)) != std::string::npos; pos += to.size())
      out.replace(pos, from.size(), to);
  };
  replace_all("{node_rank}", std::to_string(cluster.node_rank));
  replace_all("{node_name}", cluster.node_name);
  return out;
}

} // namespace air
