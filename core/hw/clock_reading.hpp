#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// The names of the set nvmlClocksEventReason bits, in bit order: "idle",
/// "sw_power_cap", "hw_slowdown", ...; an unknown bit reads as its hex value
/// ("0x200"). Pure.
std::vector<std::string> clocks_event_names(std::uint64_t reasons);

/// What may explain a slow GPU, read when a rank on it is named a
/// straggler: its SM clock against the most it can run at, why the driver
/// holds the clocks down, its temperature and its power draw against the
/// enforced limit. Each value may be missing (a query the GPU or driver does
/// not answer).
struct GpuClockReading {
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> sm_clock_max_mhz;
  std::optional<std::uint64_t> clocks_event_reasons;
  std::optional<unsigned> temperature_c;
  std::optional<unsigned> power_mw;
  std::optional<unsigned> power_limit_mw;
};

/// "GPU-1234: SM 1410 of 1980 MHz, held down by sw_power_cap, 83 C, 698 of
/// 700 W"; the reasons that only describe a normal state (idle, application
/// clocks, sync boost, display clocks) are left out. "" when nothing was
/// read. Pure.
std::string describe_gpu_clocks(const std::string& uuid, const GpuClockReading& reading);

} // namespace air
