// Model families, accelerator types, and matching a requested type and count
// against detected hardware. Pure: no system calls.
#include "core/hardware.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

namespace air {

namespace {

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_digit);
}

bool all_alnum(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_alnum);
}

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

std::string AcceleratorType::canonical() const {
  return cpu ? std::string("CPU") : fmt::format("GPU_{}x{}", count, model);
}

Expected<AcceleratorType> parse_accelerator_type(std::string_view text, std::optional<int> legacy_count) {
  const auto invalid = [&](std::string_view why) {
    return usage_error(fmt::format("invalid accelerator type '{}': {}", text, why));
  };
  const auto expected_form = [&] { return invalid("expected GPU_<n>x<MODEL> (e.g. GPU_8xH100) or CPU"); };
  const std::string upper_text = upper(text);
  AcceleratorType type;
  if (upper_text == "CPU") {
    type.cpu = true;
    return type;
  }
  if (upper_text.rfind("GPU_", 0) == 0) {
    const std::string_view rest = std::string_view(upper_text).substr(4);
    const auto x = rest.find('X');
    if (x == std::string_view::npos || x == 0) return expected_form();
    const std::string_view digits = rest.substr(0, x);
    const std::string_view model = rest.substr(x + 1);
    if (!all_digits(digits) || !all_alnum(model)) return expected_form();
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), type.count);
    if (ec != std::errc() || end != digits.data() + digits.size()) return invalid("count is too large");
    if (type.count < 1) return invalid("count must be at least 1");
    type.model = std::string(model);
    return type;
  }
  // Legacy serverless_gpu values are a bare model ("A10", "H100", "B300"): a
  // letter first, at least one digit, nothing but letters and digits.
  const bool legacy_model = !upper_text.empty() && is_alpha(upper_text.front()) && all_alnum(upper_text) &&
                            std::any_of(upper_text.begin(), upper_text.end(), is_digit);
  if (!legacy_model) return expected_form();
  type.legacy = true;
  type.model = upper_text;
  type.count = legacy_count.value_or(1);
  if (type.count < 1) return invalid("count must be at least 1");
  return type;
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
    auto parsed = parse_accelerator_type(*requested_type, requested_count);
    if (!parsed) return parsed.error();
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
    return selection;
  }

  const std::string requested = type->canonical();
  if (!type->legacy && requested_count && *requested_count != type->count) {
    return usage_error(fmt::format("accelerator_type {} asks for {} "
                                   "accelerators but num_accelerators is {}",
                                   requested, type->count, *requested_count));
  }
  if (hw.gpus.empty()) {
    return hardware_error(fmt::format("requested {}, found no GPU ({})", requested, no_gpu_reason(hw)));
  }
  std::vector<GpuInfo> matching;
  for (const auto& gpu : hw.gpus) {
    if (gpu.model == type->model) matching.push_back(gpu);
  }
  if (matching.empty()) return hardware_error(fmt::format("requested {}, found {}", requested, found));
  const int available = static_cast<int>(matching.size());
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
