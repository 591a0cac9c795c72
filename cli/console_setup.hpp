#pragma once

#include "core/base/environment.hpp"
#include "core/hw/hardware.hpp"
#include "core/run/plan.hpp"
#include "core/run/supervisor.hpp"
#include "core/spec/spec.hpp"

namespace air::cli {

/// How the run's console behaves, from the spec and the terminals air-run
/// has: where rank stdout goes (stderr under --json), rank prefixes, colour,
/// timestamps, which rank reads stdin (`stdin_rank`, -1: none), whether the
/// ranks get a terminal of their own, and the live status area with the GPUs
/// it watches.
ConsoleOptions console_options_for(const LaunchSpec& spec, const LaunchPlan& plan, const Hardware& hardware,
                                   int stdin_rank, const Environment& env);

} // namespace air::cli
