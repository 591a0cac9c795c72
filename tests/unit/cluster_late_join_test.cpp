// A node that joins later (c10d --nnodes MIN:MAX): node 0 admits it while the
// job runs, every node ends the attempt, and the next one includes it.
#include "core/cluster/control.hpp"
#include "core/cluster/control_message.hpp"
#include "core/os/host.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/control_fixture.hpp"

#include <poll.h>

#include <chrono>
#include <future>
#include <thread>

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Joined = air::Expected<std::unique_ptr<air::ControlChannel>>;

namespace {

air::ControlOptions elastic_options(int port, const char* name) {
  air::ControlOptions o;
  o.c10d = true;
  o.num_nodes = 3; // --nnodes 2:3
  o.min_nodes = 2;
  o.last_call_timeout = 200ms;
  o.ranks_per_node = 2;
  o.node_name = name;
  o.master_host = "127.0.0.1";
  o.port = port;
  o.master_port = 30000;
  o.run_id = std::string("run-from-") + name;
  o.join_timeout = 5s;
  o.heartbeat_interval = 100ms;
  o.heartbeat_timeout = 10s; // the test polls one channel at a time
  o.join_token = "late-join-token";
  return o;
}

/// Node 0 and node 1 of a 2:3 job, started.
std::pair<std::unique_ptr<air::ControlChannel>, std::unique_ptr<air::ControlChannel>> start_two(int port) {
  auto host = std::async(std::launch::async,
                         [port] { return air::ControlChannel::join(elastic_options(port, "first")); });
  std::this_thread::sleep_for(100ms); // "first" binds the port
  Joined other = air::ControlChannel::join(elastic_options(port, "second"));
  Joined h = host.get();
  INFO((h ? "" : h.error().message) << (other ? "" : other.error().message));
  REQUIRE(h.ok());
  REQUIRE(other.ok());
  REQUIRE((*h)->num_nodes() == 2);
  return {std::move(*h), std::move(*other)};
}

} // namespace

TEST_CASE("wait and regroup survive a round trip", "[control][join]") {
  air::ControlMessage wait;
  wait.kind = air::ControlMessage::Kind::wait;
  CHECK(air::format_control_message(wait) == "wait\n");
  CHECK(air::parse_control_message("wait")->kind == air::ControlMessage::Kind::wait);
  CHECK_FALSE(air::parse_control_message("wait 3").ok());
  air::ControlMessage regroup;
  regroup.kind = air::ControlMessage::Kind::regroup;
  regroup.text = "third joined;\nthe worker group restarts with 3 nodes";
  CHECK(air::format_control_message(regroup) ==
        "regroup third joined; the worker group restarts with 3 nodes\n");
  const auto parsed = air::parse_control_message("regroup third joined");
  REQUIRE(parsed.ok());
  CHECK(parsed->kind == air::ControlMessage::Kind::regroup);
  CHECK(parsed->text == "third joined");
}

TEST_CASE("an agent that joins a running job is admitted at the next restart", "[control][join]") {
  const int port = air_test::free_port();
  auto [node0, node1] = start_two(port);
  std::vector<std::string> notices;
  auto late = std::async(std::launch::async, [port, &notices] {
    air::ControlOptions o = elastic_options(port, "third");
    o.notice = [&notices](const std::string& line) { notices.push_back(line); };
    return air::ControlChannel::join(o);
  });
  // Node 0 admits it and ends the attempt: a membership change, not a failure.
  const auto change = air_test::poll_channel(*node0, 3s);
  REQUIRE(change.has_value());
  CHECK(change->membership_change);
  CHECK(change->reason == "third joined; the worker group restarts with 3 nodes");
  const auto told = air_test::poll_channel(*node1, 3s);
  REQUIRE(told.has_value());
  CHECK(told->membership_change);
  CHECK(told->node_rank == 0);
  CHECK(late.wait_for(200ms) == std::future_status::timeout); // it waits for the restart

  auto restarted = std::async(std::launch::async, [&node1 = node1, &told = told] {
    air::RunOutcome stopped;
    stopped.status = air::RunOutcome::Status::failed;
    stopped.remote_failure = told;
    node1->settle(stopped);
    return node1->agree_restart(stopped, true, 1, 0);
  });
  air::RunOutcome mine;
  mine.status = air::RunOutcome::Status::failed;
  mine.remote_failure = change;
  node0->settle(mine);
  CHECK(node0->agree_restart(mine, true, 1, 41000) == std::optional<int>(41000));
  CHECK(restarted.get() == std::optional<int>(41000));
  Joined third = late.get();
  INFO((third ? "" : third.error().message));
  REQUIRE(third.ok());
  CHECK((*third)->node_rank() == 2);
  CHECK((*third)->num_nodes() == 3);
  CHECK((*third)->first_attempt() == 1);
  CHECK((*third)->master_port() == 41000);
  CHECK((*third)->run_id() == "run-from-first");
  REQUIRE(notices.size() == 1);
  CHECK(notices[0].find("joins at the next restart") != std::string::npos);
  CHECK(node0->num_nodes() == 3);
  CHECK(node1->num_nodes() == 3);
  CHECK(node1->node_rank() == 1);
  CHECK(node0->node_names() == std::vector<std::string>{"first", "second", "third"});

  // The new node is a full member: its failure reaches node 0.
  (*third)->report_failure(7, 4, "rank 4 exited with exit code 7");
  const auto f = air_test::poll_channel(*node0, 2s);
  REQUIRE(f.has_value());
  CHECK_FALSE(f->membership_change);
  CHECK(f->node_rank == 2);
  CHECK(f->exit_code == 7);
}

TEST_CASE("an agent beyond MAX is refused while the job runs on", "[control][join]") {
  const int port = air_test::free_port();
  auto host = std::async(std::launch::async,
                         [port] { return air::ControlChannel::join(elastic_options(port, "first")); });
  std::this_thread::sleep_for(100ms);
  auto second = std::async(std::launch::async,
                           [port] { return air::ControlChannel::join(elastic_options(port, "second")); });
  Joined third = air::ControlChannel::join(elastic_options(port, "third"));
  Joined node0 = host.get();
  REQUIRE(node0.ok());
  Joined node1 = second.get(); // kept open: a closed node would be a lost node
  REQUIRE(node1.ok());
  REQUIRE(third.ok());
  REQUIRE((*node0)->num_nodes() == 3);

  auto fourth = std::async(std::launch::async,
                           [port] { return air::ControlChannel::join(elastic_options(port, "fourth")); });
  // Node 0 hears it while it runs: no membership change, no failure.
  const auto end = Clock::now() + 5s;
  while (Clock::now() < end && fourth.wait_for(0s) != std::future_status::ready)
    REQUIRE_FALSE(air_test::poll_channel(**node0, 100ms).has_value());
  REQUIRE(fourth.wait_for(0s) == std::future_status::ready);
  Joined refused = fourth.get();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().kind == air::ErrorKind::usage); // exit 2
  CHECK(refused.error().message.find("the job already has its 3 nodes") != std::string::npos);
  CHECK((*node0)->num_nodes() == 3);
}
