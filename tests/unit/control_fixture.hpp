#pragma once
// Helpers shared by the tests of the multi-node control channel.

#include "core/cluster/control.hpp"
#include "core/os/host.hpp"
#include "core/run/job_preemption.hpp"
#include "tests/unit/catch.hpp"

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace air_test {

/// One node's step counts for a preemption decision: `polling` of its ranks
/// call should_stop(), the furthest is at `steps`, the fastest makes `rate`
/// steps a second, and the count is `lead_s` old when the step lands.
inline air::NodeSteps node_steps(int node, std::uint64_t steps, double rate, double lead_s = 0,
                                 int polling = 2) {
  air::NodeSteps s;
  s.node = node;
  s.polling = polling;
  s.steps = steps;
  s.rate = rate;
  s.lead_s = lead_s;
  return s;
}

/// A TCP port free on 127.0.0.1 now.
inline int free_port() {
  auto port = air::choose_free_port("127.0.0.1");
  REQUIRE(port.ok());
  return *port;
}

/// Polls the channel as the supervisor does until it reports something
/// (a failure, a membership change) or `limit` passes.
inline std::optional<air::RemoteFailure> poll_channel(air::ControlChannel& c,
                                                      std::chrono::milliseconds limit) {
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    std::vector<pollfd> fds;
    for (int fd : c.poll_fds()) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 20);
    if (auto f = c.check(Clock::now())) return f;
  }
  return std::nullopt;
}

} // namespace air_test
