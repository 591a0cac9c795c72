#pragma once

#include <deque>
#include <string>

namespace air {

/// Whether a failed rank's last output lines say that it failed because
/// another rank went away: a collective's peer closed its connection, NCCL
/// aborted the communicator, the rendezvous store vanished. Such a failure is
/// a symptom, not a cause: when a rank fails this way first, the supervisor
/// waits a moment for the rank that caused it (k_settle_time).
bool reports_lost_peer(const std::deque<std::string>& tail);

} // namespace air
