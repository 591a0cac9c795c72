#pragma once

#include "core/base/error.hpp"

namespace air {

/// Makes sure file descriptors 0, 1 and 2 are open, opening /dev/null on each
/// one that is closed. Called first thing at start-up: a program started with
/// its standard streams closed (`>&- 2>&-`, as some daemonising wrappers do)
/// would otherwise get its own files there (a run cgroup's `cgroup.procs`, a
/// rank's log), and every "print to stderr" would write into them. With stdin
/// closed, a `--stdin` rank reads end of input from /dev/null.
/// Errors (system kind) name /dev/null and the failing call.
Status open_standard_streams();

} // namespace air
