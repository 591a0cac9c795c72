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
