#pragma once

#include "core/hw/hardware.hpp"
#include "core/preflight/health.hpp"
#include "core/preflight/nccl_check.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

// The preflight's report (`air-run --check`): its parts, its JSON and its
// text table. Pure renderers; cli/cmd_check.cpp gathers the parts.

namespace air {

/// One GPU's part of the preflight report: what NVML read and the verdicts.
struct GpuCheck {
  GpuInfo gpu;
  std::optional<GpuHealthReading> reading;
  std::vector<CheckResult> checks;
};

/// The all-reduce part of the preflight report.
struct NcclPart {
  CheckResult check{"nccl_allreduce", CheckStatus::skip, ""};
  std::optional<NcclCheckReport> report;
  std::optional<BandwidthThreshold> threshold;
  std::string binary;
  std::string stderr_tail;
};

/// The environment part of the preflight report, with or without GPUs (in the
/// spirit of `accelerate env`): which Python the ranks run, whether torch
/// imports there and which distributed backends it has, the GPUs found and
/// the settings in force. On a node without GPUs it is the whole report.
struct EnvironmentPart {
  std::string python; ///< "/usr/bin/python3, Python 3.11.2" (describe_interpreter)
  /// pass: torch's version; fail: why it does not import.
  CheckResult torch{"torch", CheckStatus::fail, "not asked"};
  std::vector<std::string> backends; ///< the distributed backends torch has: "gloo", "nccl", "mpi"
  std::string gpus;                  ///< "2 (NVIDIA H100)" or "none (no NVIDIA driver)"
  std::vector<std::string> settings; ///< describe_spec's lines whose origin is not the default
};

/// argv that makes `python` print one JSON line about torch: {"version",
/// "backends"} when it imports, {"error"} when it does not.
std::vector<std::string> torch_probe_argv(const std::string& python);

/// Reads the torch probe's output (its stdout) into `part.torch` and
/// `part.backends`; output that is no such line fails the torch check with
/// `fallback` (the probe's stderr tail or how it ended) as the reason.
void read_torch_probe(const std::string& output, const std::string& fallback, EnvironmentPart& part);

/// The settings of describe_spec's `lines` that differ from the defaults.
std::vector<std::string> settings_in_force(const std::vector<std::string>& lines);

/// The environment part as JSON: python, torch, backends, gpus, settings.
nlohmann::json environment_json(const EnvironmentPart& env);

/// The environment part as the text report's first block.
std::string environment_text(const EnvironmentPart& env);

/// The last `lines` lines of `text`, without trailing newlines.
std::string tail_lines(const std::string& text, int lines);

/// The `--check --json` document: status, exit code, duration, per-GPU checks
/// and readings, and the all-reduce part.
nlohmann::json check_report_json(const Selection& selection, const std::vector<GpuCheck>& gpus,
                                 const NcclPart& nccl, CheckStatus status, int exit_code, double duration_s);

/// The human table: each GPU's checks, the all-reduce sweep, the verdict line.
std::string check_report_text(const Selection& selection, const std::vector<GpuCheck>& gpus,
                              const NcclPart& nccl, CheckStatus status, double duration_s, int failed,
                              int warned, int skipped);

} // namespace air
