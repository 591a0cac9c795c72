#pragma once

#include "core/run/python_traceback.hpp"
#include "core/spec/spec.hpp"

#include <optional>
#include <string>
#include <string_view>

// What CI reports need besides a rank's traceback (python_traceback.hpp):
// paths relative to the workspace and a stable name for the job.

namespace air {

/// `path` relative to `workspace` when it lies inside it (GitHub wants
/// annotation files relative to the repository), else unchanged. Pure.
std::string relative_to(const std::string& path, const std::string& workspace);

/// A name for the job that stays the same from one run to the next (CI test
/// history is keyed on it): the spec file's stem, else the module, else the
/// target's file name without ".py". Pure.
std::string job_name(const LaunchSpec& spec);

} // namespace air
