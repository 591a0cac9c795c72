// Preflight health evaluation: NVML readings in, pass/warn/fail out. Pure, so
// every threshold is unit-tested with fake readings. docs/preflight.md is the
// user-facing version of the reasoning in the comments below.
#include "core/preflight/health.hpp"

#include "core/base/text.hpp"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace air {

namespace {

int severity(CheckStatus status) {
  switch (status) {
  case CheckStatus::skip:
    return 0;
  case CheckStatus::pass:
    return 1;
  case CheckStatus::warn:
    return 2;
  case CheckStatus::fail:
    return 3;
  }
  return 0;
}

CheckResult make(std::string name, CheckStatus status, std::string detail) {
  return {std::move(name), status, std::move(detail)};
}

template <typename T> CheckResult skipped(std::string name, const Probe<T>& probe) {
  return make(std::move(name), CheckStatus::skip, probe.why.empty() ? "not supported" : probe.why);
}

// ECC. An uncorrected error since the driver loaded means data on this GPU may
// already be wrong, and on Ampere and later it also leaves a row remap pending
// until reset: fail. The lifetime (aggregate) count survives repairs, so a GPU
// whose bad rows were remapped long ago still shows it: warn, so the history is
// visible without condemning a repaired GPU. Corrected errors are what ECC is
// for; they are reported, never judged (retirement/remap counts judge them).
CheckResult evaluate_ecc(const GpuHealthReading& r) {
  if (!r.ecc_uncorrected_volatile.value) return skipped("ecc", r.ecc_uncorrected_volatile);
  const std::uint64_t volatile_unc = *r.ecc_uncorrected_volatile.value;
  std::string detail = fmt::format("uncorrected {} since driver load", volatile_unc);
  if (r.ecc_uncorrected_aggregate.value) {
    detail += fmt::format(", {} lifetime", *r.ecc_uncorrected_aggregate.value);
  }
  if (r.ecc_corrected_volatile.value)
    detail += fmt::format("; corrected {}", *r.ecc_corrected_volatile.value);
  if (volatile_unc > 0) return make("ecc", CheckStatus::fail, detail);
  if (r.ecc_uncorrected_aggregate.value && *r.ecc_uncorrected_aggregate.value > 0) {
    return make("ecc", CheckStatus::warn, detail);
  }
  return make("ecc", CheckStatus::pass, detail);
}

// Page retirement (pre-Ampere). A pending retirement takes effect only at the
// next GPU reset; until then the bad page is still in use: fail. The totals
// follow DCGM's limits (dcgm gpu hardware limits: soft 15, hard 60 pages,
// "bug 1665722"): past 60 the GPU is due for replacement.
CheckResult evaluate_retired_pages(const GpuHealthReading& r, const HealthThresholds& t) {
  if (!r.retired_pages.value) return skipped("retired_pages", r.retired_pages);
  const RetiredPages& p = *r.retired_pages.value;
  const unsigned int total = p.single_bit + p.double_bit;
  std::string detail =
      fmt::format("{} retired ({} single-bit, {} double-bit)", total, p.single_bit, p.double_bit);
  if (p.pending)
    return make("retired_pages", CheckStatus::fail, detail + ", retirement pending: reset the GPU");
  if (total >= t.retired_pages_fail) {
    return make("retired_pages", CheckStatus::fail,
                fmt::format("{} (limit {})", detail, t.retired_pages_fail));
  }
  if (total >= t.retired_pages_warn) {
    return make("retired_pages", CheckStatus::warn,
                fmt::format("{} (warn at {})", detail, t.retired_pages_warn));
  }
  return make("retired_pages", CheckStatus::pass, detail);
}

// Row remapping (Ampere and later), judged as DCGM does: a failed remap means
// no spare row was left for a bad one (the GPU needs service), a pending remap
// takes effect only after a GPU reset (until then the bad row is in use). Both
// fail. Remapped rows themselves are repairs that worked: reported only.
CheckResult evaluate_row_remap(const GpuHealthReading& r) {
  if (!r.remapped_rows.value) return skipped("row_remap", r.remapped_rows);
  const RemappedRows& rows = *r.remapped_rows.value;
  std::string detail =
      fmt::format("{} rows remapped ({} correctable, {} uncorrectable)",
                  rows.correctable + rows.uncorrectable, rows.correctable, rows.uncorrectable);
  if (rows.failure)
    return make("row_remap", CheckStatus::fail, detail + ", remap failed: the GPU needs service");
  if (rows.pending) return make("row_remap", CheckStatus::fail, detail + ", remap pending: reset the GPU");
  return make("row_remap", CheckStatus::pass, detail);
}

// Temperature. At the slowdown threshold the hardware halves clocks; the check
// runs on idle GPUs, so one already within a few degrees of it will throttle as
// soon as a job heats it (5 C is about what a GPU gains in its first minute of
// load): warn. At or past the threshold: fail (the clocks check sees the
// throttle too, but the temperature says why).
CheckResult evaluate_temperature(const GpuHealthReading& r, const HealthThresholds& t) {
  if (!r.temperature.value) return skipped("temperature", r.temperature);
  const Temperature& temp = *r.temperature.value;
  if (!temp.slowdown_c) {
    return make("temperature", CheckStatus::pass,
                fmt::format("{} C (no slowdown threshold reported)", temp.current_c));
  }
  const unsigned int slowdown = *temp.slowdown_c;
  const std::string detail = fmt::format("{} C (slowdown at {} C)", temp.current_c, slowdown);
  if (temp.current_c >= slowdown) return make("temperature", CheckStatus::fail, detail);
  if (temp.current_c + t.temperature_margin_c >= slowdown) {
    return make("temperature", CheckStatus::warn,
                fmt::format("{}, within {} C", detail, t.temperature_margin_c));
  }
  return make("temperature", CheckStatus::pass, detail);
}

// Clock event reasons. The hardware ones (HW slowdown, HW thermal, power brake)
// mean the board is protecting itself (overheating, a power supply or external
// brake signal): the GPU runs at a fraction of its clocks, fail. SW thermal
// slowdown on a GPU that is idle at check time means its cooling cannot keep
// an idle GPU under its target: fail too. The SW power cap is the driver
// keeping the board under its power limit; on an idle GPU that hints at a low
// limit set by an administrator: warn. Idle, application clocks, sync boost
// and display clocks are normal states: reported only.
CheckResult evaluate_clocks(const GpuHealthReading& r) {
  if (!r.clocks_event_reasons.value) return skipped("clocks", r.clocks_event_reasons);
  namespace ce = clocks_event;
  const std::uint64_t reasons = *r.clocks_event_reasons.value;
  const std::vector<std::string> names = clocks_event_names(reasons);
  const std::string detail = names.empty() ? std::string("no clock event reason") : join(names, ", ");
  constexpr std::uint64_t kFailing =
      ce::kHwSlowdown | ce::kHwThermalSlowdown | ce::kHwPowerBrakeSlowdown | ce::kSwThermalSlowdown;
  if ((reasons & kFailing) != 0) return make("clocks", CheckStatus::fail, detail);
  if ((reasons & ce::kSwPowerCap) != 0) return make("clocks", CheckStatus::warn, detail);
  return make("clocks", CheckStatus::pass, detail);
}

// Other processes. A bare CUDA context costs roughly 0.3-0.6 GiB, so up to
// 1 GiB is someone holding a context (a monitor, an idle notebook kernel); more
// is someone's data, and a job sized for the whole GPU may run out of memory or
// share its compute: warn. Processes whose usage NVML hides (containers) are
// counted as someone else being on the GPU: warn.
CheckResult evaluate_other_processes(const GpuHealthReading& r, const HealthThresholds& t) {
  std::string memory;
  if (r.memory.value) {
    memory = fmt::format("; memory used {} of {}", format_bytes(r.memory.value->used),
                         format_bytes(r.memory.value->total));
  }
  if (!r.other_processes.value) {
    CheckResult result = skipped("other_processes", r.other_processes);
    result.detail += memory;
    return result;
  }
  const OtherProcesses& p = *r.other_processes.value;
  if (p.count == 0) return make("other_processes", CheckStatus::pass, "none" + memory);
  std::string detail =
      fmt::format("{} process{} using {}", p.count, p.count == 1 ? "" : "es", format_bytes(p.used_bytes));
  if (p.unknown_usage > 0) detail += fmt::format(" ({} not reported)", p.unknown_usage);
  detail += memory;
  if (p.used_bytes > t.other_process_bytes_warn || p.unknown_usage > 0) {
    return make("other_processes", CheckStatus::warn, detail);
  }
  return make("other_processes", CheckStatus::pass, detail);
}

} // namespace

std::string_view check_status_name(CheckStatus status) {
  switch (status) {
  case CheckStatus::pass:
    return "pass";
  case CheckStatus::warn:
    return "warn";
  case CheckStatus::fail:
    return "fail";
  case CheckStatus::skip:
    return "skip";
  }
  return "skip";
}

CheckStatus worse(CheckStatus a, CheckStatus b) { return severity(a) >= severity(b) ? a : b; }

CheckStatus overall_status(const std::vector<CheckResult>& checks) {
  CheckStatus status = CheckStatus::skip;
  for (const auto& check : checks) status = worse(status, check.status);
  return status;
}

std::vector<CheckResult> evaluate_gpu_health(const GpuHealthReading& reading,
                                             const HealthThresholds& thresholds) {
  std::vector<CheckResult> checks;
  // A lost GPU answers no query; it fails on its own line so the cause is not
  // buried under a column of skipped checks.
  if (reading.lost) checks.push_back(make("gpu", CheckStatus::fail, "GPU is lost: " + reading.lost_why));
  checks.push_back(evaluate_ecc(reading));
  checks.push_back(evaluate_retired_pages(reading, thresholds));
  checks.push_back(evaluate_row_remap(reading));
  checks.push_back(evaluate_temperature(reading, thresholds));
  checks.push_back(evaluate_clocks(reading));
  checks.push_back(evaluate_other_processes(reading, thresholds));
  return checks;
}

std::string format_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t kKiB = 1024;
  constexpr std::uint64_t kMiB = kKiB * 1024;
  constexpr std::uint64_t kGiB = kMiB * 1024;
  if (bytes >= kGiB) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  if (bytes >= kMiB) return fmt::format("{} MiB", bytes / kMiB);
  if (bytes >= kKiB) return fmt::format("{} KiB", bytes / kKiB);
  return fmt::format("{} B", bytes);
}

} // namespace air
