#pragma once

#include "core/hw/clock_reading.hpp"
#include "core/hw/health_reading.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// The verdict of one check. `skip` means it could not be measured (not
/// supported by this GPU or driver, not built); it never fails the preflight.
enum class CheckStatus { pass, warn, fail, skip };

/// "pass", "warn", "fail", "skip" (also the JSON spelling).
std::string_view check_status_name(CheckStatus status);

/// The worse of two verdicts: fail > warn > pass > skip.
CheckStatus worse(CheckStatus a, CheckStatus b);

/// One evaluated check: a stable name ("ecc", "temperature", ...), its verdict
/// and one line saying what was seen, e.g. "41 C (slowdown at 87 C)".
struct CheckResult {
  std::string name;
  CheckStatus status = CheckStatus::skip;
  std::string detail;
};

/// The overall verdict of a list of checks: the worst one (skip when empty).
CheckStatus overall_status(const std::vector<CheckResult>& checks);

/// The limits the evaluation applies; docs/preflight.md explains each.
struct HealthThresholds {
  unsigned int temperature_margin_c = 5;               ///< warn this close to the slowdown threshold
  unsigned int retired_pages_warn = 15;                ///< DCGM's soft limit
  unsigned int retired_pages_fail = 60;                ///< DCGM's hard limit
  std::uint64_t other_process_bytes_warn = 1ULL << 30; ///< 1 GiB: more than a bare CUDA context
};

/// Evaluates one GPU's readings into checks, always in the same order:
/// "gpu" (only when the GPU is lost), "ecc", "retired_pages", "row_remap",
/// "temperature", "clocks", "other_processes". Pure: no NVML, no OS.
std::vector<CheckResult> evaluate_gpu_health(const GpuHealthReading& reading,
                                             const HealthThresholds& thresholds = {});

/// "1.5 GiB", "312 MiB", "4 KiB", "17 B": binary units, one decimal above MiB.
std::string format_bytes(std::uint64_t bytes);

} // namespace air
