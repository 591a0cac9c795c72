#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/base/exit_status.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace air {

/// How a helper program run by `run_captured` ended, with everything it wrote.
struct CapturedRun {
  ExitStatus status;
  bool timed_out = false; ///< air-run killed it at the deadline (status then says SIGKILL)
  std::string out;        ///< its stdout, up to the capture limit
  std::string err;        ///< its stderr, up to the capture limit
  double duration_s = 0;
};

/// Runs `argv` with `env` (through spawn_process: own process group, stdin
/// from /dev/null, death signal if air-run dies), collects stdout and stderr
/// (each capped at `max_bytes`; the rest is read and dropped so the child never
/// blocks on a full pipe) and waits for it. At `timeout` the whole process
/// group gets SIGKILL: a helper stuck in a collective cannot hang air-run.
/// Errors are spawn_process's (not found 127, not executable 126, system 125).
Expected<CapturedRun> run_captured(const std::vector<std::string>& argv, const Environment& env,
                                   std::chrono::milliseconds timeout, std::size_t max_bytes = 1 << 20);

} // namespace air
