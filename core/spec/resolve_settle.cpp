// The checks and defaults across keys, once every source is applied: what no
// single value can say about itself (module with no_python, nproc_per_node
// with num_accelerators), preload's module names, and the rendezvous.
#include "core/spec/rendezvous.hpp"
#include "core/spec/resolve_parts.hpp"
#include "core/spec/torchrun.hpp"
#include "core/spec/torchrun_values.hpp"

#include <algorithm>
#include <cctype>

namespace air::resolve_parts {
namespace {

/// torchrun's values, checked here so a bad one names where it came from.
Status check_torchrun_values(const LaunchSpec& spec) {
  if (!spec.nproc_per_node.value.empty()) {
    AIR_TRY(parse_nproc_per_node(spec.nproc_per_node.value,
                                 place_of(spec.nproc_per_node.origin, "nproc_per_node")));
    if (!spec.num_accelerators.is_default()) {
      return usage_error(place_of(spec.nproc_per_node.origin, "nproc_per_node") +
                         ": give either it or num_accelerators (" + spec.num_accelerators.origin.describe() +
                         ")");
    }
    // Both count the ranks on this node: one of them would be dropped without a word.
    if (!spec.cpu_ranks.is_default()) {
      return usage_error(place_of(spec.nproc_per_node.origin, "nproc_per_node") +
                         ": give either it or cpu_ranks (" + spec.cpu_ranks.origin.describe() + ")");
    }
  }
  AIR_TRY(parse_std_streams(spec.redirects.value, place_of(spec.redirects.origin, "redirects")));
  AIR_TRY(parse_std_streams(spec.tee.value, place_of(spec.tee.origin, "tee")));
  if (spec.on_hang.value != "report" && spec.on_hang.value != "stop") {
    return usage_error(place_of(spec.on_hang.origin, "on_hang") + ": " + single_quoted(spec.on_hang.value) +
                       " is not one of report, stop");
  }
  AIR_TRY(parse_numa_mode(spec.numa_binding.value, place_of(spec.numa_binding.origin, "numa_binding")));
  if (!spec.signals_to_handle.is_default()) {
    AIR_TRY(parse_signal_list(spec.signals_to_handle.value,
                              place_of(spec.signals_to_handle.origin, "signals_to_handle")));
  }
  return ok_status();
}

// A dotted Python identifier: "torch", "torch.distributed", "_x.y2".
bool is_module_name(std::string_view name) {
  bool ok = true;
  bool start = true;
  for (const char c : name) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
    const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (c == '.') {
      ok = ok && !start;
      start = true;
    } else {
      ok = ok && (letter || (digit && !start));
      start = false;
    }
  }
  return ok && !start;
}

/// `preload` as a list of module names: items split at commas, "none"
/// clearing what came before (a flag turning a file's list off), "auto" as
/// well but for air-run's own choice (core/warm/warm_choice.hpp), each name a
/// dotted Python identifier. The warm start forks ranks from an interpreter
/// that imported them; a name that is no module would fail every run there.
/// Unset, it is {"auto"}; off, empty.
Status settle_preload(LaunchSpec& spec) {
  if (spec.preload.is_default()) {
    spec.preload.value = {"auto"};
    return ok_status();
  }
  std::vector<std::string> modules;
  const std::string place = place_of(spec.preload.origin, "preload");
  for (const auto& item : spec.preload.value) {
    std::size_t from = 0;
    for (;;) {
      const std::size_t comma = item.find(',', from);
      const std::string name(trim(std::string_view(item).substr(from, comma - from)));
      if (name == "none" || name == "auto") {
        modules.clear();
        if (name == "auto") modules.push_back(name);
      } else if (!name.empty()) {
        if (modules.size() == 1 && modules.front() == "auto")
          return usage_error(place + ": auto lets air-run choose the modules; name " + single_quoted(name) +
                             " without it (like torch,numpy), or use auto alone");
        if (!is_module_name(name))
          return usage_error(place + ": " + single_quoted(name) +
                             " is not a Python module name (like torch or torch.distributed)");
        if (std::find(modules.begin(), modules.end(), name) == modules.end()) modules.push_back(name);
      }
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  spec.preload.value = std::move(modules);
  return ok_status();
}

/// Defaults that depend on how air-run was started: a Python installed next
/// to air-run (its virtual environment) is the interpreter. (No timeout
/// depends on it: no command line has one unless asked, as torchrun's.)
void apply_invocation_defaults(LaunchSpec& spec, const SpecInputs& inputs) {
  // With restarts to spend, a hang ends the attempt so that a restart resumes
  // from the last checkpoint, rather than a run that waits for ever.
  if (spec.on_hang.is_default() && spec.max_restarts.value > 0) {
    spec.on_hang.value = "stop";
    spec.on_hang.origin.where = "max_restarts " + std::to_string(spec.max_restarts.value) + ": hangs restart";
  }
  if (!inputs.default_python.empty() && spec.python.is_default()) {
    spec.python.value = inputs.default_python;
    spec.python.origin.where = inputs.default_python_why;
  }
}

} // namespace

Status settle_spec(LaunchSpec& spec, const SpecInputs& inputs) {
  if (spec.module.value && spec.no_python.value) {
    return usage_error(place_of(spec.no_python.origin, "no_python") +
                       ": cannot be used together with module (" + spec.module.origin.describe() + ")");
  }
  AIR_TRY(check_torchrun_values(spec));
  AIR_TRY(settle_preload(spec));
  apply_invocation_defaults(spec, inputs);
  return settle_rendezvous(spec, [](const Origin& o, std::string_view key) { return place_of(o, key); });
}

} // namespace air::resolve_parts
