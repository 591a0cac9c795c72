#include "cli/run_dir_guard.hpp"

#include "core/os/host.hpp"

namespace air::cli {

RunDirGuard::~RunDirGuard() {
  if (!dir_.empty()) remove_tree(dir_);
}

} // namespace air::cli
