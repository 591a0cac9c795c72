// Model families, accelerator types, and matching a requested type and count
// against detected hardware. Pure: no system calls.
#include "core/base/text.hpp"
#include "core/hw/hardware.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

namespace air {

namespace {

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

/// Upper-cased runs of letters and digits: "NVIDIA A100-SXM4-80GB" gives
/// NVIDIA, A100, SXM4, 80GB.
std::vector<std::string> name_tokens(std::string_view name) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : name) {
    if (is_alnum(c)) {
      current += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!current.empty()) {
      tokens.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

Error hardware_error(std::string message) { return {ErrorKind::hardware, std::move(message)}; }

/// The canonical type of a list of GPUs: the most common family and how many
/// GPUs have it (ties go to the family seen first), "CPU" for an empty list.
std::string type_of(const std::vector<GpuInfo>& gpus) {
  if (gpus.empty()) return "CPU";
  std::map<std::string, int> counts;
  std::string best;
  for (const auto& gpu : gpus) ++counts[gpu.model];
  for (const auto& gpu : gpus) {
    if (best.empty() || counts[gpu.model] > counts[best]) best = gpu.model;
  }
  return fmt::format("GPU_{}x{}", counts[best], best);
}

std::string no_gpu_reason(const Hardware& hw) {
  return hw.reason.empty() ? std::string("no GPU detected") : hw.reason;
}

} // namespace

// Rule-based so that names NVIDIA has not shipped yet still map sensibly:
// split the marketing name into letter/digit tokens, drop vendor and brand
// words (NVIDIA, Tesla, GeForce, Quadro), glue the consumer/workstation
// prefixes RTX/GTX (and "PRO") to a following number (RTX 4090 -> RTX4090) but
// drop them before a model token (RTX A6000 -> A6000), and take the first
// token left. Suffixes such as 80GB, HBM3, PCIe, SXM4, NVL never come first.
std::string model_family(std::string_view gpu_name) {
  const auto tokens = name_tokens(gpu_name);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    if (token == "NVIDIA" || token == "TESLA" || token == "GEFORCE" || token == "QUADRO") continue;
    if (token == "RTX" || token == "GTX") {
      std::string family = token;
      std::size_t next = i + 1;
      if (next < tokens.size() && tokens[next] == "PRO") family += tokens[next++];
      if (next < tokens.size() && all_digits(tokens[next])) return family + tokens[next];
      continue; // "RTX A6000": the model token follows
    }
    // AWS g5 instances report "NVIDIA A10G", the A10's cloud variant (same
    // GA102 chip, 24 GB); Databricks sells both as GPU_<n>xA10.
    if (token == "A10G") return "A10";
    return token;
  }
  return "UNKNOWN";
}

std::string detected_accelerator_type(const Hardware& hw) { return type_of(hw.gpus); }

Expected<Selection> select_accelerators(std::optional<std::string> requested_type,
                                        std::optional<int> requested_count, int cpu_ranks, const Hardware& hw,
                                        bool cpu_ranks_given) {
  if (requested_count && *requested_count < 1) {
    return usage_error(fmt::format("num_accelerators must be at least 1, got {}", *requested_count));
  }
  const std::string found = detected_accelerator_type(hw);
  Selection selection;

  std::optional<AcceleratorType> type;
  if (requested_type) {
    auto parsed = parse_accelerator_type(*requested_type);
    if (!parsed) return usage_error("accelerator_type: " + parsed.error().message);
    type = std::move(*parsed);
  }

  // CPU: asked for, or the default when nothing was asked for and no GPU
  // exists.
  if ((type && type->cpu) || (!type && hw.gpus.empty())) {
    selection.cpu = true;
    selection.ranks = requested_count.value_or(cpu_ranks);
    selection.accelerator_type = "CPU";
    if (!type && (requested_count || !cpu_ranks_given)) {
      selection.notices.push_back(
          fmt::format("no GPU found ({}); running {} rank(s) on CPU", no_gpu_reason(hw), selection.ranks));
    }
    return selection;
  }

  if (!type) {
    const int available = static_cast<int>(hw.gpus.size());
    const int wanted = requested_count.value_or(available);
    if (wanted > available) {
      return hardware_error(fmt::format("requested {} accelerators, found {}", wanted, found));
    }
    selection.gpus.assign(hw.gpus.begin(), hw.gpus.begin() + wanted);
    selection.ranks = wanted;
    selection.accelerator_type = type_of(selection.gpus);
    if (cpu_ranks_given && !requested_count) {
      // cpu_ranks is the count for machines without a GPU; say so rather
      // than quietly run another number of ranks than the user wrote.
      selection.notices.push_back(
          fmt::format("cpu_ranks {} applies only where no GPU is found; running {} rank(s), one per GPU "
                      "(accelerator_type CPU runs {} rank(s) on CPU)",
                      cpu_ranks, wanted, cpu_ranks));
    }
    return selection;
  }

  if (!type->legacy && requested_count && *requested_count != type->count) {
    return usage_error(fmt::format("accelerator_type {} asks for {} "
                                   "accelerators but num_accelerators is {}",
                                   type->canonical(), type->count, *requested_count));
  }
  if (hw.gpus.empty()) {
    return hardware_error(
        fmt::format("requested {}, found no GPU ({})", type->canonical(), no_gpu_reason(hw)));
  }
  std::vector<GpuInfo> matching;
  for (const auto& gpu : hw.gpus) {
    if (gpu.model == type->model) matching.push_back(gpu);
  }
  if (matching.empty())
    return hardware_error(fmt::format("requested {}, found {}", type->canonical(), found));
  const int available = static_cast<int>(matching.size());
  // A legacy model names the family only: the count comes from
  // num_accelerators, else every GPU of that family.
  if (type->legacy) {
    type->legacy = false;
    type->count = requested_count.value_or(available);
  }
  const std::string requested = type->canonical();
  if (type->count > available) {
    // On a mixed machine, name what there is of the requested model.
    return hardware_error(fmt::format("requested {}, found {}", requested, type_of(matching)));
  }
  if (type->count < available) {
    selection.notices.push_back(fmt::format("{} requested: using the first {} of {} {} GPUs", requested,
                                            type->count, available, type->model));
  }
  selection.gpus.assign(matching.begin(), matching.begin() + type->count);
  selection.ranks = type->count;
  selection.accelerator_type = requested;
  return selection;
}

} // namespace air
