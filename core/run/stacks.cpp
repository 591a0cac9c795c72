#include "core/run/stacks.hpp"

#include "core/run/python/air_run_errors_py.hpp"
#include "core/run/python/air_run_patches_py.hpp"
#include "core/run/python/air_run_progress_py.hpp"
#include "core/run/python/air_run_shim_start_py.hpp"
#include "core/run/python/air_run_slots_py.hpp"
#include "core/run/python/air_run_stacks_py.hpp"
#include "core/run/python/air_run_store_py.hpp"

namespace air {
namespace {

// The line of air_run_shim_start.py that the later parts' starts replace:
// after the progress page is attached, before the shadowed sitecustomize runs.
constexpr std::string_view k_later_starts = "# air-run: the later parts start here\n";

} // namespace

std::string stack_shim_source(const std::vector<ShimPart>& later) {
  namespace py = embedded_python;
  std::string starts;
  for (const auto& part : later) starts.append(part.start).append("\n");
  std::string start(py::air_run_shim_start());
  const auto at = start.find(k_later_starts);
  if (at != std::string::npos) start.replace(at, k_later_starts.size(), starts);

  // Each part ends with a newline; two more keep the shim's blank lines
  // between top-level definitions.
  std::string shim;
  const auto add = [&shim](std::string_view text) {
    if (!shim.empty()) shim.append("\n\n");
    shim.append(text);
  };
  add(py::air_run_stacks());
  add(py::air_run_errors());
  add(py::air_run_store());
  add(py::air_run_slots());
  add(py::air_run_progress());
  add(py::air_run_patches());
  for (const auto& part : later) add(part.source);
  add(start);
  return shim;
}

std::string_view stack_shim_loader_source() {
  return "# Written by air-run for one run: the rank shim's loader. Python 2 reads it\n"
         "# too (a helper a rank starts), so it is Python 2 and 3, and imports the\n"
         "# shim, which is Python 3, only there.\n"
         "import sys\n"
         "\n"
         "if sys.version_info[0] >= 3:\n"
         "    import air_run_shim  # noqa: F401\n";
}

} // namespace air
