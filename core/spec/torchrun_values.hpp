#pragma once

#include "core/base/error.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace air {

/// torchrun 2.11's --numa-binding modes (torch/numa/binding.py's AffinityMode):
/// which CPUs near its GPU a rank is bound to. core/run/numa_binding.hpp plans them.
enum class NumaMode {
  none,         ///< no binding (the default, as torchrun's)
  node,         ///< every CPU of the GPU's NUMA node
  socket,       ///< every CPU of the GPU's socket (all its NUMA nodes)
  exclusive,    ///< a disjoint share of the node's physical cores per rank
  core_complex, ///< one L3-sharing core group of the node, a distinct one per rank when there are enough
};

/// "node", "socket", "exclusive", "core-complex" or "none" as a mode.
/// Errors (usage) name `what` and list the modes.
Expected<NumaMode> parse_numa_mode(std::string_view text, std::string_view what);

/// The mode's spelling on the command line ("core-complex").
std::string_view numa_mode_name(NumaMode mode);

/// torchrun's --signals-to-handle: comma-separated signal names as Python's
/// `signal` module spells them ("SIGTERM,SIGUSR1"), as signal numbers in the
/// order given, without repeats. Only the signals air-run's supervisor
/// listens to are accepted: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1,
/// SIGUSR2. Errors (usage) name `what` and the bad item, with the SIG name
/// when the prefix was left out ("USR1": did you mean SIGUSR1?).
Expected<std::vector<int>> parse_signal_list(std::string_view text, std::string_view what);

/// torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters: the
/// comma-separated substrings, each kept as typed; empty items are dropped.
std::vector<std::string> parse_filter_list(std::string_view text);

} // namespace air
