#pragma once

#include "core/error.hpp"
#include "core/hardware.hpp"

#include <string>
#include <vector>

namespace air {

/// The part of the NVML C API that air-run calls, declared here instead of
/// including nvml.h: the build must not need the CUDA toolkit or a driver, and
/// the library is only ever loaded with dlopen. Types and values follow nvml.h.
namespace nvml {

using Return = int;                                 ///< nvmlReturn_t, a C enum (int-sized on every Linux ABI)
inline constexpr Return kSuccess = 0;               ///< NVML_SUCCESS
inline constexpr Return kErrorInsufficientSize = 7; ///< NVML_ERROR_INSUFFICIENT_SIZE
inline constexpr Return kErrorDriverNotLoaded = 9;  ///< NVML_ERROR_DRIVER_NOT_LOADED

struct DeviceSt;          ///< struct nvmlDevice_st, opaque
using Device = DeviceSt*; ///< nvmlDevice_t

/// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v2 and _v3.
struct PciInfo {
  char bus_id_legacy[16]; ///< busIdLegacy, "0000:18:00.0" (4-digit domain)
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;    ///< pciDeviceId
  unsigned int pci_subsystem_id; ///< pciSubSystemId
  char bus_id[32];               ///< busId, "00000000:18:00.0" (8-digit domain): what air-run
                                 ///< reports
};

static_assert(sizeof(PciInfo) == 68, "nvmlPciInfo_t is 16 + 5 * 4 + 32 bytes");

/// nvmlMemory_t (the v1 struct, filled by nvmlDeviceGetMemoryInfo): bytes.
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

static_assert(sizeof(Memory) == 24, "nvmlMemory_t is three unsigned long long");

inline constexpr unsigned int kNameBufferSize = 96; ///< NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned int kUuidBufferSize = 96; ///< NVML_DEVICE_UUID_V2_BUFFER_SIZE

/// The resolved entry points. Every pointer is non-null once a library is open.
struct Api {
  Return (*init_v2)() = nullptr;                          ///< nvmlInit_v2
  Return (*shutdown)() = nullptr;                         ///< nvmlShutdown
  Return (*device_get_count_v2)(unsigned int*) = nullptr; ///< nvmlDeviceGetCount_v2
  Return (*device_get_handle_by_index_v2)(unsigned int,
                                          Device*) = nullptr; ///< ..._v2
  Return (*device_get_name)(Device, char*,
                            unsigned int) = nullptr; ///< nvmlDeviceGetName
  Return (*device_get_uuid)(Device, char*,
                            unsigned int) = nullptr;           ///< nvmlDeviceGetUUID
  Return (*device_get_pci_info)(Device, PciInfo*) = nullptr;   ///< nvmlDeviceGetPciInfo_v3, else _v2
  Return (*device_get_memory_info)(Device, Memory*) = nullptr; ///< nvmlDeviceGetMemoryInfo
  const char* (*error_string)(Return) = nullptr;               ///< nvmlErrorString
};

} // namespace nvml

/// NVML, loaded with dlopen, its symbols resolved and nvmlInit_v2 done; the
/// destructor calls nvmlShutdown and dlclose. Move-only. Detection uses it for
/// one scan; a later preflight health check can open its own (NVML counts
/// init/shutdown pairs and dlopen counts references, so two may coexist) and
/// look up further symbols with `symbol`.
class NvmlLibrary {
public:
  static constexpr const char* kDefaultPath = "libnvidia-ml.so.1";

  /// Opens `path` (a soname searched the usual dlopen way, or a file path).
  /// Errors (kind system) read as detection reasons: "NVML not available:
  /// <dlerror>" when the library or one of its symbols is missing, "NVML init
  /// failed: <nvmlErrorString>" when no usable driver answers.
  static Expected<NvmlLibrary> open(const char* path = kDefaultPath);

  NvmlLibrary(NvmlLibrary&& other) noexcept;
  NvmlLibrary& operator=(NvmlLibrary&& other) noexcept;
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  ~NvmlLibrary();

  /// The resolved entry points (all non-null).
  const nvml::Api& api() const { return api_; }

  /// Looks up another NVML symbol by name; nullptr when this driver lacks it.
  void* symbol(const char* name) const;

  /// nvmlErrorString for `code`, with the number when NVML has no text.
  std::string error_string(nvml::Return code) const;

  /// nvmlDeviceGetCount_v2. Error text: "NVML device count failed: <reason>".
  Expected<unsigned int> device_count() const;

  /// Name, UUID, PCI bus id and memory of device `index` (NVML's index order).
  /// Only a missing handle or UUID is an error: without a UUID a rank cannot
  /// be bound. A failed memory query gives 0 bytes.
  Expected<GpuInfo> device_info(unsigned int index) const;

private:
  NvmlLibrary(void* handle, const nvml::Api& api) : handle_(handle), api_(api) {}
  void close() noexcept;

  void* handle_ = nullptr; ///< from dlopen; nullptr once moved from
  nvml::Api api_;
};

/// What one NVML scan found: devices in NVML index order, plus one note per
/// device that could not be read (and was skipped).
struct NvmlScan {
  std::vector<GpuInfo> gpus;
  std::vector<std::string> notes;
};

/// Opens NVML, reads every device, and closes it again before returning, so
/// no driver file descriptor is held while ranks are spawned. Errors are
/// `NvmlLibrary::open`'s or `device_count`'s.
Expected<NvmlScan> scan_nvml_gpus(const char* path = NvmlLibrary::kDefaultPath);

} // namespace air
