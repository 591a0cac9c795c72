// torchrun's command line (core/spec/torchrun) and the worker environment
// and rank placement it implies (core/run/plan, core/run/nproc).
#include "core/run/plan.hpp"
#include "core/spec/spec.hpp"
#include "core/spec/torchrun.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/plan_fixture.hpp"

#include <algorithm>

using air::test::plan_context;

using Strings = std::vector<std::string>;

namespace {

/// A CLI like air-run's: a few value flags, a few switches, two short letters.
std::vector<air::KnownFlag> cli_flags() {
  return {{"nproc-per-node", "", true},
          {"num-accelerators", "n", true},
          {"nnodes", "", true},
          {"node-rank", "", true},
          {"master-addr", "", true},
          {"master-port", "", true},
          {"module", "m", false},
          {"no-python", "", false},
          {"no-prefix", "", false},
          {"tee", "t", true},
          {"redirects", "r", true},
          {"log-dir", "", true},
          {"grace-period", "", true},
          {"isolate-gpus", "", false},
          {"dry-run", "", false},
          {"numa-binding", "", true},
          {"signals-to-handle", "", true},
          {"duplicate-stdout-filters", "", true},
          {"duplicate-stderr-filters", "", true},
          {"virtual-local-rank", "", false}};
}

air::LauncherArgs normalize(const Strings& args, const air::Environment& env = {}) {
  auto r = air::normalize_launcher_args(args, cli_flags(), env);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::string normalize_error(const Strings& args, const air::Environment& env = {}) {
  auto r = air::normalize_launcher_args(args, cli_flags(), env);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == air::ErrorKind::usage);
  return r.error().message;
}

air::Hardware gpus(int n) {
  air::Hardware hw;
  hw.source = "test";
  for (int i = 0; i < n; ++i)
    hw.gpus.push_back({i, "GPU-" + std::to_string(i), "", "NVIDIA H200", "H200", 0});
  return hw;
}

air::LaunchSpec spec_for(Strings command) {
  air::LaunchSpec spec;
  spec.command.value = std::move(command);
  return spec;
}

} // namespace

TEST_CASE("torchrun's underscore spellings and prefixes become the CLI's flags", "[torchrun]") {
  CHECK(normalize({"--nproc_per_node=4", "--master_port", "1234", "train.py", "--lr", "1"}).args ==
        Strings{"--nproc-per-node=4", "--master-port", "1234", "train.py", "--lr", "1"});
  // argparse abbreviations: a unique prefix is the flag, in either spelling.
  CHECK(normalize({"--nproc", "2", "--master_a", "h", "t.py"}).args ==
        Strings{"--nproc-per-node", "2", "--master-addr", "h", "t.py"});
  // A prefix of several flags is refused with their names, as torchrun does.
  CHECK(normalize_error({"--master", "x", "t.py"}) ==
        "ambiguous option: --master could match --master-addr, --master-port");
  // ... unless exactly one of them is torchrun's: a torchrun line means that one.
  CHECK(normalize({"--no-p", "./bin"}).args == Strings{"--no-python", "./bin"});
  // Flags unknown to both pass through for the parser's own error.
  CHECK(normalize({"--rdzc_backend=c10d", "t.py"}).args == Strings{"--rdzc_backend=c10d", "t.py"});
}

TEST_CASE("values are never taken for the target, and the script's own flags are left alone", "[torchrun]") {
  CHECK(normalize({"-t", "3", "-r3", "-m", "pkg.train", "--nproc_per_node", "2"}).args ==
        Strings{"-t", "3", "-r3", "-m", "pkg.train", "--nproc_per_node", "2"});
  CHECK(normalize({"--no_python", "./bin", "--master_port=1"}).args ==
        Strings{"--no-python", "./bin", "--master_port=1"});
}

TEST_CASE("a -- right after the script is dropped as torchrun's argparse drops it", "[torchrun]") {
  CHECK(normalize({"train.py", "--", "--lr", "1"}).args == Strings{"train.py", "--lr", "1"});
  CHECK(normalize({"--", "train.py", "--", "x"}).args == Strings{"--", "train.py", "x"});
  // Later ones belong to the script.
  CHECK(normalize({"train.py", "a", "--", "b"}).args == Strings{"train.py", "a", "--", "b"});
}

TEST_CASE("torchrun flags without an air-run meaning are accepted and noted once", "[torchrun]") {
  const auto r = normalize({"--monitor_interval=5", "--monitor-interval", "1", "--start-method", "spawn",
                            "--numa_binding", "node", "t.py"});
  // torchrun 2.11's --numa-binding has a meaning now: it reaches the CLI.
  CHECK(r.args == Strings{"--numa-binding", "node", "t.py"});
  REQUIRE(r.notes.size() == 3);
  CHECK(r.notes[0] ==
        "air-run: note: --monitor-interval 5 accepted for torchrun compatibility, without effect: "
        "air-run waits on its ranks' events instead of polling them");
  CHECK(r.notes[2].find("--start-method spawn") != std::string::npos);
  // Renamed ones become the air-run flag.
  CHECK(normalize({"--shutdown_timeout", "60", "--virtual_local_rank", "t.py"}).args ==
        Strings{"--grace-period", "60", "--virtual-local-rank", "t.py"});
  CHECK(normalize({"--duplicate_stdout_filters", "loss,acc", "--signals_to_handle=SIGUSR1", "t.py"}).args ==
        Strings{"--duplicate-stdout-filters", "loss,acc", "--signals-to-handle=SIGUSR1", "t.py"});
  // Every torchrun flag is known: none is left for the parser to refuse.
  for (const auto& flag : air::torchrun_flags()) {
    Strings line{"--" + std::string(flag.name)};
    if (flag.takes_value) line.push_back("1");
    line.push_back("t.py");
    const auto out = normalize(line);
    INFO(flag.name);
    CHECK(out.args.back() == "t.py");
    CHECK((out.args.size() == line.size() || !out.notes.empty()));
  }
}

TEST_CASE("PET_* variables stand for flags the command line leaves out", "[torchrun]") {
  const air::Environment env{{"PET_NPROC_PER_NODE", "4"},  {"PET_NNODES", "2"},
                             {"PET_MASTER_PORT", "23456"}, {"PET_NO_PYTHON", "0"},
                             {"PET_MODULE", "1"},          {"PET_RDZV_CONF", "join_timeout=5"}};
  const auto r = normalize({"--nnodes=1", "t"}, env);
  CHECK(r.args == Strings{"--nproc-per-node", "4", "--module", "--master-port", "23456", "--nnodes=1", "t"});
  CHECK(r.notes.size() == 1); // PET_RDZV_CONF, while the CLI has no --rdzv-conf
  CHECK(r.notes[0].find("PET_RDZV_CONF") != std::string::npos);
  // A short flag counts as given.
  CHECK(normalize({"-m", "pkg"}, env).args ==
        Strings{"--nnodes", "2", "--nproc-per-node", "4", "--master-port", "23456", "-m", "pkg"});
  CHECK(normalize_error({"t"}, {{"PET_STANDALONE", "yes"}}) ==
        "environment variable PET_STANDALONE: expected 0 or 1, got 'yes'");
}

TEST_CASE("-r/-t values: one for every local rank or torchrun's per-rank map", "[torchrun]") {
  auto all = air::parse_std_streams("3", "tee");
  REQUIRE(all.ok());
  CHECK(all->for_rank(5) == 3);
  auto map = air::parse_std_streams("0:3,1:2", "tee");
  REQUIRE(map.ok());
  CHECK(map->for_rank(0) == 3);
  CHECK(map->for_rank(1) == 2);
  CHECK(map->for_rank(2) == 0);
  for (const char* bad : {"4", "", "0:4", "10:1", "0:1,", "0:1;1:2", "a"}) {
    INFO(bad);
    CHECK_FALSE(air::parse_std_streams(bad, "--tee").ok());
  }
  CHECK(air::parse_std_streams("x", "--tee").error().message ==
        "--tee: expected 0, 1, 2, 3 or LOCAL_RANK:N pairs like 0:3,1:2, got 'x'");
}

TEST_CASE("--nproc-per-node: numbers and torchrun's words", "[torchrun]") {
  using Kind = air::NprocPerNode::Kind;
  CHECK(air::parse_nproc_per_node("8", "n")->count == 8);
  CHECK(air::parse_nproc_per_node("gpu", "n")->kind == Kind::gpu);
  CHECK(air::parse_nproc_per_node("cpu", "n")->kind == Kind::cpu);
  CHECK(air::parse_nproc_per_node("auto", "n")->kind == Kind::auto_detect);
  CHECK(air::parse_nproc_per_node("0", "--nproc-per-node").error().message ==
        "--nproc-per-node: must be at least 1, got 0");
  CHECK(air::parse_nproc_per_node("gpus", "--nproc-per-node").error().message ==
        "--nproc-per-node: expected a number of ranks, gpu, cpu or auto, got 'gpus'");
}

TEST_CASE("--nproc-per-node against the machine, as torchrun decides", "[torchrun]") {
  const auto n = [](const char* text) { return *air::parse_nproc_per_node(text, "n"); };
  // No GPU: a count and auto run on CPU, gpu fails as torchrun's does.
  auto cpu4 = air::select_nproc_per_node(n("4"), std::nullopt, gpus(0), 16);
  REQUIRE(cpu4.ok());
  CHECK(cpu4->cpu);
  CHECK(cpu4->ranks == 4);
  CHECK(air::select_nproc_per_node(n("auto"), std::nullopt, gpus(0), 16)->ranks == 16);
  CHECK(air::select_nproc_per_node(n("cpu"), std::nullopt, gpus(2), 16)->ranks == 16);
  auto no_gpu = air::select_nproc_per_node(n("gpu"), std::nullopt, gpus(0), 16);
  REQUIRE_FALSE(no_gpu.ok());
  CHECK(no_gpu.error().message == "nproc_per_node gpu: CUDA is not available (no GPU detected)");
  // GPUs: gpu and auto count them; more ranks than GPUs share them, with a notice.
  CHECK(air::select_nproc_per_node(n("gpu"), std::nullopt, gpus(2), 16)->ranks == 2);
  CHECK(air::select_nproc_per_node(n("auto"), std::nullopt, gpus(2), 16)->accelerator_type == "GPU_2xH200");
  auto shared = air::select_nproc_per_node(n("4"), std::nullopt, gpus(2), 16);
  REQUIRE(shared.ok());
  CHECK(shared->shared_gpus);
  CHECK(shared->gpus.size() == 2);
  REQUIRE(shared->notices.size() == 1);
  CHECK(shared->notices[0].rfind("4 ranks on 2 GPU(s)", 0) == 0);
  // Fewer ranks than GPUs: the first ones.
  auto one = air::select_nproc_per_node(n("1"), std::nullopt, gpus(2), 16);
  CHECK(one->gpus.size() == 1);
  CHECK_FALSE(one->shared_gpus);
  CHECK(air::select_nproc_per_node(n("2"), std::string("CPU"), gpus(2), 16)->cpu);
}

TEST_CASE("the worker environment is torchrun's", "[torchrun][plan]") {
  auto spec = spec_for({"train.py", "--x"});
  spec.role.value = "trainer";
  air::Environment parent{{"CUDA_VISIBLE_DEVICES", "3,1"}, {"RANK", "stale"}, {"PATH", "/bin"}};
  air::PlanContext ctx = plan_context();
  ctx.node_rank = 1;
  ctx.num_nodes = 2;
  auto selection = *air::select_nproc_per_node({air::NprocPerNode::Kind::count, 4}, std::nullopt, gpus(2), 8);
  auto plan = air::make_plan(spec, selection, parent, ctx);
  INFO((plan ? std::string() : plan.error().message));
  REQUIRE(plan.ok());
  REQUIRE(plan->ranks.size() == 4);
  for (int local = 0; local < 4; ++local) {
    const auto& rank = plan->ranks[static_cast<std::size_t>(local)];
    const auto& env = rank.env;
    INFO(local);
    CHECK(rank.argv == Strings{"python3", "-u", "train.py", "--x"});
    CHECK(env.at("RANK") == std::to_string(4 + local));
    CHECK(env.at("LOCAL_RANK") == std::to_string(local));
    CHECK(env.at("WORLD_SIZE") == "8");
    CHECK(env.at("LOCAL_WORLD_SIZE") == "4");
    CHECK(env.at("GROUP_RANK") == "1");
    CHECK(env.at("GROUP_WORLD_SIZE") == "2");
    CHECK(env.at("ROLE_RANK") == std::to_string(4 + local));
    CHECK(env.at("ROLE_WORLD_SIZE") == "8");
    CHECK(env.at("ROLE_NAME") == "trainer");
    CHECK(env.at("MASTER_PORT") == "29500");
    CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "0");
    CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
    CHECK(env.at("OMP_NUM_THREADS") == "1");
    // The parent's list, untouched: rank i uses device LOCAL_RANK inside it.
    CHECK(env.at("CUDA_VISIBLE_DEVICES") == "3,1");
    CHECK(env.count("CUDA_DEVICE_ORDER") == 0);
    CHECK(rank.gpu_uuid == "GPU-" + std::to_string(local % 2));
  }
  // air-run's strict selection has no shared GPUs: the plan refuses more ranks.
  selection.shared_gpus = false;
  CHECK(air::make_plan(spec, selection, parent, ctx).error().message == "4 ranks need 4 GPUs, 2 selected");
}

TEST_CASE("--isolate-gpus narrows CUDA_VISIBLE_DEVICES to each rank's GPU", "[torchrun][plan]") {
  auto spec = spec_for({"./bin"});
  spec.isolate_gpus.value = true;
  auto selection = *air::select_nproc_per_node({air::NprocPerNode::Kind::count, 2}, std::nullopt, gpus(2), 8);
  auto plan = air::make_plan(spec, selection, {}, plan_context());
  REQUIRE(plan.ok());
  CHECK(plan->ranks[1].env.at("CUDA_VISIBLE_DEVICES") == "GPU-1");
  CHECK(plan->ranks[1].env.at("LOCAL_RANK") == "0");
}

TEST_CASE("-r/-t files in torchrun's layout and the console filters", "[torchrun][plan]") {
  auto spec = spec_for({"./bin"});
  spec.redirects.value = "1";
  spec.tee.value = "0:2";
  spec.local_ranks_filter.value = {1};
  air::Selection cpu;
  cpu.cpu = true;
  cpu.ranks = 2;
  air::PlanContext ctx = plan_context();
  ctx.torchrun_log_dir = "/logs/r1_abc";
  auto plan = air::make_plan(spec, cpu, {}, ctx);
  REQUIRE(plan.ok());
  const auto& r0 = plan->ranks[0];
  CHECK(r0.stream_files[0] == "/logs/r1_abc/attempt_0/0/stdout.log");
  CHECK(r0.stream_files[1] == "/logs/r1_abc/attempt_0/0/stderr.log");
  CHECK_FALSE(r0.stream_console[0]); // redirected
  CHECK(r0.stream_console[1]);       // teed
  CHECK(r0.error_file == "/logs/r1_abc/attempt_0/0/error.json");
  CHECK(r0.env.at("TORCHELASTIC_ERROR_FILE") == r0.error_file);
  CHECK_FALSE(r0.console); // not in --local-ranks-filter
  const auto& r1 = plan->ranks[1];
  CHECK(r1.stream_files[0] == "/logs/r1_abc/attempt_0/1/stdout.log");
  CHECK(r1.stream_files[1].empty());
  CHECK(r1.console);
}

TEST_CASE("nproc_per_node and num_accelerators exclude each other", "[torchrun][spec]") {
  air::SpecInputs in;
  in.flags = {{"nproc_per_node", "2", "--nproc-per-node"}, {"num_accelerators", "2", "-n"}};
  auto r = air::resolve_spec(in);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "--nproc-per-node: give either it or num_accelerators (flag -n)");
  in.flags = {{"nproc_per_node", "many", "--nproc-per-node"}};
  CHECK(air::resolve_spec(in).error().message ==
        "--nproc-per-node: expected a number of ranks, gpu, cpu or auto, got 'many'");
  in.flags = {{"tee", "9", "--tee"}};
  CHECK(air::resolve_spec(in).error().message ==
        "--tee: expected 0, 1, 2, 3 or LOCAL_RANK:N pairs like 0:3,1:2, got '9'");
}

TEST_CASE("a torchrun-only option marks the command line as torchrun's", "[torchrun]") {
  CHECK(normalize({"--standalone", "--nproc_per_node=2", "train.py"}).torchrun_style == "--standalone");
  CHECK(normalize({"--nproc-per-node", "2", "train.py"}).torchrun_style == "--nproc-per-node");
  CHECK(normalize({"--nproc", "2", "train.py"}).torchrun_style == "--nproc"); // argparse's prefix
  CHECK(normalize({"--rdzv-backend=c10d", "train.py"}).torchrun_style == "--rdzv-backend");
  CHECK(normalize({"-r", "3", "train.py"}).torchrun_style == "-r");
  CHECK(normalize({"--monitor-interval=1", "train.py"}).torchrun_style == "--monitor-interval");
  CHECK(normalize({"--shutdown-timeout", "5", "train.py"}).torchrun_style == "--shutdown-timeout");
  // Underscores are argparse's, that is torchrun's, spelling.
  CHECK(normalize({"--node_rank", "0", "train.py"}).torchrun_style == "--node_rank");
  // Options both launchers have, and air-run's own, do not.
  CHECK(normalize({"--nnodes", "2", "--node-rank", "1", "--master-addr", "h", "train.py"})
            .torchrun_style.empty());
  CHECK(normalize({"-n", "2", "-m", "--no-python", "--log-dir", "d", "train"}).torchrun_style.empty());
  // Nor the target's own options, nor PET_* variables.
  CHECK(normalize({"train.py", "--standalone", "--nproc_per_node=2"}).torchrun_style.empty());
  CHECK(normalize({"train.py"}, {{"PET_NPROC_PER_NODE", "2"}}).torchrun_style.empty());
}
