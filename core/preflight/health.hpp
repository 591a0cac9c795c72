#pragma once

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

/// One NVML value, or why there is none: "not supported" (the GPU or driver
/// lacks the query; never a failure) or the NVML error text.
template <typename T> struct Probe {
  std::optional<T> value;
  std::string why; ///< set when `value` is empty
};

/// nvmlDeviceGetRemappedRows: HBM rows replaced by spare rows (Ampere and later).
struct RemappedRows {
  unsigned int correctable = 0;   ///< rows remapped after correctable errors
  unsigned int uncorrectable = 0; ///< rows remapped after uncorrectable errors
  bool pending = false;           ///< a remap waits for the next GPU reset
  bool failure = false;           ///< a remap failed: no spare row was left
};

/// Retired pages (page retirement, the pre-Ampere mechanism; Ampere and later
/// report "not supported" and use row remapping instead).
struct RetiredPages {
  unsigned int single_bit = 0; ///< retired after multiple single-bit errors
  unsigned int double_bit = 0; ///< retired after a double-bit error
  bool pending = false;        ///< a retirement waits for the next GPU reset
};

/// Temperature of the GPU die and the driver's thresholds, in degrees C.
struct Temperature {
  unsigned int current_c = 0;
  std::optional<unsigned int> slowdown_c; ///< the HW slows clocks at this temperature
  std::optional<unsigned int> shutdown_c; ///< the HW shuts down at this temperature
};

/// Compute processes on the GPU other than air-run itself.
struct OtherProcesses {
  unsigned int count = 0;
  std::uint64_t used_bytes = 0;   ///< sum over the processes whose usage NVML reports
  unsigned int unknown_usage = 0; ///< processes whose usage NVML does not report (containers)
};

/// Device memory as nvmlDeviceGetMemoryInfo reports it (bytes).
struct MemoryUsage {
  std::uint64_t total = 0;
  std::uint64_t used = 0;
};

/// Everything the preflight reads from NVML for one GPU. Each reading may be
/// missing; `lost` is set when NVML says the GPU fell off the bus.
struct GpuHealthReading {
  std::string uuid;
  std::string name;
  bool lost = false;
  std::string lost_why;
  Probe<std::uint64_t> ecc_uncorrected_volatile;  ///< since the driver loaded
  Probe<std::uint64_t> ecc_uncorrected_aggregate; ///< over the GPU's lifetime
  Probe<std::uint64_t> ecc_corrected_volatile;    ///< since the driver loaded
  Probe<RetiredPages> retired_pages;
  Probe<RemappedRows> remapped_rows;
  Probe<Temperature> temperature;
  Probe<std::uint64_t> clocks_event_reasons; ///< nvmlClocksEventReason* bitmask
  Probe<OtherProcesses> other_processes;
  Probe<MemoryUsage> memory;
};

/// nvmlClocksEventReason* bits (nvml.h; the older names say ThrottleReason).
namespace clocks_event {
inline constexpr std::uint64_t kGpuIdle = 0x1;
inline constexpr std::uint64_t kApplicationsClocksSetting = 0x2;
inline constexpr std::uint64_t kSwPowerCap = 0x4;
inline constexpr std::uint64_t kHwSlowdown = 0x8;
inline constexpr std::uint64_t kSyncBoost = 0x10;
inline constexpr std::uint64_t kSwThermalSlowdown = 0x20;
inline constexpr std::uint64_t kHwThermalSlowdown = 0x40;
inline constexpr std::uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr std::uint64_t kDisplayClockSetting = 0x100;
} // namespace clocks_event

/// The names of the set bits, in bit order: "idle", "sw_power_cap",
/// "hw_slowdown", ...; an unknown bit reads as its hex value ("0x200").
std::vector<std::string> clocks_event_names(std::uint64_t reasons);

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
