// The signal-to-action table of the supervisor (and whoever extends it:
// preemption on SIGTERM belongs here too).
#include "core/run/signal_actions.hpp"

#include <algorithm>
#include <array>
#include <csignal>

namespace air {
namespace {

struct SignalRow {
  int sig;
  SignalAction listed;     ///< named by --signals-to-handle
  SignalAction unlisted;   ///< a list was given without it
  SignalAction by_default; ///< no list given
};

using A = SignalAction;
constexpr std::array k_signal_rows{
    SignalRow{SIGINT, A::teardown, A::teardown, A::teardown},
    SignalRow{SIGTERM, A::teardown, A::teardown, A::teardown},
    SignalRow{SIGHUP, A::teardown, A::teardown, A::teardown},
    // Ctrl-\: air-run's stacks, unless a torchrun line asks for torchrun's meaning.
    SignalRow{SIGQUIT, A::teardown, A::stacks, A::stacks},
    // Schedulers' warnings (Slurm --signal=B:USR1@120).
    SignalRow{SIGUSR1, A::forward, A::ignore, A::forward},
    SignalRow{SIGUSR2, A::forward, A::ignore, A::forward},
};

} // namespace

SignalAction signal_action(int sig, const std::optional<std::vector<int>>& forwarded) {
  for (const SignalRow& row : k_signal_rows) {
    if (row.sig != sig) continue;
    if (!forwarded) return row.by_default;
    const bool listed = std::find(forwarded->begin(), forwarded->end(), sig) != forwarded->end();
    return listed ? row.listed : row.unlisted;
  }
  return SignalAction::ignore;
}

} // namespace air
