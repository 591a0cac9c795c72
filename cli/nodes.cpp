#include "cli/nodes.hpp"

#include "core/base/speaker.hpp"
#include "core/base/text.hpp"
#include "core/cluster/slurm.hpp"
#include "core/cluster/stop_round.hpp"
#include "core/os/capture.hpp"
#include "core/os/host.hpp"
#include "core/os/trusted_path.hpp"
#include "core/spec/rendezvous.hpp"

#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace air::cli {

namespace {

/// How long a helper like scontrol may take: it talks to slurmctld, which
/// answers in milliseconds when healthy; a hung controller must not hang us.
constexpr std::chrono::seconds k_helper_timeout{10};

/// Runs a helper program and returns its stdout; nullopt when it cannot be
/// started, fails, or outlives k_helper_timeout (then it is killed).
std::optional<std::string> capture(const std::vector<std::string>& argv, const Environment& env) {
  auto run = run_captured(argv, env, k_helper_timeout);
  if (!run || run->timed_out || !run->status.success()) return std::nullopt;
  return std::move(run->out);
}

/// Node 0's address as Slurm knows it (NodeAddr), which ranks can reach even
/// when node names are not in DNS; the name itself otherwise.
std::string slurm_node_address(const std::string& node, const Environment& env) {
  const auto text = capture({"scontrol", "show", "node", "-o", node}, env);
  if (!text) return node;
  return parse_scontrol_node_addr(*text).value_or(node);
}

/// Slurm 22.05 (Debian 12's) does not set SLURM_JOB_END_TIME, by which a SIGTERM
/// is told to be the time limit (docs/preemption.md): air-run's own process
/// gets it from the job's EndTime instead (`scontrol show job`). Nothing
/// when it is set, or scontrol says nothing.
void note_job_end_time(const std::string& job_id, const Environment& env) {
  if (job_id.empty() || std::getenv("SLURM_JOB_END_TIME") != nullptr) return;
  const auto text = capture({"scontrol", "show", "job", "-o", job_id}, env);
  if (!text) return;
  const auto end = parse_scontrol_end_time(*text);
  if (!end) return;
  std::tm tm{};
  if (::strptime(end->c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return;
  tm.tm_isdst = -1; // scontrol prints local time: this node's zone, which the job's nodes share
  const std::time_t at = std::mktime(&tm);
  if (at > 0) ::setenv("SLURM_JOB_END_TIME", std::to_string(at).c_str(), 0);
}

} // namespace

Expected<ClusterContext> resolve_cluster(LaunchSpec& spec, const Environment& env, bool dry_run) {
  auto cluster = apply_cluster(spec, env, host_name());
  if (!cluster) return cluster.error();
  ClusterContext& c = *cluster;

  if (c.master_is_slurm_node && c.multi_node()) {
    spec.master_addr.value = slurm_node_address(c.master_host, env);
    c.master_host = spec.master_addr.value; // the control connection goes there too
  }
  if (c.source == "slurm" && spec.grace_period.is_default()) {
    // Slurm ends a step with SIGTERM to every process, then SIGKILL after
    // KillWait: stop the ranks ourselves well before, so the summary is written.
    if (const auto text = capture({"scontrol", "show", "config"}, env)) {
      if (const auto kill_wait = parse_scontrol_kill_wait(*text)) {
        const Millis fitted(std::max<long long>(1000, *kill_wait * 1000LL * 2 / 3));
        if (fitted < spec.grace_period.value) {
          spec.grace_period.value = fitted;
          spec.grace_period.origin = Origin{Origin::Kind::env, "Slurm KillWait (2/3 of it)"};
        }
      }
    }
  }

  if (c.source == "slurm" && !dry_run) note_job_end_time(c.job_id, env);

  if (c.c10d) {
    // Only the agent that ends up hosting the join (node 0) hands its port to
    // the others; an agent elsewhere cannot bind the endpoint's address.
    c.may_host = is_local_address(c.master_host);
    if (spec.master_port.value == 0 && c.may_host && !dry_run) {
      auto port = choose_free_port(spec.master_addr.value);
      if (!port) return port.error();
      c.master_port = *port;
    } else {
      c.master_port = spec.master_port.value;
    }
    return cluster; // {node_rank} is known after the join (expand_after_join)
  }
  if (spec.master_port.value == 0) {
    auto port = choose_free_port(spec.master_addr.value);
    if (!port) return port.error();
    c.master_port = *port;
  } else {
    // Only node 0 hosts rank 0's store: on other nodes the port may well be
    // busy (another node's agent on the same host, as in tests).
    if (!dry_run && c.node_rank == 0)
      AIR_TRY(check_port_free(spec.master_addr.value, spec.master_port.value));
    c.master_port = spec.master_port.value;
  }
  // torchrun's c10d rendezvous hands the ranks node 0's fully qualified name
  // (rank 0's store listens on every address): on one node, this host's. The
  // port above was chosen on the rendezvous host. Across nodes air-run keeps
  // the address that every node has already reached.
  if (master_addr_from_one_node_c10d(spec)) {
    if (const std::string fqdn = host_fqdn(); is_local_address(fqdn)) spec.master_addr.value = fqdn;
  }
  if (c.multi_node()) expand_after_join(spec, c);
  return cluster;
}

void expand_after_join(LaunchSpec& spec, const ClusterContext& c) {
  for (auto* path :
       {&spec.summary_file.value, &spec.junit_file.value, &spec.html_file.value, &spec.log_dir.value})
    *path = expand_node_placeholders(*path, c);
}

std::string describe_cluster(const ClusterContext& c, int ranks_per_node) {
  const int first = c.node_rank * ranks_per_node;
  const std::string ranks = ranks_per_node == 1
                                ? fmt::format("rank {}", first)
                                : fmt::format("ranks {}-{}", first, first + ranks_per_node - 1);
  return fmt::format("node {}/{} ({}), {} of {}, master {}:{}, control port {}, via {}{}", c.node_rank,
                     c.num_nodes, c.node_name, ranks, ranks_per_node * c.num_nodes, c.master_host,
                     c.master_port, c.control_port, c.source, c.job_id.empty() ? "" : " job " + c.job_id) +
         (c.gpus.empty() ? "" : ", GPUs " + c.gpus + " from Slurm");
}

void requeue_after_warning(const ClusterContext& c, RunOutcome& outcome, const Environment& env) {
  if (c.source != "slurm" || c.job_id.empty() || c.node_rank != 0) return;
  if (outcome.status != RunOutcome::Status::preempted || !outcome.preemption) return;
  PreemptionReport& p = *outcome.preemption;
  // Across nodes every node's ranks have exited by now (ControlChannel::finish
  // waited for their word): a requeue cannot cut a slower node's save short.
  const RequeueVerdict verdict = requeue_verdict(p);
  if (!verdict.requeue) {
    if (verdict.why_not.empty()) return; // nothing complete to resume from: the job ends as it is
    p.requeue = verdict.why_not;
    say_on_stderr(fmt::format("air-run: Slurm job {} was not requeued: {}\n", c.job_id, verdict.why_not));
    return;
  }
  auto run = run_captured({"scontrol", "requeue", c.job_id}, env, k_helper_timeout);
  if (run && !run->timed_out && run->status.success()) {
    p.requeue = "requeued";
    say_on_stderr(fmt::format("air-run: Slurm job {} requeued (scontrol requeue): its next run resumes from "
                              "step {}\n",
                              c.job_id, p.stop_step));
    return;
  }
  std::string why = !run             ? run.error().message
                    : run->timed_out ? "scontrol requeue did not answer within 10s"
                                     : std::string(trim(run->err.empty() ? run->out : run->err));
  if (why.empty()) why = "scontrol requeue failed";
  p.requeue = why;
  say_on_stderr(fmt::format("air-run: Slurm job {} was not requeued: {}\n", c.job_id, why));
}

void report_setup_failure(ControlChannel* control, const Error& error) {
  if (control == nullptr) return;
  int code = 125;
  if (error.kind == ErrorKind::usage || error.kind == ErrorKind::hardware) code = 2;
  if (error.kind == ErrorKind::not_executable) code = 126;
  if (error.kind == ErrorKind::not_found) code = 127;
  control->report_failure(code, -1, error.message);
  RunOutcome outcome;
  outcome.status = RunOutcome::Status::launch_failed;
  control->finish(outcome); // already reported: this only closes the connection politely
}

Expected<std::string> join_token(const Environment& env) {
  if (auto token = env_or(env, "AIR_RUN_JOIN_TOKEN"); !token.empty()) return token;
  const std::string file = env_or(env, "AIR_RUN_JOIN_TOKEN_FILE");
  if (file.empty()) return std::string();
  // A secret: only we may have written it, and only we may read it.
  AIR_TRY(check_trusted_path(file, "join token file"));
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    return usage_error(
        fmt::format("join token file {} is readable by other users (mode {:04o}); chmod 600 it", file,
                    static_cast<unsigned>(st.st_mode & 07777)));
  }
  auto text = read_text_file(file, "join token file");
  if (!text) return text.error();
  std::string token = *text;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
    token.pop_back();
  if (token.empty()) return usage_error(fmt::format("join token file {} is empty", file));
  return token;
}

Expected<std::unique_ptr<ControlChannel>> join_cluster(const ClusterContext& c, int ranks_per_node,
                                                       const std::string& run_id, const Environment& env,
                                                       int interrupt_fd, int* interrupted_by,
                                                       const std::string& mlflow_experiment_id,
                                                       const std::string& mlflow_run_id) {
  if (!c.multi_node()) return std::unique_ptr<ControlChannel>();
  auto token = join_token(env);
  if (!token) return token.error();
  if (token->empty() && c.node_rank == 0) {
    say_on_stderr(
        "air-run: warning: the control connection is not authenticated: anyone who reaches the control "
        "port during the join can pose as a node; give every node the same secret in "
        "AIR_RUN_JOIN_TOKEN (or AIR_RUN_JOIN_TOKEN_FILE)\n");
  }
  ControlOptions options;
  options.join_token = *token;
  options.job_id = c.job_id;
  options.node_rank = c.node_rank;
  options.num_nodes = c.num_nodes;
  options.ranks_per_node = ranks_per_node;
  options.node_name = c.node_name;
  options.node_names = c.nodes;
  options.master_host = c.master_host;
  options.port = c.control_port;
  options.run_id = run_id;
  options.mlflow_experiment_id = mlflow_experiment_id;
  options.mlflow_run_id = mlflow_run_id;
  options.join_timeout = c.join_timeout;
  options.c10d = c.c10d;
  options.may_host = c.may_host;
  options.min_nodes = c.min_nodes;
  options.last_call_timeout = c.last_call_timeout;
  if (c.read_timeout) {
    options.heartbeat_timeout = *c.read_timeout;
    // Several heartbeats per tolerated silence, however short it is set:
    // one a second against a read_timeout of 1 s would lose the peer to any delay.
    options.heartbeat_interval = std::min(options.heartbeat_interval, options.heartbeat_timeout / 4);
  }
  options.master_port = c.master_port;
  options.interrupt_fd = interrupt_fd;
  options.notice = [](const std::string& line) { say_on_stderr("air-run: " + line + "\n"); };
  return ControlChannel::join(options, interrupted_by);
}

} // namespace air::cli
