#pragma once

#include "core/base/error.hpp"
#include "core/hw/hardware.hpp"
#include "core/preflight/health.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// One message size of air-nccl-check's all-reduce sweep.
struct BandwidthSample {
  std::uint64_t bytes = 0;
  int iterations = 0;
  double time_us = 0;    ///< mean time of one all-reduce
  double algbw_gbps = 0; ///< bytes / time, GB/s (1e9)
  double busbw_gbps = 0; ///< algbw * 2(n-1)/n, as nccl-tests reports it
  bool correct = false;  ///< the sampled sums matched
};

/// What air-nccl-check printed (its JSON, schema version 1).
struct NcclCheckReport {
  bool ok = false; ///< false: `error` says what failed (CUDA, NCCL, a wrong sum)
  std::string error;
  std::string nccl_version; ///< "2.28.3"
  int devices = 0;
  std::vector<std::string> device_names;
  double init_s = 0;                    ///< CUDA contexts + ncclCommInitAll
  double total_s = 0;                   ///< the whole tool, from start to JSON
  std::vector<BandwidthSample> samples; ///< in increasing size
};

/// Parses air-nccl-check's stdout. Errors (usage kind) say what is wrong:
/// "air-nccl-check output is not JSON: ...", "... has no 'results' list", ...
Expected<NcclCheckReport> parse_nccl_check_json(std::string_view text);

/// The minimum bus bandwidth (GB/s) at the largest size, and why it was chosen.
struct BandwidthThreshold {
  double min_busbw_gbps = 0;
  std::string why; ///< "NVLink-class GPUs (H200)", "--min-busbw", ...
};

/// The default threshold for `gpus`: 100 GB/s when every GPU is an
/// NVLink-class part (A100/A800, H100/H800, H200, GH200, B200, GB200, B300,
/// GB300; not their PCIe cards), else 5 GB/s. docs/preflight.md explains both.
BandwidthThreshold default_bandwidth_threshold(const std::vector<GpuInfo>& gpus);

/// Judges a report: fail when the tool failed, a sum was wrong, or the bus
/// bandwidth at the largest size is below the threshold; pass otherwise.
/// The check is named "nccl_allreduce".
CheckResult evaluate_bandwidth(const NcclCheckReport& report, const BandwidthThreshold& threshold);

} // namespace air
