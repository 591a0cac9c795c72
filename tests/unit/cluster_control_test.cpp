// The multi-node control protocol: its lines, and real agents joined over loopback.
#include "core/base/text.hpp"
#include "core/cluster/control.hpp"
#include "core/cluster/control_auth.hpp"
#include "core/cluster/control_message.hpp"
#include "core/cluster/stop_round.hpp"
#include "core/os/host.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/control_fixture.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using air::ControlMessage;
using Kind = air::ControlMessage::Kind;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

ControlMessage round_trip(const ControlMessage& m) {
  const std::string line = air::format_control_message(m);
  REQUIRE(line.back() == '\n');
  auto parsed = air::parse_control_message(line.substr(0, line.size() - 1));
  INFO(line << (parsed ? "" : parsed.error().message));
  REQUIRE(parsed.ok());
  return *parsed;
}

air::ControlOptions options_for(int node_rank, int port, int ranks = 2) {
  air::ControlOptions o;
  o.node_rank = node_rank;
  o.num_nodes = 2;
  o.ranks_per_node = ranks;
  o.node_name = node_rank == 0 ? "alpha" : "beta";
  o.master_host = "127.0.0.1";
  o.port = port;
  o.run_id = node_rank == 0 ? "run-from-node0" : "run-from-node1";
  o.join_timeout = 5s;
  o.heartbeat_interval = 100ms;
  o.heartbeat_timeout = 500ms;
  o.join_token = "s3cret-join-token";
  o.job_id = "4242";
  return o;
}

/// Connects to node 0's control port on loopback, retrying while it starts.
int connect_loopback(int port) {
  int fd = -1;
  for (int i = 0; i < 100 && fd < 0; ++i) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) { // NOLINT
      ::close(fd);
      fd = -1;
      std::this_thread::sleep_for(20ms);
    }
  }
  REQUIRE(fd >= 0);
  return fd;
}

/// Reads one line (without '\n') from a blocking socket; "" on EOF.
std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (::recv(fd, &c, 1, 0) == 1 && c != '\n') line += c;
  return line;
}

void send_text(int fd, const std::string& text) {
  REQUIRE(::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
}

/// A hand-made agent's side of the join handshake under `token`.
void authenticate(int fd, const std::string& token) {
  const auto challenge = air::parse_challenge(read_line(fd));
  REQUIRE(challenge.has_value());
  const std::string nonce = "0123456789abcdef0123456789abcdef";
  const air::JoinSecret secret{token, "4242"};
  send_text(fd, air::format_auth(nonce, air::join_proof(secret, air::JoinRole::agent, *challenge, nonce)));
}

using Joined = air::Expected<std::unique_ptr<air::ControlChannel>>;

/// Joins node 0 (in a thread) and node 1 (here).
/// Node 0 and node 1 joined on `port`; `tune_node0` adjusts node 0's options
/// (a shorter wait) before it listens.
std::pair<std::unique_ptr<air::ControlChannel>, std::unique_ptr<air::ControlChannel>>
join_two(int port, const std::function<void(air::ControlOptions&)>& tune_node0 = {}) {
  auto server = std::async(std::launch::async, [port, &tune_node0] {
    auto o = options_for(0, port);
    if (tune_node0) tune_node0(o);
    return air::ControlChannel::join(o);
  });
  Joined client = air::ControlChannel::join(options_for(1, port));
  Joined node0 = server.get();
  INFO((node0 ? "" : node0.error().message) << (client ? "" : client.error().message));
  REQUIRE(node0.ok());
  REQUIRE(client.ok());
  return {std::move(*node0), std::move(*client)};
}

} // namespace

TEST_CASE("control messages survive a round trip", "[control]") {
  ControlMessage hello;
  hello.kind = Kind::hello;
  hello.node_rank = 3;
  hello.num_nodes = 4;
  hello.ranks_per_node = 8;
  hello.name = "gpu node";
  CHECK(air::format_control_message(hello) == "hello 2 3 4 8 gpu_node\n");
  const auto h = round_trip(hello);
  CHECK(h.kind == Kind::hello);
  CHECK(h.node_rank == 3);
  CHECK(h.num_nodes == 4);
  CHECK(h.ranks_per_node == 8);
  CHECK(h.name == "gpu_node");

  ControlMessage fail;
  fail.kind = Kind::fail;
  fail.node_rank = 1;
  fail.rank = -1;
  fail.exit_code = 130;
  fail.name = "";
  fail.text = "interrupted by SIGINT\nsecond line";
  CHECK(air::format_control_message(fail) == "fail 1 -1 130 ? interrupted by SIGINT second line\n");
  const auto f = round_trip(fail);
  CHECK(f.kind == Kind::fail);
  CHECK(f.rank == -1);
  CHECK(f.exit_code == 130);
  CHECK(f.text == "interrupted by SIGINT second line");

  ControlMessage refuse;
  refuse.kind = Kind::refuse;
  refuse.exit_code = 2;
  refuse.text = "node 1 runs 3 rank(s)";
  CHECK(round_trip(refuse).text == "node 1 runs 3 rank(s)");
  CHECK(round_trip(refuse).exit_code == 2);
  ControlMessage start;
  start.kind = Kind::start;
  start.text = "abc";
  start.node_rank = 2;
  start.num_nodes = 3;
  start.master_port = 29511;
  CHECK(air::format_control_message(start) == "start 2 3 29511 abc\n");
  CHECK(round_trip(start).text == "abc");
  CHECK(round_trip(start).node_rank == 2);
  CHECK(round_trip(start).num_nodes == 3);
  CHECK(round_trip(start).master_port == 29511);
  ControlMessage over;
  over.kind = Kind::over;
  over.node_rank = 1;
  over.restartable = true;
  CHECK(air::format_control_message(over) == "over 1 1\n");
  CHECK(round_trip(over).restartable);
  over.restartable = false;
  CHECK_FALSE(round_trip(over).restartable);
  ControlMessage restart;
  restart.kind = Kind::restart;
  restart.attempt = 2;
  restart.master_port = 40001;
  CHECK(air::format_control_message(restart) == "restart 2 40001\n");
  CHECK(round_trip(restart).attempt == 2);
  CHECK(round_trip(restart).master_port == 40001);
  CHECK(round_trip(restart).node_rank == -1); // the nodes did not change
  restart.node_rank = 1;                      // a node was lost: this one is node 1 of 2 now
  restart.num_nodes = 2;
  CHECK(air::format_control_message(restart) == "restart 2 40001 1 2\n");
  CHECK(round_trip(restart).node_rank == 1);
  CHECK(round_trip(restart).num_nodes == 2);
  ControlMessage nodes;
  nodes.kind = Kind::nodes;
  nodes.text = "host-a host-b";
  CHECK(air::format_control_message(nodes) == "nodes host-a host-b\n");
  CHECK(round_trip(nodes).text == "host-a host-b");
  ControlMessage c10d_hello;
  c10d_hello.kind = Kind::hello;
  c10d_hello.node_rank = -1; // c10d: node 0 assigns one
  c10d_hello.num_nodes = 3;
  c10d_hello.ranks_per_node = 2;
  c10d_hello.name = "gpu7";
  CHECK(air::format_control_message(c10d_hello) == "hello 2 -1 3 2 gpu7\n");
  CHECK(round_trip(c10d_hello).node_rank == -1);
  for (Kind k : {Kind::heartbeat, Kind::finish, Kind::stop}) {
    ControlMessage m;
    m.kind = k;
    CHECK(round_trip(m).kind == k);
  }
  ControlMessage done;
  done.kind = Kind::done;
  done.node_rank = 5;
  CHECK(round_trip(done).node_rank == 5);
}

TEST_CASE("malformed control messages are errors quoting the line", "[control]") {
  CHECK(air::parse_control_message("hello 1 1 2 2 x").error().message ==
        "control message 'hello 1 1 2 2 x': protocol version 1, this air-run speaks 2");
  CHECK(air::parse_control_message("hello 2 x 2 2 n").error().message ==
        "control message 'hello 2 x 2 2 n': bad number 'x'");
  CHECK(air::parse_control_message("over 1 2").error().message ==
        "control message 'over 1 2': expected 'over NODE 0|1'");
  CHECK(air::parse_control_message("restart 1").error().message ==
        "control message 'restart 1': expected 'restart ATTEMPT MASTER_PORT [NODE_RANK NUM_NODES]'");
  CHECK_FALSE(air::parse_control_message("restart 1 2 3").ok());
  CHECK_FALSE(air::parse_control_message("restart 1 2 3 4 5").ok());
  // Found by the fuzzer: a rank outside the nodes left would not survive a round trip.
  CHECK_FALSE(air::parse_control_message("restart 1 2 -2 0").ok());
  CHECK_FALSE(air::parse_control_message("restart 1 2 2 2").ok());
  CHECK(air::parse_control_message("hello 1 1 2").error().message ==
        "control message 'hello 1 1 2': expected 'hello VERSION NODE NODES RANKS NAME'");
  CHECK(air::parse_control_message("fail 1 2").error().message ==
        "control message 'fail 1 2': expected 'fail NODE RANK CODE NAME TEXT'");
  CHECK(air::parse_control_message("GET / HTTP/1.1").error().message ==
        "control message 'GET / HTTP/1.1': unknown message");
  CHECK(air::parse_control_message("start abc").error().message ==
        "control message 'start abc': expected 'start NODE NODES MASTER_PORT RUN_ID [MLFLOW_EXPERIMENT_ID "
        "MLFLOW_RUN_ID]'");
}

TEST_CASE("two agents join, node 0's run id wins, and a success is agreed", "[control]") {
  auto [node0, node1] = join_two(air_test::free_port());
  CHECK(node0->run_id() == "run-from-node0");
  CHECK(node1->run_id() == "run-from-node0");

  // Both succeed: node 1 says done and waits for node 0's finish.
  auto later = std::async(std::launch::async, [&node1 = node1] {
    air::RunOutcome ok;
    node1->finish(ok);
    return ok;
  });
  air::RunOutcome mine;
  node0->finish(mine);
  const air::RunOutcome theirs = later.get();
  CHECK(mine.status == air::RunOutcome::Status::succeeded);
  CHECK(theirs.status == air::RunOutcome::Status::succeeded);
  CHECK(theirs.exit_code() == 0);
}

TEST_CASE("a failure on node 1 reaches node 0 with its code and reason", "[control]") {
  auto [node0, node1] = join_two(air_test::free_port());
  node1->report_failure(5, 3, "rank 3 exited with exit code 5");
  const auto start = Clock::now();
  auto f = air_test::poll_channel(*node0, 3s);
  REQUIRE(f.has_value());
  CHECK(Clock::now() - start < 1s);
  CHECK(f->node_rank == 1);
  CHECK(f->node_name == "beta");
  CHECK(f->rank == 3);
  CHECK(f->exit_code == 5);
  CHECK(f->reason == "rank 3 exited with exit code 5");
  // Taken by check() but its ranks then succeeded: finish still adopts it.
  air::RunOutcome outcome;
  node0->finish(outcome);
  CHECK(outcome.status == air::RunOutcome::Status::failed);
  CHECK(outcome.exit_code() == 5);
  CHECK(outcome.reason == "stopped because node 1 (beta) failed: rank 3 exited with exit code 5");
}

TEST_CASE("node 0's local failure aborts node 1", "[control]") {
  auto [node0, node1] = join_two(air_test::free_port());
  air::RunOutcome failed;
  failed.status = air::RunOutcome::Status::timed_out;
  failed.reason = "timed out after 1s";
  air_test::tell(*node0, air::NodeEvent::failed_with(failed));
  auto f = air_test::poll_channel(*node1, 3s);
  REQUIRE(f.has_value());
  CHECK(f->node_rank == 0);
  CHECK(f->node_name == "alpha");
  CHECK(f->exit_code == 124);
  CHECK(f->reason == "timed out after 1s");
}

TEST_CASE("node 1 that succeeded adopts node 0's later failure at the end", "[control]") {
  auto [node0, node1] = join_two(air_test::free_port());
  auto waiting = std::async(std::launch::async, [&node1 = node1] {
    air::RunOutcome ok;
    node1->finish(ok);
    return ok;
  });
  std::this_thread::sleep_for(200ms);
  air::RunOutcome failed;
  failed.status = air::RunOutcome::Status::interrupted;
  failed.interrupt_signal = 2;
  failed.reason = "interrupted by SIGINT";
  node0->finish(failed);
  const air::RunOutcome adopted = waiting.get();
  CHECK(adopted.status == air::RunOutcome::Status::failed);
  REQUIRE(adopted.remote_failure.has_value());
  CHECK(adopted.exit_code() == 130);
  CHECK(adopted.reason == "stopped because node 0 (alpha) failed: interrupted by SIGINT");
}

TEST_CASE("a silent or vanished agent is a failure", "[control]") {
  const int port = air_test::free_port();
  auto [node0, node1] = join_two(port);
  node1.reset(); // closes its socket without a word, as a killed agent's kernel would
  auto f = air_test::poll_channel(*node0, 3s);
  REQUIRE(f.has_value());
  CHECK(f->node_rank == 1);
  CHECK(f->exit_code == 1);
  CHECK(f->reason == "its agent closed the control connection (it exited or was killed)");
}

TEST_CASE("an agent that stops talking is noticed after the heartbeat timeout", "[control]") {
  const int port = air_test::free_port();
  auto server =
      std::async(std::launch::async, [port] { return air::ControlChannel::join(options_for(0, port)); });
  // A hand-made agent: authenticates, says hello, then never sends a heartbeat.
  const int fd = connect_loopback(port);
  authenticate(fd, "s3cret-join-token");
  const std::string hello = "hello 2 1 2 2 mute\n";
  REQUIRE(::send(fd, hello.data(), hello.size(), 0) == static_cast<ssize_t>(hello.size()));
  Joined node0 = server.get();
  REQUIRE(node0.ok());
  const auto start = Clock::now();
  auto f = air_test::poll_channel(**node0, 3s);
  REQUIRE(f.has_value());
  CHECK(Clock::now() - start >= 400ms);
  CHECK(f->node_name == "mute");
  CHECK(f->reason == "no word from its agent for 500ms");
  ::close(fd);
}

TEST_CASE("an agent that was frozen names itself as the lost node, not node 0", "[control]") {
  auto [node0, node1] = join_two(air_test::free_port());
  CHECK_FALSE(air_test::poll_channel(*node1, 100ms).has_value()); // a pass before the freeze
  // Node 1 is frozen (no pass, no heartbeat): node 0 counts it as lost.
  auto lost = air_test::poll_channel(*node0, 3s);
  REQUIRE(lost.has_value());
  CHECK(lost->node_name == "beta");
  std::this_thread::sleep_for(300ms);
  // Node 1 wakes to node 0's closed connection: it was the one lost.
  auto f = air_test::poll_channel(*node1, 3s);
  REQUIRE(f.has_value());
  INFO(f->reason);
  CHECK(f->node_rank == 1);
  CHECK(f->node_name == "beta");
  CHECK(f->reason.rfind("its agent was frozen for ", 0) == 0);
}

TEST_CASE("disagreeing nodes are refused, naming the node, on both sides", "[control]") {
  const int port = air_test::free_port();
  auto server =
      std::async(std::launch::async, [port] { return air::ControlChannel::join(options_for(0, port)); });
  Joined client = air::ControlChannel::join(options_for(1, port, 3));
  Joined node0 = server.get();
  const std::string expected =
      "node 1 (beta) runs 3 rank(s) but node 0 (alpha) runs 2: every node must run the "
      "same number of ranks (--num-accelerators / --cpu-ranks)";
  REQUIRE_FALSE(node0.ok());
  REQUIRE_FALSE(client.ok());
  CHECK(node0.error().message == expected);
  CHECK(client.error().message == expected);
  CHECK(node0.error().kind == air::ErrorKind::usage);
  CHECK(client.error().kind == air::ErrorKind::usage);
}

TEST_CASE("a node that never joins is named after the join timeout", "[control]") {
  auto o = options_for(0, air_test::free_port());
  o.join_timeout = 300ms;
  o.node_names = {"alpha", "beta"};
  const auto start = Clock::now();
  Joined node0 = air::ControlChannel::join(o);
  REQUIRE_FALSE(node0.ok());
  CHECK(Clock::now() - start >= 300ms);
  CHECK(node0.error().kind == air::ErrorKind::system);
  CHECK(node0.error().message ==
        "node 1 (beta) did not join within 300ms (node 0's agent waited on control port " +
            std::to_string(o.port) + ")");

  auto c = options_for(1, o.port);
  c.join_timeout = 300ms;
  Joined node1 = air::ControlChannel::join(c);
  REQUIRE_FALSE(node1.ok());
  CHECK(node1.error().message == "could not reach node 0's agent at 127.0.0.1:" + std::to_string(o.port) +
                                     " within 300ms: Connection refused");
}

TEST_CASE("strangers on the control port cannot join, abort the join or inject text", "[control][auth]") {
  const int port = air_test::free_port();
  auto server =
      std::async(std::launch::async, [port] { return air::ControlChannel::join(options_for(0, port)); });
  // 1: no authentication at all, a hello that would abort the join (node 7 of 9).
  const int bare = connect_loopback(port);
  CHECK(air::parse_challenge(read_line(bare)).has_value());
  send_text(bare, "hello 1 7 9 2 intruder\n");
  // 2: the wrong token, posing as node 1.
  const int wrong = connect_loopback(port);
  authenticate(wrong, "guessed-token");
  send_text(wrong, "hello 1 1 2 2 beta\n");
  // 3: a flood without newlines.
  const int flood = connect_loopback(port);
  send_text(flood, std::string(100'000, 'x'));
  CHECK(read_line(bare).rfind("refuse 2 ", 0) == 0);
  CHECK(read_line(wrong).rfind("refuse 2 ", 0) == 0);
  CHECK(read_line(bare).empty()); // then closed
  // The real node 1 still joins, and the job starts.
  Joined client = air::ControlChannel::join(options_for(1, port));
  Joined node0 = server.get();
  INFO((node0 ? "" : node0.error().message) << (client ? "" : client.error().message));
  REQUIRE(node0.ok());
  REQUIRE(client.ok());
  CHECK((*client)->run_id() == "run-from-node0");
  ::close(bare);
  ::close(wrong);
  ::close(flood);
}

TEST_CASE("an agent with another join token is refused with a clear error", "[control][auth]") {
  const int port = air_test::free_port();
  auto o0 = options_for(0, port);
  o0.join_timeout = 2s;
  auto server = std::async(std::launch::async, [o0] { return air::ControlChannel::join(o0); });
  auto o1 = options_for(1, port);
  o1.join_token = "another-token";
  Joined client = air::ControlChannel::join(o1);
  REQUIRE_FALSE(client.ok());
  CHECK(client.error().message.find("wrong join token") != std::string::npos);
  Joined node0 = server.get();
  REQUIRE_FALSE(node0.ok()); // node 1 never joined
  CHECK(node0.error().message.find("failed authentication") != std::string::npos);
}

TEST_CASE("an agent does not believe a node 0 that cannot prove the token", "[control][auth]") {
  const int port = air_test::free_port();
  // A fake node 0: sends a challenge, then `start` without a proof.
  auto listener = std::async(std::launch::async, [port] {
    const int l = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)); // NOLINT
    ::listen(l, 1);
    const int c = ::accept(l, nullptr, nullptr);
    const std::string lines = "challenge 0123456789abcdef0123456789abcdef\nstart fake-run\n";
    ::send(c, lines.data(), lines.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(500ms);
    ::close(c);
    ::close(l);
  });
  Joined client = air::ControlChannel::join(options_for(1, port));
  listener.get();
  REQUIRE_FALSE(client.ok());
  INFO(client.error().message);
  CHECK(client.error().message.find("could not prove it holds this job's join token") != std::string::npos);
}

TEST_CASE("peer text loses its control characters", "[control][auth]") {
  CHECK(air::strip_control_characters("a\x1b[2Jb\r\n\x7f") == "a?[2Jb???");
  CHECK(air::strip_control_characters("x\xc2\x9b"
                                      "31my") == "x?31my"); // C1 CSI
  CHECK(air::strip_control_characters("caf\xc3\xa9") == "caf\xc3\xa9");
}

TEST_CASE("silent connections filling node 0's queue do not lock out a real node", "[control][auth]") {
  const int port = air_test::free_port();
  auto server =
      std::async(std::launch::async, [port] { return air::ControlChannel::join(options_for(0, port)); });
  std::vector<int> silent;
  for (int i = 0; i < 80; ++i) silent.push_back(connect_loopback(port));
  Joined client = air::ControlChannel::join(options_for(1, port));
  Joined node0 = server.get();
  INFO((node0 ? "" : node0.error().message) << (client ? "" : client.error().message));
  CHECK(node0.ok());
  CHECK(client.ok());
  for (int fd : silent) ::close(fd);
}

TEST_CASE("after a failure every node agrees on a restart with node 0's port", "[control]") {
  auto [node0, node1] = join_two(air_test::free_port());
  node1->report_failure(3, 2, "rank 2 exited with exit code 3");
  REQUIRE(air_test::poll_channel(*node0, 2s).has_value());
  auto later = std::async(std::launch::async, [&node1 = node1] {
    air::RunOutcome failed;
    failed.status = air::RunOutcome::Status::failed;
    failed.root_cause_rank = 2;
    node1->settle(failed);
    return node1->agree_restart(failed, true, 1, 0);
  });
  air::RunOutcome mine;
  mine.status = air::RunOutcome::Status::failed;
  mine.remote_failure = air::RemoteFailure{};
  node0->settle(mine);
  CHECK(node0->agree_restart(mine, true, 1, 41234) == std::optional<int>(41234));
  CHECK(later.get() == std::optional<int>(41234));
  CHECK(node1->master_port() == 41234);

  // The next attempt starts clean: a failure there is seen again.
  node0->report_failure(5, 0, "rank 0 exited with exit code 5");
  const auto f = air_test::poll_channel(*node1, 2s);
  REQUIRE(f.has_value());
  CHECK(f->exit_code == 5);
}

TEST_CASE("a node that may not restart stops every node", "[control]") {
  auto [node0, node1] = join_two(air_test::free_port());
  auto later = std::async(std::launch::async, [&node1 = node1] {
    air::RunOutcome interrupted;
    interrupted.status = air::RunOutcome::Status::interrupted;
    interrupted.interrupt_signal = 2;
    node1->settle(interrupted);
    return node1->agree_restart(interrupted, false, 1, 0);
  });
  REQUIRE(air_test::poll_channel(*node0, 2s).has_value());
  air::RunOutcome mine;
  mine.status = air::RunOutcome::Status::failed;
  node0->settle(mine);
  CHECK_FALSE(node0->agree_restart(mine, true, 1, 41235).has_value());
  CHECK_FALSE(later.get().has_value());
}

TEST_CASE("a node's word on restarting that comes with its failure is not lost", "[control]") {
  // Node 1 is interrupted and at once says it may not restart; node 0 is still
  // stopping its ranks and reads both lines in one go. It must still know
  // node 1's answer when it comes to agree (it once waited for it forever).
  auto [node0, node1] = join_two(air_test::free_port());
  auto later = std::async(std::launch::async, [&node1 = node1] {
    air::RunOutcome interrupted;
    interrupted.status = air::RunOutcome::Status::interrupted;
    interrupted.interrupt_signal = 15;
    node1->settle(interrupted);
    return node1->agree_restart(interrupted, false, 2, 0);
  });
  std::this_thread::sleep_for(300ms); // `fail` and `over` both wait in node 0's socket
  REQUIRE(air_test::poll_channel(*node0, 2s).has_value());
  air::RunOutcome mine;
  mine.status = air::RunOutcome::Status::failed;
  mine.remote_failure = air::RemoteFailure{};
  node0->settle(mine);
  const auto start = Clock::now();
  CHECK_FALSE(node0->agree_restart(mine, true, 2, 41236).has_value());
  CHECK(Clock::now() - start < 2s);
  CHECK_FALSE(later.get().has_value());
}

TEST_CASE("c10d: node ranks in order of arrival, the binder is node 0", "[control]") {
  const int port = air_test::free_port();
  const auto c10d = [port](const char* name) {
    air::ControlOptions o = options_for(0, port);
    o.c10d = true;
    o.num_nodes = 3;
    o.node_name = name;
    o.master_port = 30000;
    return o;
  };
  auto host = std::async(std::launch::async, [&] { return air::ControlChannel::join(c10d("first")); });
  std::this_thread::sleep_for(200ms); // "first" binds the port before the others try
  auto second = std::async(std::launch::async, [&] { return air::ControlChannel::join(c10d("second")); });
  std::this_thread::sleep_for(200ms);
  Joined third = air::ControlChannel::join(c10d("third"));
  Joined h = host.get();
  Joined s = second.get();
  REQUIRE(h.ok());
  REQUIRE(s.ok());
  REQUIRE(third.ok());
  CHECK((*h)->node_rank() == 0);
  CHECK((*s)->node_rank() == 1);
  CHECK((*third)->node_rank() == 2);
  CHECK((*third)->num_nodes() == 3);
  CHECK((*third)->master_port() == 30000);
  CHECK((*s)->run_id() == "run-from-node0");
}

TEST_CASE("c10d MIN:MAX starts with MIN nodes after the last call", "[control]") {
  const int port = air_test::free_port();
  const auto c10d = [port](const char* name) {
    air::ControlOptions o = options_for(0, port);
    o.c10d = true;
    o.num_nodes = 4;
    o.min_nodes = 2;
    o.last_call_timeout = 300ms;
    o.node_name = name;
    return o;
  };
  const auto start = Clock::now();
  auto host = std::async(std::launch::async, [&] { return air::ControlChannel::join(c10d("first")); });
  std::this_thread::sleep_for(100ms);
  Joined other = air::ControlChannel::join(c10d("second"));
  Joined h = host.get();
  REQUIRE(h.ok());
  REQUIRE(other.ok());
  CHECK((*h)->num_nodes() == 2);
  CHECK((*other)->num_nodes() == 2);
  CHECK(Clock::now() - start >= 300ms);
}

TEST_CASE("hang messages survive a round trip", "[control][hang]") {
  ControlMessage quiet;
  quiet.kind = Kind::quiet;
  quiet.node_rank = 2;
  CHECK(air::format_control_message(quiet) == "quiet 2\n");
  CHECK(round_trip(quiet).node_rank == 2);
  ControlMessage where;
  where.kind = Kind::where;
  where.round = 7;
  CHECK(air::format_control_message(where) == "where 7\n");
  CHECK(round_trip(where).round == 7);

  ControlMessage place;
  place.kind = Kind::place;
  place.round = 3;
  place.node_rank = 1;
  place.count = 2;
  air::HangRank& p = place.place;
  p.rank = 3;
  p.counted = true;
  p.steps = 12345678901234ULL;
  p.collective_seq = 3;
  p.place = "stuck here\nat stuck.py:7";
  CHECK(air::format_control_message(place) ==
        "place 3 1 2 3 110 12345678901234 3 0 - - - - - stuck here at stuck.py:7\n");
  const auto outside = round_trip(place);
  CHECK(outside.kind == Kind::place);
  CHECK(outside.round == 3);
  CHECK(outside.node_rank == 1);
  CHECK(outside.count == 2);
  CHECK(outside.place.rank == 3);
  CHECK(outside.place.node == 1);
  CHECK(outside.place.running);
  CHECK(outside.place.counted);
  CHECK_FALSE(outside.place.in_collective);
  CHECK(outside.place.steps == 12345678901234ULL);
  CHECK(outside.place.collective_seq == 3);
  CHECK_FALSE(outside.place.nccl_enqueued.has_value());
  CHECK(outside.place.since.empty());
  CHECK(outside.place.collective.empty());
  CHECK(outside.place.place == "stuck here at stuck.py:7");

  p.rank = 2;
  p.in_collective = true;
  p.collective = "all_reduce";
  p.collective_seq = 4;
  p.waiting_s = 2.5;
  p.since = "12:01:03";
  p.nccl_enqueued = 11;
  p.nccl_op = "nccl:all_reduce";
  p.nccl_state = "started";
  p.place = "";
  const auto inside = round_trip(place);
  CHECK(inside.place.in_collective);
  CHECK(inside.place.collective == "all_reduce");
  CHECK(inside.place.waiting_s == 2.5);
  CHECK(inside.place.since == "12:01:03");
  CHECK(inside.place.nccl_enqueued == std::optional<std::uint64_t>(11));
  CHECK(inside.place.nccl_op == "nccl:all_reduce");
  CHECK(inside.place.nccl_state == "started");
  CHECK(inside.place.place.empty());

  // A long place is cut, never splitting a UTF-8 character, so the line stays short.
  p.place = std::string(air::k_max_place_text - 1, 'x') + "\xc3\xa9" + std::string(5000, 'y');
  p.collective = std::string(500, 'c');
  const std::string line = air::format_control_message(place);
  CHECK(line.size() < 2048);
  const auto cut = round_trip(place);
  CHECK(cut.place.place == std::string(air::k_max_place_text - 1, 'x'));
  CHECK(cut.place.collective.size() == air::k_max_place_word);

  ControlMessage hung;
  hung.kind = Kind::hung;
  hung.node_rank = 0;
  hung.rank = 3;
  hung.exit_code = 124;
  hung.name = "alpha";
  hung.text = "hung: no progress for 4s; the others wait for rank 3";
  CHECK(air::format_control_message(hung) ==
        "hung 0 3 124 alpha hung: no progress for 4s; the others wait for rank 3\n");
  CHECK(round_trip(hung).kind == Kind::hung);
  CHECK(round_trip(hung).exit_code == 124);

  p.waiting_s = std::numeric_limits<double>::quiet_NaN(); // never a number out of range
  CHECK(round_trip(place).place.waiting_s == 0);
  p.waiting_s = 1e300;
  CHECK(round_trip(place).place.waiting_s == 999'999.999);

  ControlMessage work;
  work.kind = Kind::work;
  work.round = 3;
  work.node_rank = 1;
  work.place.rank = 2;
  work.place.working = true;
  CHECK(air::format_control_message(work) == "work 3 1 2 10\n");
  const auto w = round_trip(work);
  CHECK(w.kind == Kind::work);
  CHECK(w.round == 3);
  CHECK(w.node_rank == 1);
  CHECK(w.place.rank == 2);
  CHECK(w.place.node == 1);
  CHECK(w.place.working);
  CHECK_FALSE(w.place.exited_ok);
  work.place.working = false;
  work.place.exited_ok = true;
  CHECK(air::format_control_message(work) == "work 3 1 2 01\n");
  CHECK(round_trip(work).place.exited_ok);
  ControlMessage busy;
  busy.kind = Kind::busy;
  busy.round = 4;
  CHECK(air::format_control_message(busy) == "busy 4\n");
  CHECK(round_trip(busy).round == 4);
  CHECK_FALSE(air::parse_control_message("busy 0").ok());
  CHECK_FALSE(air::parse_control_message("work 3 1 2 1").ok());    // one flag
  CHECK_FALSE(air::parse_control_message("work 3 1 2 12").ok());   // bad flag
  CHECK_FALSE(air::parse_control_message("work 3 1 2 10 x").ok()); // more words
  CHECK_FALSE(air::parse_control_message("work 0 1 2 10").ok());   // no round 0

  CHECK_FALSE(air::parse_control_message("where 0").ok());
  CHECK_FALSE(air::parse_control_message("quiet -1").ok());
  CHECK_FALSE(air::parse_control_message("place 1 1 2 3 110 5 3 0 - - - -").ok());     // words missing
  CHECK_FALSE(air::parse_control_message("place 1 1 2 3 120 5 3 0 - - - - - x").ok()); // bad flags
  CHECK_FALSE(air::parse_control_message("place 1 1 0 3 110 5 3 0 - - - - - x").ok()); // no ranks
  CHECK_FALSE(air::parse_control_message("place 1 1 2 3 110 5 3 0 - x - - - x").ok()); // NCCL_SEQ
  CHECK(air::parse_control_message("place 1 1 2 3 110 5 3 0 - - - - - ").ok());        // no place known
}

namespace {

/// Polls both channels like their supervisors do, answering `where` with
/// `places[node]`, until node 0 has the job's places or `limit` passes.
std::optional<air::JobPlaces> gather(air::ControlChannel& node0, air::ControlChannel& node1,
                                     const std::vector<air::HangRank> (&places)[2],
                                     std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    std::vector<pollfd> fds;
    for (int fd : node0.poll_fds()) fds.push_back({fd, POLLIN, 0});
    for (int fd : node1.poll_fds()) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 20);
    for (auto& e : air_test::take_events(node1)) {
      REQUIRE(e.kind != air::JobEvent::Kind::failed);
      CHECK(e.kind != air::JobEvent::Kind::places); // only node 0 puts the picture together
      if (e.kind == air::JobEvent::Kind::places_asked)
        air_test::tell(node1, air::NodeEvent::placed_ranks(places[1]));
    }
    for (auto& e : air_test::take_events(node0)) {
      REQUIRE(e.kind != air::JobEvent::Kind::failed);
      if (e.kind == air::JobEvent::Kind::places_asked)
        air_test::tell(node0, air::NodeEvent::placed_ranks(places[0]));
      if (e.kind == air::JobEvent::Kind::places) return std::move(e.places);
    }
  }
  return std::nullopt;
}

air::HangRank place_of(int rank, bool in_collective) {
  air::HangRank r;
  r.rank = rank;
  r.counted = true;
  r.in_collective = in_collective;
  r.collective = in_collective ? "all_reduce" : "";
  r.collective_seq = in_collective ? 4 : 3;
  r.since = in_collective ? "12:01:03" : "";
  r.place = in_collective ? "<module> at stuck.py:16" : "stuck_here at stuck.py:7";
  return r;
}

} // namespace

TEST_CASE("a quiet node 1 gets node 0 the job's places, and a hang stop ends node 1 as hung",
          "[control][hang]") {
  auto [node0, node1] = join_two(air_test::free_port());
  CHECK(node0->job_wide_hangs());
  CHECK(node1->job_wide_hangs());
  const std::vector<air::HangRank> places[2] = {{place_of(0, true), place_of(1, true)},
                                                {place_of(2, true), place_of(3, false)}};
  // Node 1's diagnosis before node 0 asked goes nowhere; node 0's question brings it.
  air_test::tell(*node1, air::NodeEvent::placed_ranks(places[1]));
  air_test::tell(*node1, air::NodeEvent::quiet_ranks());
  const auto start = Clock::now();
  auto job = gather(*node0, *node1, places, 5s);
  REQUIRE(job.has_value());
  CHECK(Clock::now() - start < 3s); // every node answered: no waiting out the window
  REQUIRE(job->ranks.size() == 4);
  CHECK(job->missing_nodes.empty());
  CHECK(job->ranks[3].node == 1);
  CHECK(air::diagnose_job_hang(*job).laggards == std::vector<int>{3});

  // A second quiet spell, on node 0 this time: a new round, asked again.
  air_test::tell(*node0, air::NodeEvent::quiet_ranks());
  job = gather(*node0, *node1, places, 5s);
  REQUIRE(job.has_value());
  CHECK(job->ranks.size() == 4);

  air::RunOutcome hung;
  hung.status = air::RunOutcome::Status::hung;
  hung.reason = "hung: no progress for 4s; the others wait for rank 3";
  air_test::tell(*node0, air::NodeEvent::failed_with(hung));
  auto f = air_test::poll_channel(*node1, 3s);
  REQUIRE(f.has_value());
  CHECK(f->hung);
  CHECK(f->exit_code == 124);
  CHECK(air::remote_failure_reason(*f) ==
        "stopped because node 0 (alpha) found the job hung: no progress for 4s; the others wait for rank 3");
}

TEST_CASE("node 1's work reading reaches node 0 with its places, and node 0's no-hang reaches node 1",
          "[control][hang][quiet]") {
  auto [node0, node1] = join_two(air_test::free_port());
  // Rank 2, on node 1, saves a checkpoint (its node measured it working);
  // node 0's ranks wait at the barrier for it.
  std::vector<air::HangRank> places[2] = {{place_of(0, true), place_of(1, true)},
                                          {place_of(2, false), place_of(3, true)}};
  places[1][0].working = true;
  air_test::tell(*node0, air::NodeEvent::quiet_ranks());
  auto job = gather(*node0, *node1, places, 5s);
  REQUIRE(job.has_value());
  REQUIRE(job->ranks.size() == 4);
  CHECK(job->ranks[2].working);
  CHECK_FALSE(job->ranks[3].working);
  CHECK(air::judge_job_quiet(*job).kind == air::Quiet::working);

  // Node 0 finds no hang: node 1 hears it, once, for the round it answered.
  const auto hears_not_hung = [&node0, &node1](std::chrono::milliseconds limit) {
    bool heard = false;
    const auto end = Clock::now() + limit;
    while (!heard && Clock::now() < end) {
      for (auto& e : air_test::take_events(*node0)) { // heartbeats go on
        REQUIRE(e.kind != air::JobEvent::Kind::failed);
        CHECK(e.kind != air::JobEvent::Kind::not_hung);
      }
      for (auto& e : air_test::take_events(*node1)) {
        REQUIRE(e.kind != air::JobEvent::Kind::failed);
        heard = heard || e.kind == air::JobEvent::Kind::not_hung;
      }
      std::this_thread::sleep_for(20ms);
    }
    return heard;
  };
  air_test::tell(*node0, air::NodeEvent::no_hang_found());
  CHECK(hears_not_hung(3s));

  // Node 1 goes quiet again while node 0's verdict on its last places is on
  // its way: the verdict is stale, node 1's new diagnosis stands.
  air_test::tell(*node0, air::NodeEvent::quiet_ranks()); // round 2 on node 0's own word
  job = gather(*node0, *node1, places, 5s);
  REQUIRE(job.has_value());
  air_test::tell(*node1, air::NodeEvent::quiet_ranks());
  air_test::tell(*node0, air::NodeEvent::no_hang_found());
  CHECK_FALSE(hears_not_hung(1s));
}

TEST_CASE("node 0 names a node that never sends its places after the wait", "[control][hang]") {
  auto [node0, node1] =
      join_two(air_test::free_port(), [](air::ControlOptions& o) { o.places_wait = 1500ms; });
  const std::vector<air::HangRank> places[2] = {{place_of(0, true), place_of(1, true)}, {}};
  air_test::tell(*node0, air::NodeEvent::quiet_ranks());
  // Node 1 has no ranks to tell of: node 0 waits out its window, then goes on with what it has.
  const auto start = Clock::now();
  auto job = gather(*node0, *node1, places, 5s);
  REQUIRE(job.has_value());
  CHECK(Clock::now() - start >= 1400ms);
  CHECK(job->missing_nodes == std::vector<int>{1});
  CHECK(air::diagnose_job_hang(*job).line.find("node 1 sent no places") != std::string::npos);
}

TEST_CASE("preemption messages survive a round trip", "[control][preempt]") {
  ControlMessage preempt;
  preempt.kind = Kind::preempt;
  preempt.node_rank = 1;
  preempt.signal = 15;
  preempt.grace_ms = 30000;
  preempt.count = 2;
  preempt.steps = 12345678901ULL;
  preempt.rate_milli = 20500;
  CHECK(air::format_control_message(preempt) == "preempt 1 15 30000 2 12345678901 20500\n");
  const auto p = round_trip(preempt);
  CHECK(p.kind == Kind::preempt);
  CHECK(p.node_rank == 1);
  CHECK(p.signal == 15);
  CHECK(p.grace_ms == 30000);
  CHECK(p.count == 2);
  CHECK(p.steps == 12345678901ULL);
  CHECK(p.rate_milli == 20500);

  ControlMessage count;
  count.kind = Kind::count;
  CHECK(air::format_control_message(count) == "count\n");
  CHECK(round_trip(count).kind == Kind::count);

  ControlMessage counted;
  counted.kind = Kind::counted;
  counted.node_rank = 2;
  counted.count = 0; // a node whose ranks never poll answers too
  counted.steps = 0;
  counted.rate_milli = 0;
  CHECK(air::format_control_message(counted) == "counted 2 0 0 0\n");
  CHECK(round_trip(counted).node_rank == 2);

  ControlMessage stopat;
  stopat.kind = Kind::stopat;
  stopat.steps = 271;
  stopat.signal = 10;
  stopat.grace_ms = 29500;
  stopat.node_rank = 1;
  CHECK(air::format_control_message(stopat) == "stopat 271 10 29500 1\n");
  const auto s = round_trip(stopat);
  CHECK(s.kind == Kind::stopat);
  CHECK(s.steps == 271);
  CHECK(s.signal == 10);
  CHECK(s.grace_ms == 29500);
  CHECK(s.node_rank == 1);

  // Numbers out of range are clamped so that the line still parses.
  stopat.steps = std::numeric_limits<std::uint64_t>::max();
  stopat.grace_ms = -5;
  CHECK(round_trip(stopat).steps == 999'999'999'999'999ULL);
  CHECK(round_trip(stopat).grace_ms == 0);

  CHECK_FALSE(air::parse_control_message("preempt 1 15 30000 2 12").ok());            // words missing
  CHECK_FALSE(air::parse_control_message("preempt 1 15 30000 2 12 5 x").ok());        // one too many
  CHECK_FALSE(air::parse_control_message("preempt 1 0 30000 2 12 5").ok());           // no signal
  CHECK_FALSE(air::parse_control_message("preempt -1 15 30000 2 12 5").ok());         // no node
  CHECK_FALSE(air::parse_control_message("counted 1 2 -3 5").ok());                   // negative steps
  CHECK_FALSE(air::parse_control_message("counted 1 2 99999999999999999999 5").ok()); // too big
  CHECK_FALSE(air::parse_control_message("stopat 5 15 100").ok());                    // node missing
  CHECK_FALSE(air::parse_control_message("stopat 5 99 100 1").ok());                  // no such signal
  CHECK_FALSE(air::parse_control_message("count 3").ok());
}

namespace {

/// Polls both channels like their supervisors do, answering node 0's
/// question with `counts[node]`, until both nodes have the job's stop (node
/// 1's stays nullopt when `node1_answers` is false and it never gets one) or
/// `limit` passes.
std::pair<std::optional<air::JobStop>, std::optional<air::JobStop>>
decide(air::ControlChannel& node0, air::ControlChannel& node1, const air::NodeSteps (&counts)[2],
       std::chrono::milliseconds limit, bool node1_answers = true) {
  std::optional<air::JobStop> stop0, stop1;
  const auto end = Clock::now() + limit;
  while (Clock::now() < end && !(stop0 && stop1)) {
    std::vector<pollfd> fds;
    for (int fd : node0.poll_fds()) fds.push_back({fd, POLLIN, 0});
    for (int fd : node1.poll_fds()) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 20);
    for (auto& e : air_test::take_events(node1)) {
      REQUIRE(e.kind != air::JobEvent::Kind::failed);
      if (e.kind == air::JobEvent::Kind::counts_asked && node1_answers)
        air_test::tell(node1, air::NodeEvent::counted_steps(counts[1]));
      if (e.kind == air::JobEvent::Kind::stop) stop1 = e.stop;
    }
    for (auto& e : air_test::take_events(node0)) {
      REQUIRE(e.kind != air::JobEvent::Kind::failed);
      if (e.kind == air::JobEvent::Kind::counts_asked)
        air_test::tell(node0, air::NodeEvent::counted_steps(counts[0]));
      if (e.kind == air::JobEvent::Kind::stop) {
        CHECK_FALSE(stop0.has_value()); // handed over once
        stop0 = e.stop;
      }
    }
  }
  return {stop0, stop1};
}

} // namespace

TEST_CASE("a signal on node 1 gets one stop step from node 0 to both nodes", "[control][preempt]") {
  auto [node0, node1] = join_two(air_test::free_port());
  CHECK(node0->job_wide_preemption());
  CHECK(node1->job_wide_preemption());
  // Node 0's ranks are ahead and fast: node 1's own max + 1 (41) would be long passed.
  const air::NodeSteps counts[2] = {air_test::node_steps(0, 120, 50), air_test::node_steps(0, 40, 20)};
  air_test::tell(*node1, air::NodeEvent::preempted_by(15, counts[1], 30s));
  const auto start = Clock::now();
  auto [stop0, stop1] = decide(*node0, *node1, counts, 5s);
  REQUIRE(stop0.has_value());
  REQUIRE(stop1.has_value());
  CHECK(Clock::now() - start < 900ms); // every node answered: no waiting out counts_wait
  CHECK(stop0->stop_step == stop1->stop_step);
  CHECK(stop0->stop_step > 120 + 25); // node 0's 50 steps/s over at least the 0.5 s slack
  CHECK(stop0->stop_step < 120 + 75); // ... and not a second's worth of them on loopback
  CHECK(stop0->signal == 15);
  CHECK(stop1->signal == 15);
  CHECK(stop0->node == 1);
  CHECK(stop1->node == 1);
  CHECK(stop0->missing_nodes.empty());
  CHECK(stop1->grace > 28s);
  CHECK(stop1->grace <= 30s);
  // A later signal on node 0 finds the step picked: nothing new.
  air_test::tell(*node0, air::NodeEvent::preempted_by(15, counts[0], 30s));
  auto [again0, again1] = decide(*node0, *node1, counts, 300ms);
  CHECK_FALSE(again0.has_value());
  CHECK_FALSE(again1.has_value());
}

TEST_CASE("signals on both nodes at once make one decision", "[control][preempt]") {
  auto [node0, node1] = join_two(air_test::free_port());
  const air::NodeSteps counts[2] = {air_test::node_steps(0, 10, 5), air_test::node_steps(0, 12, 5)};
  air_test::tell(*node0, air::NodeEvent::preempted_by(15, counts[0], 20s));
  air_test::tell(*node1, air::NodeEvent::preempted_by(15, counts[1], 30s));
  auto [stop0, stop1] = decide(*node0, *node1, counts, 5s);
  REQUIRE(stop0.has_value());
  REQUIRE(stop1.has_value());
  CHECK(stop0->stop_step == stop1->stop_step);
  CHECK(stop0->stop_step >= 12 + 3);
  CHECK(stop0->node == 0);    // node 0's came first
  CHECK(stop1->grace <= 20s); // the first signal's grace period
}

TEST_CASE("node 0 decides without a node that does not answer, and names it", "[control][preempt]") {
  auto [node0, node1] =
      join_two(air_test::free_port(), [](air::ControlOptions& o) { o.counts_wait = 800ms; });
  const air::NodeSteps counts[2] = {air_test::node_steps(0, 30, 0), air_test::node_steps(0, 500, 0)};
  air_test::tell(*node0, air::NodeEvent::preempted_by(15, counts[0], 30s));
  const auto start = Clock::now();
  auto [stop0, stop1] = decide(*node0, *node1, counts, 5s, /*node1_answers=*/false);
  REQUIRE(stop0.has_value());
  REQUIRE(stop1.has_value()); // the silent node still gets the job's step
  CHECK(Clock::now() - start >= 700ms);
  CHECK(stop0->missing_nodes == std::vector<int>{1});
  CHECK(stop0->stop_step == 31); // node 1's 500 steps never came
  CHECK(stop1->stop_step == 31);
}

namespace {

/// A node's outcome after a stop for SIGUSR1 at step 7: `stopped` of its two asked ranks stopped there.
air::RunOutcome stopped_at_7(int stopped) {
  air::RunOutcome o;
  o.status = air::RunOutcome::Status::preempted;
  o.interrupt_signal = 10;
  air::PreemptionReport p;
  p.signal = 10;
  p.stop_step = 7;
  p.polling_ranks = {0, 1};
  p.deadline_s = 30;
  p.job_wide = true;
  for (int r = 0; r < stopped; ++r) p.stopped_ranks.push_back(r);
  o.preemption = p;
  return o;
}

/// Node 0 ends its stop at once; node 1's ranks take `save` longer (its
/// agent keeps talking meanwhile, as its supervisor does). Returns node 0's
/// outcome and whether its finish returned only after node 1's began.
std::pair<air::RunOutcome, bool> end_stop_with_slower_node1(int node1_stopped,
                                                            std::chrono::milliseconds save) {
  auto [node0, node1] = join_two(air_test::free_port());
  air::RunOutcome out0 = stopped_at_7(2);
  auto ended0 = std::async(std::launch::async, [&node0 = node0, &out0] {
    node0->finish(out0);
    return Clock::now();
  });
  const auto saved_at = Clock::now() + save;
  while (Clock::now() < saved_at) {
    (void)air_test::take_events(*node1); // node 0's abort among them: this node is stopping already
    std::this_thread::sleep_for(20ms);
  }
  const auto node1_ends = Clock::now();
  air::RunOutcome out1 = stopped_at_7(node1_stopped);
  node1->finish(out1);
  return {out0, ended0.get() >= node1_ends};
}

} // namespace

TEST_CASE("after a stop node 0 ends only once the slower node's ranks have exited",
          "[control][preempt][requeue]") {
  // 2.5 s: longer than a closing connection lingers (2 s), which alone once held node 0 back.
  auto [out0, after] = end_stop_with_slower_node1(2, 2500ms);
  CHECK(after);
  REQUIRE(out0.preemption.has_value());
  CHECK(out0.preemption->unsaved_nodes.empty());
  CHECK(air::requeue_verdict(*out0.preemption).requeue);
}

TEST_CASE("a node whose asked ranks did not all stop keeps node 0 from requeueing",
          "[control][preempt][requeue]") {
  auto [out0, after] = end_stop_with_slower_node1(1, 300ms);
  CHECK(after);
  REQUIRE(out0.preemption.has_value());
  CHECK(out0.preemption->unsaved_nodes == std::vector<int>{1});
  CHECK_FALSE(air::requeue_verdict(*out0.preemption).requeue);
}

TEST_CASE("stopped messages survive a round trip", "[control][preempt][requeue]") {
  ControlMessage m;
  m.kind = Kind::stopped;
  m.node_rank = 1;
  m.count = 2;
  m.stopped = 1;
  CHECK(air::format_control_message(m) == "stopped 1 2 1\n");
  const auto back = round_trip(m);
  CHECK(back.kind == Kind::stopped);
  CHECK(back.node_rank == 1);
  CHECK(back.count == 2);
  CHECK(back.stopped == 1);
  CHECK_FALSE(air::parse_control_message("stopped 1 2 3").ok()); // more stopped than asked
  CHECK_FALSE(air::parse_control_message("stopped 1 2").ok());
}

TEST_CASE("a token-holding agent cannot speak for another node", "[control][auth][forged]") {
  const int port = air_test::free_port();
  auto three = [port](int node_rank) {
    auto o = options_for(node_rank, port);
    o.num_nodes = 3;
    o.node_name = node_rank == 0 ? "alpha" : node_rank == 1 ? "beta" : "gamma";
    o.heartbeat_timeout = 10s; // the hand-made agent sends no heartbeats
    return o;
  };
  auto told = std::make_shared<std::vector<std::string>>();
  auto server = std::async(std::launch::async, [three, told] {
    auto o = three(0);
    o.notice = [told](const std::string& line) { told->push_back(line); };
    return air::ControlChannel::join(o);
  });
  auto real = std::async(std::launch::async, [three] { return air::ControlChannel::join(three(2)); });
  // Node 1 holds the join token and joins as itself...
  const int fd = connect_loopback(port);
  authenticate(fd, "s3cret-join-token");
  send_text(fd, "hello 2 1 3 2 beta\n");
  Joined node0 = server.get();
  Joined node2 = real.get();
  INFO((node0 ? "" : node0.error().message) << (node2 ? "" : node2.error().message));
  REQUIRE(node0.ok());
  REQUIRE(node2.ok());

  // ...then says node 2 went quiet, and that node 2 failed.
  send_text(fd, "quiet 2\n");
  send_text(fd, "fail 2 5 7 gamma forged failure\n");
  send_text(fd, "abort 2 5 7 gamma forged abort\n");
  // Neither a failure nor a hang round in node 2's name: no event at all.
  const auto events_within = [](air::ControlChannel& c, std::chrono::milliseconds limit) {
    std::vector<air::JobEvent> events;
    for (const auto end = Clock::now() + limit; Clock::now() < end;) {
      std::vector<pollfd> fds;
      for (int f : c.poll_fds()) fds.push_back({f, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 20);
      for (auto& e : air_test::take_events(c)) events.push_back(std::move(e));
    }
    return events;
  };
  CHECK(events_within(**node0, 600ms).empty());
  CHECK(events_within(**node2, 200ms).empty()); // node 2 was never asked for its places
  REQUIRE(told->size() == 1);                   // told once per connection
  CHECK(told->front().find("protocol violation: node 1 (beta) sent a message naming node 2") == 0);

  // What node 1 says of itself still counts.
  send_text(fd, "fail 1 3 9 beta rank 3 exited with exit code 9\n");
  auto f = air_test::poll_channel(**node0, 2s);
  REQUIRE(f.has_value());
  CHECK(f->node_rank == 1);
  CHECK(f->exit_code == 9);
  ::close(fd);
}
