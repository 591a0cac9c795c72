// Slurm's environment and host lists, and the cluster context built from them.
#include "core/cluster/placement.hpp"
#include "core/cluster/slurm.hpp"
#include "tests/unit/catch.hpp"

using Hosts = std::vector<std::string>;

namespace {

Hosts expand_ok(const std::string& text) {
  auto hosts = air::expand_hostlist(text);
  INFO(text << ": " << (hosts ? "" : hosts.error().message));
  REQUIRE(hosts.ok());
  return *hosts;
}

std::string expand_error(const std::string& text) {
  auto hosts = air::expand_hostlist(text);
  REQUIRE_FALSE(hosts.ok());
  return hosts.error().message;
}

/// What srun gives task 1 of `srun -N2 --ntasks-per-node=1` (taken from a real Slurm 22.05).
air::Environment srun_env() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_JOBID", "4242"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEPID", "0"},
          {"SLURM_NNODES", "2"},
          {"SLURM_JOB_NUM_NODES", "2"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_NODEID", "1"},
          {"SLURM_JOB_NODELIST", "node[1-2]"},
          {"SLURM_STEP_NODELIST", "node[1-2]"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_LOCALID", "0"},
          {"SLURMD_NODENAME", "node2"}};
}

air::LaunchSpec spec_with(std::initializer_list<std::tuple<std::string, std::string, std::string>> flags) {
  air::SpecInputs in;
  in.flags = flags;
  auto r = air::resolve_spec(in);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return r->spec;
}

} // namespace

TEST_CASE("Slurm host lists expand like scontrol show hostnames", "[slurm]") {
  CHECK(expand_ok("node1") == Hosts{"node1"});
  CHECK(expand_ok("node[1-2]") == Hosts{"node1", "node2"});
  CHECK(expand_ok("node[1-2,5],gpu-a[01-03]") ==
        Hosts{"node1", "node2", "node5", "gpu-a01", "gpu-a02", "gpu-a03"});
  CHECK(expand_ok("a,b[7],c") == Hosts{"a", "b7", "c"});
  CHECK(expand_ok("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(expand_ok("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand_ok("rack[1-2]-x") == Hosts{"rack1-x", "rack2-x"});
  CHECK(expand_ok("h[5]\n") == Hosts{"h5"});
}

TEST_CASE("bad Slurm host lists are errors naming the list", "[slurm]") {
  CHECK(expand_error("node[1-") == "host list 'node[1-': unclosed '['");
  CHECK(expand_error("node1]") == "host list 'node1]': unmatched ']'");
  CHECK(expand_error("node[]") == "host list 'node[]': empty '[]'");
  CHECK(expand_error("node[3-1]") == "host list 'node[3-1]': range '3-1' runs backwards");
  CHECK(expand_error("node[a-b]") == "host list 'node[a-b]': bad range 'a-b'");
  CHECK(expand_error("a,,b") == "host list 'a,,b': empty host name");
  CHECK(expand_error("") == "host list '': empty");
  CHECK(expand_error("n[1-99999999]") == "host list 'n[1-99999999]': range '1-99999999' is too large");
}

TEST_CASE("Slurm's compressed tasks per node expand", "[slurm]") {
  auto counts = air::expand_tasks_per_node("2(x3),1");
  REQUIRE(counts.ok());
  CHECK(*counts == std::vector<int>{2, 2, 2, 1});
  CHECK(*air::expand_tasks_per_node("1") == std::vector<int>{1});
  CHECK(air::expand_tasks_per_node("2(x").error().message == "tasks per node '2(x': expected N(xM)");
  CHECK(air::expand_tasks_per_node("x").error().message ==
        "tasks per node 'x': expected a whole number, got 'x'");
}

TEST_CASE("the master port comes from the job id, even, in 15000..29998", "[slurm]") {
  CHECK(air::slurm_master_port("0") == 15000);
  CHECK(air::slurm_master_port("1") == 15002);
  CHECK(air::slurm_master_port("4242") == 15000 + 4242 * 2);
  CHECK(air::slurm_master_port("7499") == 29998);
  CHECK(air::slurm_master_port("7500") == 15000);
  CHECK(air::slurm_master_port("123+1") == 15246); // heterogeneous job: leading digits
  CHECK(air::slurm_master_port("99999999999999999999") ==
        15000 + 2 * 2499); // (10^20 - 1) mod 7500, no overflow
}

TEST_CASE("scontrol output gives NodeAddr and KillWait", "[slurm]") {
  const std::string node = "NodeName=node1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.1.2.3 NodeHostName=node1 "
                           "Version=22.05.8\n";
  CHECK(air::parse_scontrol_node_addr(node) == std::optional<std::string>("10.1.2.3"));
  CHECK(air::parse_scontrol_node_addr("NodeName=x NodeHostName=x") == std::nullopt);
  CHECK(air::parse_scontrol_node_addr("XNodeAddr=1.2.3.4") == std::nullopt);
  CHECK(air::parse_scontrol_kill_wait(
            "JobCompType = none\nKillWait                = 30 sec\nKillOnBadExit = 0\n") ==
        std::optional<int>(30));
  CHECK(air::parse_scontrol_kill_wait("KillOnBadExit = 0\n") == std::nullopt);
}

TEST_CASE("the environment of an srun task", "[slurm]") {
  auto s = air::read_slurm_env(srun_env());
  REQUIRE(s.ok());
  REQUIRE(s->has_value());
  const air::SlurmEnv& e = **s;
  CHECK(e.job_id == "4242");
  CHECK(e.step_id == std::optional<int>(0));
  CHECK(e.num_nodes == 2);
  CHECK(e.node_id == 1);
  CHECK(e.nodes == Hosts{"node1", "node2"});
  CHECK(e.node_name == "node2");
  CHECK(e.tasks_on_this_node == 1);
  CHECK(e.gpus.empty());

  auto env = srun_env();
  env["SLURM_STEP_GPUS"] = "0,1";
  env["SLURM_JOB_GPUS"] = "0,1,2,3";
  CHECK((*air::read_slurm_env(env))->gpus == "0,1");
  CHECK_FALSE(air::read_slurm_env({{"PATH", "/bin"}})->has_value());
}

TEST_CASE("inside a step the step's nodes win over the job's", "[slurm]") {
  auto env = srun_env();
  env["SLURM_JOB_NUM_NODES"] = "4";
  env["SLURM_JOB_NODELIST"] = "node[1-4]";
  env.erase("SLURM_NNODES");
  auto s = air::read_slurm_env(env);
  REQUIRE(s.ok());
  CHECK((*s)->num_nodes == 2);
  CHECK((*s)->nodes == Hosts{"node1", "node2"});
  // A batch script (no step) sees the job.
  env.erase("SLURM_STEP_ID");
  env.erase("SLURM_STEPID");
  env["SLURM_NODEID"] = "0";
  s = air::read_slurm_env(env);
  REQUIRE(s.ok());
  CHECK_FALSE((*s)->step_id.has_value());
  CHECK((*s)->num_nodes == 4);
  CHECK((*s)->nodes.size() == 4);
}

TEST_CASE("bad Slurm variables are errors naming the variable", "[slurm]") {
  auto env = srun_env();
  env["SLURM_NODEID"] = "x";
  CHECK(air::read_slurm_env(env).error().message == "SLURM_NODEID: expected a whole number, got 'x'");
  env = srun_env();
  env["SLURM_NODEID"] = "2";
  CHECK(air::read_slurm_env(env).error().message == "SLURM_NODEID 2 is outside 0..1 (2 nodes)");
  env = srun_env();
  env["SLURM_STEP_NODELIST"] = "node[1-3]";
  CHECK(air::read_slurm_env(env).error().message ==
        "SLURM_STEP_NODELIST names 3 node(s) but SLURM_STEP_NUM_NODES says 2");
  env = srun_env();
  env["SLURM_STEP_NODELIST"] = "node[1-";
  CHECK(air::read_slurm_env(env).error().message == "SLURM_STEP_NODELIST: host list 'node[1-': unclosed '['");
}

TEST_CASE("under srun the cluster comes from Slurm, with Slurm origins", "[cluster]") {
  air::LaunchSpec spec = spec_with({});
  auto c = air::apply_cluster(spec, srun_env(), "vm");
  REQUIRE(c.ok());
  CHECK(c->source == "slurm");
  CHECK(c->num_nodes == 2);
  CHECK(c->node_rank == 1);
  CHECK(c->node_name == "node2");
  CHECK(c->master_host == "node1");
  CHECK(c->master_is_slurm_node);
  CHECK(c->master_port == 15000 + 4242 * 2);
  CHECK(c->control_port == c->master_port + 1);
  CHECK(c->nodes == Hosts{"node1", "node2"});
  CHECK(c->describe_node(0) == "node 0 (node1)");
  CHECK(spec.nnodes.origin.describe() == "env SLURM_STEP_NUM_NODES");
  CHECK(spec.node_rank.origin.describe() == "env SLURM_NODEID");
  CHECK(spec.master_addr.origin.describe() == "env SLURM_STEP_NODELIST");
  CHECK(spec.master_port.origin.describe() == "env SLURM_JOB_ID");
  CHECK(spec.run_id.value == "slurm-4242.0");
}

TEST_CASE("flags win over Slurm's environment", "[cluster]") {
  air::LaunchSpec spec = spec_with({{"master_addr", "10.0.0.9", "--master-addr"},
                                    {"master_port", "31000", "--master-port"},
                                    {"control_port", "31005", "--control-port"},
                                    {"run_id", "mine", "--run-id"}});
  auto c = air::apply_cluster(spec, srun_env(), "vm");
  REQUIRE(c.ok());
  CHECK(c->master_host == "10.0.0.9");
  CHECK_FALSE(c->master_is_slurm_node);
  CHECK(c->master_port == 31000);
  CHECK(c->control_port == 31005);
  CHECK(spec.run_id.value == "mine");
}

TEST_CASE("more than one air-run per node under srun is an error", "[cluster]") {
  auto env = srun_env();
  env["SLURM_STEP_TASKS_PER_NODE"] = "2(x2)";
  air::LaunchSpec spec = spec_with({});
  CHECK(air::apply_cluster(spec, env, "vm").error().message ==
        "srun started 2 air-run tasks on node2 (SLURM_STEP_TASKS_PER_NODE=2(x2)); run one air-run per node "
        "with `srun --ntasks-per-node=1`: air-run starts the ranks itself");
}

TEST_CASE("a Slurm allocation without srun runs on this node, with a notice", "[cluster]") {
  air::Environment env = {{"SLURM_JOB_ID", "77"},
                          {"SLURM_JOB_NUM_NODES", "2"},
                          {"SLURM_JOB_NODELIST", "n[1-2]"},
                          {"SLURM_NODEID", "0"}};
  air::LaunchSpec spec = spec_with({});
  auto c = air::apply_cluster(spec, env, "n1");
  REQUIRE(c.ok());
  CHECK(c->source == "single");
  CHECK(c->num_nodes == 1);
  CHECK(c->master_port == 0);
  REQUIRE(c->notices.size() == 1);
  CHECK(c->notices[0] ==
        "Slurm job 77 has 2 nodes, but air-run was not started by srun: running on this node "
        "only; use `srun --ntasks-per-node=1 air-run ...` to run one agent per node");
}

TEST_CASE("static mode: torchrun's flags and defaults", "[cluster]") {
  air::LaunchSpec spec = spec_with({{"nnodes", "2", "--nnodes"}, {"node_rank", "1", "--node-rank"}});
  auto c = air::apply_cluster(spec, {}, "hostB");
  REQUIRE(c.ok());
  CHECK(c->source == "static");
  CHECK(c->num_nodes == 2);
  CHECK(c->node_rank == 1);
  CHECK(c->node_name == "hostB");
  CHECK(c->master_host == "127.0.0.1");
  CHECK(c->master_port == air::k_static_master_port);
  CHECK(c->control_port == air::k_static_master_port + 1);
  CHECK(c->join_timeout == air::Millis(300'000));

  spec = spec_with({{"nnodes", "2", "--nnodes"}, {"node_rank", "2", "--node-rank"}});
  CHECK(air::apply_cluster(spec, {}, "h").error().message ==
        "--node-rank: node rank 2 is outside 0..1 (--nnodes = 2)");
  spec = spec_with({{"nnodes", "2", "--nnodes"}, {"master_port", "65535", "--master-port"}});
  CHECK(air::apply_cluster(spec, {}, "h").error().message ==
        "--master-port: port 65535 leaves no room for the control port (master_port + 1); set control_port");
  spec = spec_with({{"nnodes", "2", "--nnodes"},
                    {"master_port", "400", "--master-port"},
                    {"control_port", "400", "--control-port"}});
  CHECK(air::apply_cluster(spec, {}, "h").error().message ==
        "--control-port: the control port must differ from the master port 400");
  spec = spec_with({{"nnodes", "2", "--nnodes"}, {"join_timeout", "0", "--join-timeout"}});
  CHECK(air::apply_cluster(spec, {}, "h").error().message == "--join-timeout: must be greater than zero");
}

TEST_CASE("one node stays single, whatever the port", "[cluster]") {
  air::LaunchSpec spec = spec_with({});
  auto c = air::apply_cluster(spec, {}, "h");
  REQUIRE(c.ok());
  CHECK(c->source == "single");
  CHECK_FALSE(c->multi_node());
  CHECK(c->master_port == 0);
  CHECK(c->control_port == 0);
}

TEST_CASE("node placeholders in output paths", "[cluster]") {
  air::ClusterContext c;
  c.node_rank = 3;
  c.node_name = "gpu7";
  CHECK(air::expand_node_placeholders("out/{node_rank}/summary-{node_name}.json", c) ==
        "out/3/summary-gpu7.json");
  CHECK(air::expand_node_placeholders("plain.json", c) == "plain.json");
}

TEST_CASE("a one-node srun step keeps loopback and a free port", "[cluster]") {
  air::Environment env = {{"SLURM_JOB_ID", "9"},
                          {"SLURM_STEP_ID", "1"},
                          {"SLURM_STEP_NUM_NODES", "1"},
                          {"SLURM_NODEID", "0"},
                          {"SLURM_STEP_NODELIST", "gpu-a01"},
                          {"SLURMD_NODENAME", "gpu-a01"},
                          {"SLURM_STEP_TASKS_PER_NODE", "1"}};
  air::LaunchSpec spec = spec_with({});
  auto c = air::apply_cluster(spec, env, "vm");
  REQUIRE(c.ok());
  CHECK(c->source == "slurm");
  CHECK_FALSE(c->multi_node());
  CHECK(c->node_name == "gpu-a01");
  CHECK(c->master_host == "127.0.0.1");
  CHECK(spec.master_addr.is_default());
  CHECK(c->master_port == 0);
  CHECK(spec.run_id.value == "slurm-9.1");
}

TEST_CASE("host lists and task counts are bounded in size", "[slurm]") {
  // Found by fuzzing: two ranges multiply into 99,980,001 names.
  auto product = air::expand_hostlist("a[0001-9999]b[0001-9999]");
  REQUIRE_FALSE(product.ok());
  CHECK(product.error().message.find("too many hosts") != std::string::npos);
  std::string parts;
  for (int i = 0; i < 3; ++i) parts += "n[1-60000],";
  CHECK_FALSE(air::expand_hostlist(parts + "x").ok());
  std::string repeats;
  for (int i = 0; i < 40; ++i) repeats += "1(x100000),";
  CHECK_FALSE(air::expand_tasks_per_node(repeats + "1").ok());
  CHECK(air::expand_hostlist("n[1-100000]")->size() == 100'000);
}

TEST_CASE("smaller bounds, as the fuzz target passes them, hold at their edge", "[slurm]") {
  constexpr air::HostlistBounds small{10, 40};
  CHECK(air::expand_hostlist("n[1-10]", small)->size() == 10);
  CHECK_FALSE(air::expand_hostlist("n[1-11]", small).ok());
  CHECK_FALSE(air::expand_hostlist("n[1-5],m[1-6]", small).ok());
  CHECK_FALSE(air::expand_hostlist("a[1-3]b[1-4]", small).ok()); // 12 names from two groups
  // "longname-1" .. "longname-4" is 40 bytes of names; a byte more on each is past the bound.
  CHECK(air::expand_hostlist("longname-[1-4]", small)->size() == 4);
  CHECK_FALSE(air::expand_hostlist("longname-[1-4]x", small).ok());
  CHECK(air::expand_tasks_per_node("2(x10)", small)->size() == 10);
  CHECK_FALSE(air::expand_tasks_per_node("2(x10),1", small).ok());
}

TEST_CASE("the job's end time is read from scontrol show job", "[slurm]") {
  using air::parse_scontrol_end_time;
  CHECK(parse_scontrol_end_time("JobId=2 JobName=usr1 RunTime=00:00:05 TimeLimit=00:02:00 "
                                "StartTime=2026-12-07T03:25:06 EndTime=2026-12-07T03:27:06 Deadline=N/A") ==
        "2026-12-07T03:27:06");
  CHECK_FALSE(parse_scontrol_end_time("JobId=2 EndTime=Unknown Deadline=N/A").has_value());
  CHECK_FALSE(parse_scontrol_end_time("JobId=2 StartTime=2026-12-07T03:25:06").has_value());
}
