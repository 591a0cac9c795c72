// What a launch's MLflow run records (core/mlflow/record.hpp), the git commit
// it finds, and the MLflow run ids on the multi-node control connection.
#include "core/cluster/control_message.hpp"
#include "core/mlflow/git.hpp"
#include "core/mlflow/record.hpp"
#include "tests/unit/catch.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using air::mlflow::KeyValue;

namespace {

std::string value_of(const std::vector<KeyValue>& items, const std::string& key) {
  for (const auto& kv : items) {
    if (kv.key == key) return kv.value;
  }
  return "<absent>";
}

air::RankOutcome rank(int r, air::ExitStatus status, long rss_kb) {
  air::RankOutcome out;
  out.rank = r;
  out.status = status;
  out.max_rss_kb = rss_kb;
  return out;
}

/// A scratch directory removed at the end of the test.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("air-git-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
  void write(const fs::path& rel, const std::string& text) const {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel) << text;
  }
};

const std::string k_commit = "0123456789abcdef0123456789abcdef01234567";

} // namespace

TEST_CASE("mlflow record: params and tags of a launch", "[mlflow]") {
  air::mlflow::LaunchFacts f;
  f.world_size = 4;
  f.num_nodes = 2;
  f.accelerator_type = "GPU_2xH200";
  f.timeout = air::Millis(5400'000);
  f.command = {"train.py", "--lr", "1e-3", "--name", "two words"};
  f.air_run_id = "0123abcd4567";
  f.host = "node1";
  f.user = "me";
  f.gpus = {air::GpuInfo{0, "GPU-aaa", "", "NVIDIA H200", "H200", 0},
            air::GpuInfo{1, "GPU-bbb", "", "NVIDIA H200", "H200", 0}};
  f.git_commit = k_commit;
  const auto params = air::mlflow::launch_params(f);
  CHECK(value_of(params, "ranks") == "4");
  CHECK(value_of(params, "nodes") == "2");
  CHECK(value_of(params, "accelerator_type") == "GPU_2xH200");
  CHECK(value_of(params, "timeout_s") == "5400");
  CHECK(value_of(params, "target") == "train.py");
  CHECK(value_of(params, "args") == "--lr 1e-3 --name 'two words'");
  CHECK(value_of(params, "air_run_version") == AIR_VERSION);
  CHECK(value_of(params, "air_run_id") == "0123abcd4567");
  f.timeout.reset();
  CHECK(value_of(air::mlflow::launch_params(f), "timeout_s") == "none");

  const auto tags = air::mlflow::launch_tags(f, "parent9", {{"team", "vision"}, {"air.host", "renamed"}});
  CHECK(value_of(tags, "mlflow.parentRunId") == "parent9");
  CHECK(value_of(tags, "mlflow.user") == "me");
  CHECK(value_of(tags, "mlflow.source.name") == "train.py");
  CHECK(value_of(tags, "mlflow.source.git.commit") == k_commit);
  CHECK(value_of(tags, "air.gpus") == "0: NVIDIA H200 (GPU-aaa), 1: NVIDIA H200 (GPU-bbb)");
  CHECK(value_of(tags, "air.host") == "renamed"); // the user's tags win
  CHECK(value_of(tags, "team") == "vision");
  CHECK(value_of(air::mlflow::launch_tags(f, "", {}), "mlflow.parentRunId") == "<absent>");
}

TEST_CASE("mlflow record: final status and metrics", "[mlflow]") {
  using S = air::RunOutcome::Status;
  CHECK(air::mlflow::final_status(S::succeeded) == "FINISHED");
  CHECK(air::mlflow::final_status(S::failed) == "FAILED");
  CHECK(air::mlflow::final_status(S::launch_failed) == "FAILED");
  CHECK(air::mlflow::final_status(S::timed_out) == "KILLED");
  CHECK(air::mlflow::final_status(S::interrupted) == "KILLED");

  air::RunOutcome o;
  o.status = S::failed;
  o.duration_s = 12.3456;
  o.ranks = {rank(0, air::ExitStatus::exited_with(3), 2048), rank(1, air::ExitStatus::killed_by(9), 1536),
             rank(2, air::ExitStatus{}, 0)};
  const auto metrics = air::mlflow::final_metrics(o, 3, true, 1000);
  std::vector<std::string> keys;
  for (const auto& m : metrics) {
    keys.push_back(m.key);
    CHECK(m.timestamp == 1000);
  }
  CHECK(keys == std::vector<std::string>{"exit_code", "duration_s", "rank_0/exit_code", "rank_0/peak_rss_mb",
                                         "rank_1/exit_code", "rank_1/peak_rss_mb"}); // rank 2 never started
  CHECK(metrics[1].value == 12.346);
  CHECK(metrics[3].value == 2.0);
  CHECK(metrics[4].value == 137.0); // 128 + SIGKILL
  // other nodes log only their ranks
  CHECK(air::mlflow::final_metrics(o, 3, false, 1).size() == 4);
  const auto tags = air::mlflow::final_tags(o, 3);
  CHECK(value_of(tags, "air.status") == "failed");
  CHECK(value_of(tags, "air.exit_code") == "3");
}

TEST_CASE("mlflow git: the commit of the working directory from the repository's files", "[mlflow]") {
  Scratch s;
  CHECK_FALSE(air::mlflow::git_commit(s.dir / "nowhere")); // no repository above /tmp/...

  s.write("repo/.git/HEAD", "ref: refs/heads/main\n");
  s.write("repo/.git/refs/heads/main", k_commit + "\n");
  fs::create_directories(s.dir / "repo/sub/dir");
  CHECK(air::mlflow::git_commit(s.dir / "repo/sub/dir") == k_commit);

  // packed ref
  const std::string other = "89abcdef0123456789abcdef0123456789abcdef";
  s.write("repo/.git/HEAD", "ref: refs/heads/packed\n");
  s.write("repo/.git/packed-refs", "# pack-refs with: peeled\n" + other + " refs/heads/packed\n");
  CHECK(air::mlflow::git_commit(s.dir / "repo") == other);

  // detached
  s.write("repo/.git/HEAD", k_commit + "\n");
  CHECK(air::mlflow::git_commit(s.dir / "repo") == k_commit);

  // a worktree: .git is a file; HEAD is its own, refs are the main repository's
  s.write("repo/.git/HEAD", "ref: refs/heads/main\n");
  s.write("repo/.git/worktrees/wt/HEAD", "ref: refs/heads/main\n");
  s.write("repo/.git/worktrees/wt/commondir", "../..\n");
  s.write("wt/.git", "gitdir: " + (s.dir / "repo/.git/worktrees/wt").string() + "\n");
  CHECK(air::mlflow::git_commit(s.dir / "wt") == k_commit);

  // unborn branch
  s.write("repo/.git/HEAD", "ref: refs/heads/new\n");
  CHECK_FALSE(air::mlflow::git_commit(s.dir / "repo"));
}

TEST_CASE("control: start carries node 0's MLflow run", "[mlflow][control]") {
  air::ControlMessage m;
  m.kind = air::ControlMessage::Kind::start;
  m.text = "run1";
  m.node_rank = 1;
  m.num_nodes = 2;
  m.master_port = 29500;
  m.mlflow_experiment_id = "3";
  m.mlflow_run_id = "fcf4cfd68e2b407fb77ddfcadf73f27b";
  const std::string line = air::format_control_message(m);
  CHECK(line == "start 1 2 29500 run1 3 fcf4cfd68e2b407fb77ddfcadf73f27b\n");
  auto back = air::parse_control_message(line.substr(0, line.size() - 1));
  REQUIRE(back.ok());
  CHECK(back->text == "run1");
  CHECK(back->mlflow_experiment_id == "3");
  CHECK(back->mlflow_run_id == m.mlflow_run_id);

  auto plain = air::parse_control_message("start 1 2 29500 run1");
  REQUIRE(plain.ok());
  CHECK(plain->mlflow_run_id.empty());
  CHECK_FALSE(air::parse_control_message("start 1 2 29500 run1 3").ok());
  CHECK_FALSE(air::parse_control_message("start 1 2 29500 run1 3 r extra").ok());
}
