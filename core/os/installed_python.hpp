#pragma once

#include "core/base/environment.hpp"

#include <optional>
#include <string>

namespace air {

/// The interpreter of the Python environment air-run is installed in, and why.
struct InstalledPython {
  std::string path; ///< "/home/me/venv/bin/python3"
  std::string why;  ///< "the virtual environment air-run is installed in (/home/me/venv)"
};

/// Finds the Python environment (a venv: `pyvenv.cfg`; a conda environment:
/// `conda-meta/`) that air-run was installed into, so ranks run the Python
/// that `pip install air-run` was run with rather than the first `python3`
/// on PATH. Looked for, in order:
///  - the folder air-run was started from, links not followed (`program`,
///    argv[0], looked up along PATH when bare): a `torchrun` link in a
///    venv's `bin/`;
///  - the folder of the air-run binary itself (/proc/self/exe);
///  - the wheel's layout, the binary at
///    `<env>/lib/pythonX.Y/site-packages/air/bin/air-run`: `<env>/bin/pythonX.Y`.
/// Each `bin/` must hold `python3` (else `python`) and its parent the
/// environment's marker. nullopt when air-run is installed in none.
std::optional<InstalledPython> installed_python(const std::string& program, const Environment& env);

} // namespace air
