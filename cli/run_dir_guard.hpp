#pragma once

#include <string>
#include <utility>

namespace air::cli {

/// Owns the private run folder of a launch that keeps no log directory (the
/// ranks' result and error files, in /tmp) and removes it with all it holds
/// when the guard goes: after the report when the run ran, at once when the
/// launch failed before its first rank. The one place that folder is removed;
/// a kept log directory is never given to it.
class RunDirGuard {
public:
  RunDirGuard() = default;
  ~RunDirGuard();
  RunDirGuard(const RunDirGuard&) = delete;
  RunDirGuard& operator=(const RunDirGuard&) = delete;

  /// Takes `dir` (just made, private to this launch) to remove at the end.
  void own(std::string dir) { dir_ = std::move(dir); }

private:
  std::string dir_; ///< "" while there is none
};

} // namespace air::cli
