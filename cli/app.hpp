#pragma once

#include "core/base/error.hpp"

namespace air::cli {

/// The one table from error kinds to exit codes (docs/supervision.md lists them).
int exit_code_for(ErrorKind kind);

/// The whole command line: parses flags and the spec, detects hardware, plans,
/// supervises, reports. The one place where errors become exit codes.
int run_main(int argc, char** argv);

} // namespace air::cli
