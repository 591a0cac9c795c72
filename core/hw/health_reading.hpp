#pragma once

#include <cstdint>
#include <optional>
#include <string>

// What NVML reads about one GPU's health: the hardware's vocabulary. The
// preflight (core/preflight/health.hpp) judges these readings; the reader
// lives with NVML (core/hw/nvml_health.cpp). Pure data.

namespace air {

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

/// One reading of a busy GPU for the console's live status area; each value
/// may be missing (a GPU or driver that does not answer the query).
struct GpuLiveReading {
  std::optional<unsigned> utilization_pct; ///< nvmlDeviceGetUtilizationRates: the GPU's busy percentage
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<unsigned> temperature_c;
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

} // namespace air
