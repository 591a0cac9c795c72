#pragma once
// Shared by the results/summary/report/junit/annotations tests: a
// hand-built four-rank run that failed (and TempDir, from temp_dir.hpp).

#include "core/report/collect.hpp"
#include "tests/unit/temp_dir.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace air::test {

// stdio rather than istreambuf_iterator, which trips g++ 12's -Wnull-dereference at -O2.
inline std::string read_all(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  std::fclose(f);
  return out;
}

inline RankOutcome make_rank(int rank, pid_t pid, ExitStatus status, double duration_s) {
  RankOutcome r;
  r.rank = rank;
  r.local_rank = rank;
  r.pid = pid;
  r.status = status;
  r.duration_s = duration_s;
  return r;
}

/// The inputs of a hand-built run on two fake H100s with four ranks:
/// rank 0 stopped by air-run (SIGTERM) after writing a result, rank 1 the
/// root cause (exit 3, error file), rank 2 a segfault with only output, rank 3
/// exited 0 before the failure.
struct SampleRun {
  LaunchSpec spec;
  Hardware hardware;
  Selection selection;
  LaunchPlan plan;
  RunOutcome outcome;

  SampleRun() {
    spec.spec_path = "job.yaml";
    spec.timeout.value = Millis(90 * 60 * 1000);
    spec.timeout.origin = {Origin::Kind::file, "job.yaml:3:10"};
    spec.command.value = {"train.py", "--lr", "1e-3"};
    spec.command.origin = {Origin::Kind::flag, "TARGET"};
    spec.num_accelerators.value = 4;
    spec.num_accelerators.origin = {Origin::Kind::env, "AIR_RUN_NUM_ACCELERATORS"};
    spec.env.value = {{"HF_TOKEN", "hunter2"}, {"NCCL_DEBUG", "INFO"}};
    spec.env.origin = {Origin::Kind::file, "job.yaml:5:1"};

    GpuInfo g0{0, "GPU-aaaa", "00000000:18:00.0", "NVIDIA H100 80GB HBM3", "H100", 85899345920ULL};
    GpuInfo g1{1, "GPU-bbbb", "00000000:2A:00.0", "NVIDIA H100 80GB HBM3", "H100", 85899345920ULL};
    hardware.gpus = {g0, g1};
    hardware.source = "AIR_RUN_FAKE_GPUS";
    selection.ranks = 4;
    selection.gpus = {g0, g1};
    selection.accelerator_type = "GPU_2xH100";

    plan.run_id = "r1";
    plan.run_dir = "/tmp/air-run-r1";
    plan.world_size = 4;
    plan.ranks_per_node = 4;
    plan.master_addr = "127.0.0.1";
    plan.master_port = 29500;
    plan.timeout = Millis(90 * 60 * 1000);
    plan.tail_lines = 50;
    for (int i = 0; i < 4; ++i) {
      RankPlan rp;
      rp.rank = i;
      rp.local_rank = i;
      rp.gpu_uuid = i % 2 == 0 ? "GPU-aaaa" : "GPU-bbbb";
      rp.log_file = i == 1 ? "/logs/rank1.log" : "";
      plan.ranks.push_back(rp);
    }

    outcome.status = RunOutcome::Status::failed;
    outcome.root_cause_rank = 1;
    outcome.reason = "rank 1 exited with exit code 3";
    outcome.started_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1775556804123LL));
    outcome.ended_at = outcome.started_at + std::chrono::milliseconds(12410);
    outcome.duration_s = 12.41;

    RankOutcome r0 = make_rank(0, 4242, ExitStatus::killed_by(15), 12.3);
    r0.stopped_by_air_run = true;
    r0.user_s = 10.1;
    r0.sys_s = 0.4;
    r0.max_rss_kb = 812344;
    r0.end_order = 4;
    r0.tail = {"epoch 1 loss 0.5"};
    RankOutcome r1 = make_rank(1, 4243, ExitStatus::exited_with(3), 1.25);
    r1.end_order = 2;
    r1.tail = {"Traceback (most recent call last):", "RuntimeError: boom"};
    ExitStatus segv = ExitStatus::killed_by(11);
    segv.core_dumped = true;
    RankOutcome r2 = make_rank(2, 4244, segv, 1.5);
    r2.end_order = 3;
    r2.tail = {"step 7", "Fatal Python error: Segmentation fault"};
    RankOutcome r3 = make_rank(3, 4245, ExitStatus::exited_with(0), 0.75);
    r3.end_order = 1;
    outcome.ranks = {r0, r1, r2, r3};
  }
};

/// torch's @record error file for "RuntimeError: boom".
inline const char* const k_record_error_file =
    R"({"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": )"
    R"("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nRuntimeError: boom\n", )"
    R"("timestamp": "1712484803"}}})";

/// The report of SampleRun with its results and errors filled in by hand
/// (as collect_report would from files).
inline RunReport sample_report(const SampleRun& run) {
  RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "node-3", 3, {}, {}};
  report.results.resize(4);
  report.results[0].state = RankResult::State::ok;
  report.results[0].value = nlohmann::ordered_json::parse(R"({"loss": 0.5, "acc": 0.9})");
  report.results[2].state = RankResult::State::invalid;
  report.results[2].error = "parse error";
  report.results[2].excerpt = "{oops";
  report.results[3].state = RankResult::State::ok;
  report.results[3].value = 42;
  report.errors.resize(4);
  ErrorFileRecord rec;
  rec.type = "RuntimeError";
  rec.message = "boom";
  rec.traceback =
      "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nRuntimeError: boom\n";
  rec.timestamp = 1712484803;
  report.errors[1] = rank_error(run.outcome.ranks[1], rec);
  report.errors[2] = rank_error(run.outcome.ranks[2], std::nullopt);
  return report;
}

/// A launch refused before any rank started: a spec file with a misspelt key,
/// so only the job's name and the flags' report paths are known.
struct RefusedRun {
  LaunchSpec spec;
  Hardware hardware;
  Selection selection;
  LaunchPlan plan;
  RunOutcome outcome;
  Error error{ErrorKind::usage, "ci/job.yaml:2:1: unknown key 'tiemout' (did you mean 'timeout'?)"};

  RefusedRun() {
    spec.spec_path = "ci/job.yaml";
    plan.run_id = "r9";
    outcome.status = RunOutcome::Status::launch_failed;
    outcome.reason = error.message;
  }
};

/// The report air-run renders for a RefusedRun.
inline RunReport refused_report(const RefusedRun& run) {
  RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "node-3", 2, {}, {}};
  report.refusal = &run.error;
  report.spec_resolved = false;
  report.hardware_probed = false;
  return report;
}

} // namespace air::test
