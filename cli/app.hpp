#pragma once

namespace air::cli {

/// The whole command line: parses flags and the spec, detects hardware, plans,
/// supervises, reports. The one place where errors become exit codes.
int run_main(int argc, char** argv);

} // namespace air::cli
