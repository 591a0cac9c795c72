#include "core/hw/nvml.hpp"

#include <fmt/format.h>

#include <dlfcn.h>

#include <cstring>
#include <utility>

namespace air {

namespace {

std::string last_dl_error(const char* fallback) {
  const char* text = dlerror();
  return text != nullptr ? std::string(text) : std::string(fallback);
}

Error nvml_error(std::string message) { return {ErrorKind::system, std::move(message)}; }

/// Resolves `name` into `slot`. Casting dlsym's void* to a function pointer is
/// what POSIX requires to work (dlsym would be useless otherwise).
template <typename Fn> bool resolve(void* handle, const char* name, Fn& slot, std::string* error) {
  dlerror(); // clear a stale message so the one we read is about this lookup
  void* address = dlsym(handle, name);
  if (address == nullptr) {
    if (error != nullptr) *error = last_dl_error("undefined symbol");
    return false;
  }
  slot = reinterpret_cast<Fn>(address);
  return true;
}

std::string describe_return(const nvml::Api& api, nvml::Return code) {
  const char* text = api.error_string != nullptr ? api.error_string(code) : nullptr;
  if (text == nullptr || *text == '\0') return fmt::format("NVML error {}", code);
  return text;
}

} // namespace

std::string nvml::text(const char* buffer, std::size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

Expected<NvmlLibrary> NvmlLibrary::open(const char* path) {
  // RTLD_LOCAL: NVML's symbols stay out of the global namespace, so a rank's
  // own libraries can never bind to this copy by accident (ranks are separate
  // processes anyway; this matters for a later in-process preflight).
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nvml_error("NVML not available: " + last_dl_error(path));

  nvml::Api api;
  std::string missing;
  bool ok = resolve(handle, "nvmlInit_v2", api.init_v2, &missing) &&
            resolve(handle, "nvmlShutdown", api.shutdown, &missing) &&
            resolve(handle, "nvmlDeviceGetCount_v2", api.device_get_count_v2, &missing) &&
            resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api.device_get_handle_by_index_v2, &missing) &&
            resolve(handle, "nvmlDeviceGetName", api.device_get_name, &missing) &&
            resolve(handle, "nvmlDeviceGetUUID", api.device_get_uuid, &missing) &&
            resolve(handle, "nvmlDeviceGetMemoryInfo", api.device_get_memory_info, &missing) &&
            resolve(handle, "nvmlErrorString", api.error_string, &missing);
  // _v3 (drivers from about R450 on) fixes how _v2 fills the bus id on some
  // systems; both fill the same nvmlPciInfo_t, so _v2 is a safe fallback.
  if (ok && !resolve(handle, "nvmlDeviceGetPciInfo_v3", api.device_get_pci_info, nullptr)) {
    ok = resolve(handle, "nvmlDeviceGetPciInfo_v2", api.device_get_pci_info, &missing);
  }
  if (!ok) {
    dlclose(handle);
    return nvml_error("NVML not available: " + missing);
  }

  const nvml::Return rc = api.init_v2();
  if (rc != nvml::kSuccess) {
    // nvmlInit failed, so there is no nvmlShutdown to pair with it.
    std::string text = describe_return(api, rc);
    dlclose(handle);
    return nvml_error("NVML init failed: " + text);
  }
  return NvmlLibrary(handle, api);
}

NvmlLibrary::NvmlLibrary(NvmlLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), api_(other.api_) {}

NvmlLibrary& NvmlLibrary::operator=(NvmlLibrary&& other) noexcept {
  if (this != &other) {
    close();
    handle_ = std::exchange(other.handle_, nullptr);
    api_ = other.api_;
  }
  return *this;
}

NvmlLibrary::~NvmlLibrary() { close(); }

// We dlclose rather than keep the library mapped for the life of the process:
// nvmlShutdown first releases the driver's file descriptors (so they are not
// held while ranks are spawned), and after it NVML keeps no threads or
// callbacks that could run from unmapped code. go-nvml (NVIDIA's Go bindings)
// does the same Shutdown-then-dlclose. dlopen's reference count keeps the code
// mapped while another NvmlLibrary (say, a preflight check) still uses it.
void NvmlLibrary::close() noexcept {
  if (handle_ == nullptr) return;
  if (api_.shutdown != nullptr) api_.shutdown();
  dlclose(handle_);
  handle_ = nullptr;
}

void* NvmlLibrary::symbol(const char* name) const {
  if (handle_ == nullptr) return nullptr;
  return dlsym(handle_, name);
}

std::string NvmlLibrary::error_string(nvml::Return code) const { return describe_return(api_, code); }

Expected<unsigned int> NvmlLibrary::device_count() const {
  unsigned int count = 0;
  const nvml::Return rc = api_.device_get_count_v2(&count);
  if (rc != nvml::kSuccess) return nvml_error("NVML device count failed: " + error_string(rc));
  return count;
}

Expected<GpuInfo> NvmlLibrary::device_info(unsigned int index) const {
  nvml::Device device = nullptr;
  nvml::Return rc = api_.device_get_handle_by_index_v2(index, &device);
  // NO_PERMISSION here usually means a container or cgroup hides this device.
  if (rc != nvml::kSuccess) {
    return nvml_error(fmt::format("NVML device {} skipped: no handle: {}", index, error_string(rc)));
  }

  GpuInfo gpu;
  gpu.index = static_cast<int>(index);

  char uuid[nvml::kUuidBufferSize] = {};
  rc = api_.device_get_uuid(device, uuid, sizeof uuid);
  if (rc != nvml::kSuccess) {
    return nvml_error(fmt::format("NVML device {} skipped: no UUID: {}", index, error_string(rc)));
  }
  gpu.uuid = nvml::text(uuid, sizeof uuid);

  char name[nvml::kNameBufferSize] = {};
  rc = api_.device_get_name(device, name, sizeof name);
  gpu.name = rc == nvml::kSuccess ? nvml::text(name, sizeof name) : std::string("unknown");
  gpu.model = model_family(gpu.name);

  nvml::PciInfo pci;
  std::memset(&pci, 0, sizeof pci);
  if (api_.device_get_pci_info(device, &pci) == nvml::kSuccess) {
    gpu.pci_bus_id = nvml::text(pci.bus_id, sizeof pci.bus_id);
  }

  nvml::Memory memory{};
  if (api_.device_get_memory_info(device, &memory) == nvml::kSuccess) {
    gpu.memory_total_bytes = memory.total;
  }
  return gpu;
}

Expected<NvmlScan> scan_nvml_gpus(const char* path) {
  auto library = NvmlLibrary::open(path);
  if (!library) return library.error();
  auto count = library->device_count();
  if (!count) return count.error();
  NvmlScan scan;
  for (unsigned int i = 0; i < *count; ++i) {
    auto gpu = library->device_info(i);
    if (gpu) {
      scan.gpus.push_back(std::move(*gpu));
    } else {
      scan.notes.push_back(gpu.error().message);
    }
  }
  return scan;
}

} // namespace air
