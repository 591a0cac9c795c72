// GPU detection: AIR_RUN_FAKE_GPUS (tests) or NVML, then an inherited
// CUDA_VISIBLE_DEVICES applied the way the CUDA runtime applies it.
#include "core/base/text.hpp"
#include "core/hw/hardware.hpp"
#include "core/hw/nvml.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace air {

namespace {

constexpr int kMaxFakeGpus = 255; // fake bus ids are 00000000:NN:00.0 with NN = 01..FF

bool starts_with_ci(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && lower(text.substr(0, prefix.size())) == lower(prefix);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return parts;
}

/// Nominal memory of the fake models tests use; 0 for any other.
std::uint64_t fake_memory_bytes(const std::string& model) {
  constexpr std::uint64_t gib = 1ULL << 30;
  if (model == "H100") return 80 * gib;
  if (model == "H200") return 141 * gib;
  if (model == "A10") return 24 * gib;
  if (model == "B300") return 288 * gib;
  return 0;
}

std::string plural_gpus(std::size_t n) { return fmt::format("{} GPU{}", n, n == 1 ? "" : "s"); }

/// Why `entry` names no usable GPU, or "" when it names `*chosen` in `sorted`.
std::string resolve_visible_entry(std::string_view entry, const std::vector<GpuInfo>& sorted,
                                  std::size_t* chosen) {
  if (entry.empty()) return "is empty";
  if (starts_with_ci(entry, "MIG-")) return "names a MIG instance, which air-run does not support";
  if (starts_with_ci(entry, "GPU-")) {
    // CUDA accepts any prefix of a UUID that names exactly one GPU.
    std::size_t matches = 0;
    const std::string wanted = lower(entry);
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      if (lower(sorted[i].uuid).rfind(wanted, 0) == 0) {
        ++matches;
        *chosen = i;
      }
    }
    if (matches == 0) return "matches no detected GPU UUID";
    if (matches > 1) return fmt::format("is ambiguous: it prefixes {} GPU UUIDs", matches);
    return "";
  }
  std::size_t index = 0;
  const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
  if (ec == std::errc() && end == entry.data() + entry.size() &&
      std::isdigit(static_cast<unsigned char>(entry.front()))) {
    if (index >= sorted.size())
      return fmt::format("is out of range ({} detected)", plural_gpus(sorted.size()));
    *chosen = index;
    return "";
  }
  return "is not a GPU index or GPU- UUID";
}

} // namespace

Expected<std::vector<GpuInfo>> parse_fake_gpus(std::string_view text) {
  std::vector<GpuInfo> gpus;
  if (trim(text).empty()) return gpus;
  const auto entries = split(text, ';');
  for (std::size_t n = 0; n < entries.size(); ++n) {
    const std::string_view entry = trim(entries[n]);
    const auto bad = [&](std::string_view why) {
      return usage_error(fmt::format("AIR_RUN_FAKE_GPUS entry '{}': {}", entry, why));
    };
    if (entry.empty()) {
      return usage_error(fmt::format("AIR_RUN_FAKE_GPUS entry {} is empty in '{}'", n + 1, text));
    }
    int count = 1;
    std::string_view name = entry;
    // A count prefix is digits then a lower-case 'x'. No GPU name starts with
    // a digit or an 'x', so such an entry must be a well-formed prefix.
    if (std::isdigit(static_cast<unsigned char>(entry.front())) != 0 || entry.front() == 'x') {
      const auto x = entry.find('x');
      const std::string_view digits = entry.substr(0, x);
      const bool digits_ok = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      });
      name = x == std::string_view::npos ? std::string_view() : trim(entry.substr(x + 1));
      if (!digits_ok || name.empty()) return bad("expected [<count>x]<name>, e.g. 8xNVIDIA H100 80GB HBM3");
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
      if (ec != std::errc() || count > kMaxFakeGpus) count = kMaxFakeGpus + 1; // reported below
      if (count < 1) return bad("count must be at least 1");
    }
    if (static_cast<int>(gpus.size()) + count > kMaxFakeGpus) {
      return usage_error(fmt::format("AIR_RUN_FAKE_GPUS describes more than {} GPUs", kMaxFakeGpus));
    }
    for (int i = 0; i < count; ++i) {
      GpuInfo gpu;
      gpu.index = static_cast<int>(gpus.size());
      const int ordinal = gpu.index + 1; // 1-based: an all-zero UUID or bus 00 looks like "unset"
      gpu.uuid = fmt::format("GPU-00000000-0000-0000-0000-{:012x}", ordinal);
      gpu.pci_bus_id = fmt::format("00000000:{:02X}:00.0", ordinal);
      gpu.name = std::string(name);
      gpu.model = model_family(gpu.name);
      gpu.memory_total_bytes = fake_memory_bytes(gpu.model);
      gpus.push_back(std::move(gpu));
    }
  }
  return gpus;
}

// Indices count in PCI bus order. The CUDA runtime orders devices
// FASTEST_FIRST unless CUDA_DEVICE_ORDER=PCI_BUS_ID; among identical GPUs (the
// machines air-run targets) FASTEST_FIRST falls back to PCI bus order, and
// NVML's index order matches PCI order on practically all machines. Sorting
// by bus id here makes "0" mean the same GPU to air-run and to CUDA in both
// cases. Ranks are then bound by UUID, so no later reordering can move them.
std::vector<GpuInfo> apply_visible_devices(const std::vector<GpuInfo>& gpus, std::string_view value,
                                           std::string* note) {
  std::vector<GpuInfo> sorted = gpus;
  std::stable_sort(sorted.begin(), sorted.end(), [](const GpuInfo& a, const GpuInfo& b) {
    return lower(a.pci_bus_id) < lower(b.pci_bus_id);
  });
  const auto set_note = [&](std::string text) {
    if (note != nullptr) *note = std::move(text);
  };
  const std::string_view trimmed = trim(value);
  // "" and "-1" are the usual ways to hide every GPU from CUDA.
  if (trimmed.empty() || trimmed == "-1") {
    set_note(fmt::format("CUDA_VISIBLE_DEVICES=\"{}\" hides every GPU (0 of {} kept)", value, sorted.size()));
    return {};
  }

  std::vector<GpuInfo> visible;
  std::vector<bool> taken(sorted.size(), false);
  for (const std::string_view raw : split(trimmed, ',')) {
    const std::string_view entry = trim(raw);
    std::size_t chosen = 0;
    std::string why = resolve_visible_entry(entry, sorted, &chosen);
    if (why.empty() && taken[chosen]) why = "repeats a GPU already listed";
    if (!why.empty()) {
      // CUDA stops at the first invalid entry and keeps the ones before it.
      set_note(fmt::format("CUDA_VISIBLE_DEVICES=\"{}\": entry '{}' {}; as "
                           "CUDA does, it and the entries "
                           "after it are ignored: {} of {} kept",
                           value, entry, why, visible.size(), plural_gpus(sorted.size())));
      return visible;
    }
    taken[chosen] = true;
    visible.push_back(sorted[chosen]);
  }
  set_note(fmt::format("CUDA_VISIBLE_DEVICES=\"{}\" keeps {} of {} (indices in PCI bus order)", value,
                       visible.size(), plural_gpus(sorted.size())));
  return visible;
}

Hardware detect_hardware(const Environment& env) {
  Hardware hw;
  std::vector<GpuInfo> found;
  if (const auto fake = env.find("AIR_RUN_FAKE_GPUS"); fake != env.end()) {
    hw.source = "AIR_RUN_FAKE_GPUS";
    auto parsed = parse_fake_gpus(fake->second);
    if (!parsed) {
      hw.reason = parsed.error().message;
    } else if (parsed->empty()) {
      hw.reason = "AIR_RUN_FAKE_GPUS is empty";
    } else {
      found = std::move(*parsed);
    }
  } else {
    auto scan = scan_nvml_gpus();
    if (!scan) {
      hw.source = "none";
      hw.reason = scan.error().message;
    } else {
      hw.source = "nvml";
      found = std::move(scan->gpus);
      hw.notes = std::move(scan->notes);
      if (found.empty()) hw.reason = "NVML reports no GPU";
    }
  }

  std::stable_sort(found.begin(), found.end(), [](const GpuInfo& a, const GpuInfo& b) {
    return lower(a.pci_bus_id) < lower(b.pci_bus_id);
  });
  const auto visible = env.find("CUDA_VISIBLE_DEVICES");
  if (visible == env.end()) {
    hw.gpus = std::move(found);
    return hw;
  }
  hw.cuda_visible_devices = visible->second;
  hw.cuda_visible_devices_set = true;
  if (found.empty()) {
    hw.notes.push_back(
        fmt::format("CUDA_VISIBLE_DEVICES=\"{}\" (no GPU detected to restrict)", visible->second));
    return hw;
  }
  std::string note;
  hw.gpus = apply_visible_devices(found, visible->second, &note);
  if (hw.gpus.empty()) hw.reason = note;
  hw.notes.push_back(std::move(note));
  return hw;
}

} // namespace air
