#pragma once

#include <optional>
#include <string>
#include <string_view>

// What air-run picks out of a Python traceback: the exception line for a
// failure message, and the innermost frame for a reason's or an annotation's
// file and line.

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

/// `line` without torch 2.3+'s "[rankN]: " (or "[rankN]:") for this `rank`:
/// init_process_group puts it before every line of an uncaught exception, and
/// air-run's console and reports say the rank already. Another rank's prefix
/// stays (a rank may print what another sent it). Pure.
std::string_view without_own_rank_prefix(std::string_view line, int rank);

/// Whether `path` is a library's, not the program's own: under site-packages
/// or dist-packages, the standard library (.../lib/python3.N/), or air-run's
/// own: the ranks' shim (<run folder>/pyshim/, whose collective wrappers are
/// in every failed collective's traceback; the folder is gone once the run
/// ends), the warm start's air_run_warm.py, and the air package (air.data's
/// commit raises for the caller's line). Pure.
bool is_library_file(std::string_view path);

/// The innermost frame of the program's own code in the last traceback of
/// `text`: the last `File "path", line N` line ("[rankN]: " before it or not)
/// whose file is no library's (a Trainer callback that raises is named, not
/// transformers' trainer.py that called it; the user's line, not the shim's
/// wrapper around the collective it called); the innermost frame of all when
/// every frame is a library's, air-run's own excepted. Pure.
std::optional<SourceLocation> innermost_frame(std::string_view text);

} // namespace air
