// make_plan: the pure function from a resolved spec and a selection to what
// every rank executes (argv, environment, files). No process is started.
#include "core/run/plan.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/plan_fixture.hpp"

#include <set>

using air::test::spec_from;

namespace {

air::Selection cpu_ranks(int n) {
  air::Selection s;
  s.cpu = true;
  s.ranks = n;
  s.accelerator_type = "CPU";
  return s;
}

air::Selection gpu_ranks(int n) {
  air::Selection s;
  s.ranks = n;
  s.accelerator_type = "GPU_" + std::to_string(n) + "xH200";
  for (int i = 0; i < n; ++i) {
    air::GpuInfo gpu;
    gpu.index = i;
    gpu.uuid = "GPU-" + std::to_string(i) + "000";
    gpu.model = "H200";
    s.gpus.push_back(gpu);
  }
  return s;
}

air::PlanContext context(int node_rank = 0, int num_nodes = 1) {
  air::PlanContext ctx;
  ctx.run_id = "r1";
  ctx.run_dir = "/tmp/air-run-r1";
  ctx.master_port = 29500;
  ctx.node_rank = node_rank;
  ctx.num_nodes = num_nodes;
  return ctx;
}

} // namespace

TEST_CASE("make_plan numbers ranks across nodes and gives each its variables", "[plan]") {
  const auto spec = spec_from("command: [train.py, --lr, '0.1']\n");
  auto plan = air::make_plan(spec, cpu_ranks(2), {{"HOME", "/root"}, {"RANK", "stale"}}, context(1, 2));
  REQUIRE(plan.ok());
  CHECK(plan->world_size == 4);
  REQUIRE(plan->ranks.size() == 2);
  std::set<std::string> files;
  for (int local = 0; local < 2; ++local) {
    const air::RankPlan& r = plan->ranks[static_cast<std::size_t>(local)];
    CHECK(r.rank == 2 + local);
    CHECK(r.local_rank == local);
    CHECK(r.env.at("RANK") == std::to_string(2 + local)); // never the parent's stale RANK
    CHECK(r.env.at("LOCAL_RANK") == std::to_string(local));
    CHECK(r.env.at("WORLD_SIZE") == "4");
    CHECK(r.env.at("LOCAL_WORLD_SIZE") == "2");
    CHECK(r.env.at("GROUP_RANK") == "1");
    CHECK(r.env.at("GROUP_WORLD_SIZE") == "2");
    CHECK(r.env.at("MASTER_PORT") == "29500");
    CHECK(r.env.at("TORCHELASTIC_RUN_ID") == "r1");
    CHECK(r.env.at("HOME") == "/root");
    CHECK(r.env.at("AIR_RESULT_FILE") == r.result_file);
    CHECK(r.env.at("TORCHELASTIC_ERROR_FILE") == r.error_file);
    CHECK(r.result_file.rfind("/tmp/air-run-r1/", 0) == 0);
    files.insert(r.result_file);
    files.insert(r.error_file);
    // A .py target runs under the interpreter, unbuffered, with its arguments.
    REQUIRE(r.argv.size() == 5);
    CHECK(r.argv[1] == "-u");
    CHECK(r.argv[2] == "train.py");
    CHECK(r.argv[4] == "0.1");
  }
  CHECK(files.size() == 4); // no two ranks share a result or error file
}

TEST_CASE("make_plan defaults OMP_NUM_THREADS only for several ranks and keeps the user's", "[plan]") {
  const auto spec = spec_from("command: [train.py]\n");
  auto several = air::make_plan(spec, cpu_ranks(2), {}, context());
  REQUIRE(several.ok());
  CHECK(several->ranks[0].env.at("OMP_NUM_THREADS") == "1");
  CHECK(several->notices.size() == 1);
  auto one = air::make_plan(spec, cpu_ranks(1), {}, context());
  REQUIRE(one.ok());
  CHECK(one->ranks[0].env.count("OMP_NUM_THREADS") == 0);
  auto users = air::make_plan(spec, cpu_ranks(2), {{"OMP_NUM_THREADS", "8"}}, context());
  REQUIRE(users.ok());
  CHECK(users->ranks[1].env.at("OMP_NUM_THREADS") == "8");
  CHECK(users->notices.empty());
}

TEST_CASE("make_plan runs modules and plain executables as asked", "[plan]") {
  auto module =
      air::make_plan(spec_from("module: true\ncommand: [pkg.train, -x]\n"), cpu_ranks(1), {}, context());
  REQUIRE(module.ok());
  const auto& m = module->ranks[0].argv;
  REQUIRE(m.size() == 5);
  CHECK(m[1] == "-u");
  CHECK(m[2] == "-m");
  CHECK(m[3] == "pkg.train");
  auto exe =
      air::make_plan(spec_from("no_python: true\ncommand: [/bin/echo, hi]\n"), cpu_ranks(1), {}, context());
  REQUIRE(exe.ok());
  CHECK(exe->ranks[0].argv == std::vector<std::string>{"/bin/echo", "hi"});
}

TEST_CASE("make_plan isolates GPUs only when asked", "[plan]") {
  auto isolated =
      air::make_plan(spec_from("isolate_gpus: true\ncommand: [train.py]\n"), gpu_ranks(2), {}, context());
  REQUIRE(isolated.ok());
  CHECK(isolated->ranks[1].gpu_uuid == "GPU-1000");
  CHECK(isolated->ranks[1].env.at("CUDA_VISIBLE_DEVICES") == "GPU-1000");
  CHECK(isolated->ranks[1].env.at("LOCAL_RANK") == "0");
  auto shared = air::make_plan(spec_from("command: [train.py]\n"), gpu_ranks(2), {}, context());
  REQUIRE(shared.ok());
  CHECK(shared->ranks[1].env.at("LOCAL_RANK") == "1"); // binds with torch.cuda.set_device(LOCAL_RANK)
}

TEST_CASE("make_plan hides the ranks --ranks leaves out of the console", "[plan]") {
  auto plan =
      air::make_plan(spec_from("console_ranks: [1]\ncommand: [train.py]\n"), cpu_ranks(3), {}, context());
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->ranks[0].console);
  CHECK(plan->ranks[1].console);
  CHECK_FALSE(plan->ranks[2].console);
}

TEST_CASE("make_plan refuses what cannot run", "[plan]") {
  const auto spec = spec_from("command: [train.py]\n");
  auto none = air::make_plan(spec, cpu_ranks(0), {}, context());
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message == "nothing to run: 0 ranks selected");
  auto outside = air::make_plan(spec, cpu_ranks(1), {}, context(2, 2));
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.error().message == "node rank 2 is outside 0..1");
  air::Selection short_of_gpus = gpu_ranks(1);
  short_of_gpus.ranks = 2;
  auto gpus = air::make_plan(spec, short_of_gpus, {}, context());
  REQUIRE_FALSE(gpus.ok());
  CHECK(gpus.error().message == "2 ranks need 2 GPUs, 1 selected");
}
