#include "core/run/job_preemption.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace air {

std::uint64_t pick_stop_step(const std::vector<NodeSteps>& nodes) {
  const double slack_s = std::chrono::duration<double>(k_preempt_slack).count();
  std::uint64_t stop = 0;
  bool counted = false;
  for (const NodeSteps& n : nodes) {
    if (n.polling <= 0) continue;
    // A NaN or negative rate or lead (a clock that jumped) counts as none.
    const double rate = n.rate > 0 ? std::min(n.rate, 1e6) : 0.0;
    const double lead = n.lead_s > 0 ? std::min(n.lead_s, 3600.0) : 0.0;
    const auto ahead = static_cast<std::uint64_t>(std::ceil(rate * (2 * lead + slack_s)));
    // A count far beyond any run (a rank's page written over) must not wrap around.
    const std::uint64_t steps =
        std::min<std::uint64_t>(n.steps, std::numeric_limits<std::uint64_t>::max() / 2);
    if (steps > 0 || ahead > 0) counted = true;
    stop = std::max(stop, steps + ahead + 1);
  }
  return counted ? stop : 0;
}

} // namespace air
