#pragma once
// Helpers shared by the tests of the multi-node control channel.

#include "core/cluster/control.hpp"
#include "core/os/host.hpp"
#include "core/run/job_preemption.hpp"
#include "tests/unit/catch.hpp"

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
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
    for (auto& event : c.check(Clock::now()))
      if (event.kind == air::JobEvent::Kind::failed) return std::move(event.failure);
  }
  return std::nullopt;
}

/// The job's events a test's "supervisor" has not acted on yet, by channel:
/// what `tell` hands back (node 0 deciding with its own part) waits here
/// for the next round of the test's loop, as it waits in the supervisor's queue.
inline std::map<const air::ControlChannel*, std::vector<air::JobEvent>>& inbox() {
  static std::map<const air::ControlChannel*, std::vector<air::JobEvent>> events;
  return events;
}

/// Tells `c` this node's news, as the supervisor would, keeping what it hands back.
inline void tell(air::ControlChannel& c, const air::NodeEvent& event) {
  auto& mine = inbox()[&c];
  for (auto& e : c.tell(event, std::chrono::steady_clock::now())) mine.push_back(std::move(e));
}

/// What `c` says after a wake-up: the events kept from earlier tells, then check()'s.
inline std::vector<air::JobEvent> take_events(air::ControlChannel& c) {
  std::vector<air::JobEvent> events = std::exchange(inbox()[&c], {});
  for (auto& e : c.check(std::chrono::steady_clock::now())) events.push_back(std::move(e));
  return events;
}

} // namespace air_test
