#pragma once

#include "core/spec/spec.hpp"

#include <optional>
#include <string>
#include <string_view>

// What CI reports pick out of a failed rank's output: the exception line for
// a failure message, and the innermost frame for an annotation's file and line.

namespace air {

/// A place in a source file, as a Python traceback names it.
struct SourceLocation {
  std::string file;
  int line = 0;
};

/// The exception line of a Python traceback or output tail: the last line
/// that reads like "ValueError: bad shape" or "torch.distributed.DistBackendError: ..."
/// (a dotted name ending in Error, Exception, Interrupt or Exit, then ":" or
/// the end). torch 2.3+'s "[rankN]: " before a line is not part of it.
/// "" when there is none. Pure.
std::string exception_line(std::string_view text);

/// The innermost frame of the last traceback in `text`: the last
/// `File "path", line N` line ("[rankN]: " before it or not). Pure.
std::optional<SourceLocation> innermost_frame(std::string_view text);

/// `path` relative to `workspace` when it lies inside it (GitHub wants
/// annotation files relative to the repository), else unchanged. Pure.
std::string relative_to(const std::string& path, const std::string& workspace);

/// A name for the job that stays the same from one run to the next (CI test
/// history is keyed on it): the spec file's stem, else the module, else the
/// target's file name without ".py". Pure.
std::string job_name(const LaunchSpec& spec);

} // namespace air
