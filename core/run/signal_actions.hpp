#pragma once

#include <optional>
#include <vector>

namespace air {

/// What the supervisor does with a signal air-run receives.
enum class SignalAction {
  teardown, ///< forward it to every rank's group, then stop the run (grace period, SIGKILL)
  forward,  ///< forward it to every rank's group; the run goes on
  stacks,   ///< print every armed Python rank's stacks (core/run/stacks.hpp); the run goes on
  ignore,   ///< nothing
};

/// The one mapping from signal to action. `forwarded` is --signals-to-handle
/// as signal numbers, nullopt when it was not given (air-run's own handling).
/// A listed signal is forwarded: SIGINT, SIGTERM, SIGHUP and SIGQUIT then
/// stop the run (torchrun's meaning), the others leave it running. SIGINT,
/// SIGTERM and SIGHUP stop the run even when not listed, so no rank outlives
/// air-run; an unlisted SIGQUIT shows stacks; an unlisted SIGUSR1/SIGUSR2 is
/// ignored when a list was given and forwarded when none was.
SignalAction signal_action(int sig, const std::optional<std::vector<int>>& forwarded);

} // namespace air
