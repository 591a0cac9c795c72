#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/spec/accelerator_type.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// One GPU as detection sees it. `index` is NVML's index, which is not CUDA's
/// order: ranks are bound by `uuid` (CUDA accepts GPU-... in CUDA_VISIBLE_DEVICES).
struct GpuInfo {
  int index = 0;
  std::string uuid;       ///< "GPU-8f6c..."
  std::string pci_bus_id; ///< "00000000:18:00.0"
  std::string name;       ///< "NVIDIA H200"
  std::string model;      ///< family, "H200"
  std::uint64_t memory_total_bytes = 0;
};

/// What the machine offers after CUDA_VISIBLE_DEVICES is applied.
struct Hardware {
  std::vector<GpuInfo> gpus;
  std::string source;                    ///< "nvml", "AIR_RUN_FAKE_GPUS", or "none"
  std::string reason;                    ///< why no GPU was found ("NVML not available: ..."), "" otherwise
  std::string cuda_visible_devices;      ///< the inherited value, "" when unset
  bool cuda_visible_devices_set = false; ///< tells "unset" from "set to empty" (no GPUs)
  std::vector<std::string> notes;        ///< remarks: CUDA_VISIBLE_DEVICES applied, a device skipped
};

/// Detects GPUs: `AIR_RUN_FAKE_GPUS` (tests only) when set, else NVML loaded
/// with dlopen at run time. A missing library or driver yields no GPUs and a
/// reason, never an error. Applies an inherited CUDA_VISIBLE_DEVICES (indices or UUIDs).
/// GPUs come in PCI bus order, or in CUDA_VISIBLE_DEVICES order when it is set.
Hardware detect_hardware(const Environment& env);

/// Parses AIR_RUN_FAKE_GPUS: `;`-separated names with an optional count prefix,
/// e.g. "8xNVIDIA H100 80GB HBM3" or "NVIDIA A10;NVIDIA A10". Fake UUIDs and
/// bus ids are deterministic.
Expected<std::vector<GpuInfo>> parse_fake_gpus(std::string_view text);

/// Applies a CUDA_VISIBLE_DEVICES value (indices, GPU- UUIDs or UUID prefixes,
/// as CUDA does) to the detected list, in the value's order. An invalid entry
/// ends the list as it does for CUDA; the note says so.
std::vector<GpuInfo> apply_visible_devices(const std::vector<GpuInfo>& gpus, std::string_view value,
                                           std::string* note);

/// Maps a marketing name to its family: "NVIDIA H100 80GB HBM3" -> "H100",
/// "NVIDIA A10" -> "A10", "NVIDIA B300 SXM6 AC" -> "B300". Unknown names give a
/// sanitised upper-case token.
std::string model_family(std::string_view gpu_name);

/// The canonical type of what was detected: "GPU_2xH200", or "CPU" without GPUs.
/// Mixed models give the most common family.
std::string detected_accelerator_type(const Hardware& hw);

/// The ranks and GPUs a run will use.
struct Selection {
  bool cpu = false;
  int ranks = 0;
  std::vector<GpuInfo> gpus; ///< the first `ranks` GPUs in CUDA-visible order
  /// Fewer GPUs than ranks, allowed (torchrun's --nproc-per-node): local rank
  /// i uses gpus[i % gpus.size()], as torchrun's cuda:LOCAL_RANK convention does modulo.
  bool shared_gpus = false;
  std::string accelerator_type;     ///< canonical type of what is used, "GPU_2xH200" or "CPU"
  std::vector<std::string> notices; ///< one-line notices (e.g. "no GPU found, running on CPU")
};

/// Checks a requested type and count against the hardware. Errors (hardware
/// kind, exit 2) name both sides: "requested GPU_8xH100, found GPU_2xH200".
/// Falling back to CPU adds a "no GPU found" notice, unless the user asked for
/// CPU ranks (`cpu_ranks_given`: cpu_ranks was set, not the default).
Expected<Selection> select_accelerators(std::optional<std::string> requested_type,
                                        std::optional<int> requested_count, int cpu_ranks, const Hardware& hw,
                                        bool cpu_ranks_given = false);

/// One GPU as a JSON object (index, uuid, pci_bus_id, name, model,
/// memory_total_bytes): the shape `--list-gpus --json` and the summary share.
nlohmann::ordered_json gpu_info_json(const GpuInfo& gpu);

/// Human and JSON renderings for `air-run --list-gpus [--json]`.
std::string describe_hardware(const Hardware& hw);
std::string hardware_json(const Hardware& hw);

} // namespace air
