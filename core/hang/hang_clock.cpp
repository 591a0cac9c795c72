// The hang clock: when quiet ranks make a hang.
#include "core/hang/hang_clock.hpp"

#include <algorithm>

namespace air {

void HangClock::progress(Clock::time_point now) {
  last_progress_ = now;
  seen_ = true;
  diagnosed_ = false;
}

HangClock::Clock::duration HangClock::quiet_limit() const {
  const Clock::duration limit = timeout_.value_or(Clock::duration::zero());
  return seen_ ? limit : std::max<Clock::duration>(limit, startup_);
}

std::optional<HangClock::Clock::time_point> HangClock::next_deadline() const {
  if (!timeout_ || diagnosed_) return std::nullopt;
  return last_progress_ + quiet_limit();
}

bool HangClock::due(Clock::time_point now) const {
  return timeout_ && !diagnosed_ && now - last_progress_ >= quiet_limit();
}

double HangClock::quiet_s(Clock::time_point now) const {
  return std::chrono::duration<double>(now - spell_started_.value_or(last_progress_)).count();
}

} // namespace air
