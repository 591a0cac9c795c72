// The multi-node control connection: join barrier, failure fan-out,
// heartbeats and the final agreement, over one TCP socket per node.
#include "core/cluster/control.hpp"

#include "core/base/duration.hpp"
#include "core/base/exit_status.hpp"
#include "core/base/sha256.hpp"
#include "core/base/text.hpp"
#include "core/cluster/control_auth.hpp"
#include "core/cluster/control_message.hpp"
#include "core/cluster/join_admission.hpp"
#include "core/os/host.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

namespace air {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct ControlChannel::Peer {
  UniqueFd fd;
  std::string in;     ///< received bytes not yet split into lines
  int node_rank = -1; ///< -1 until its hello (node 0's side)
  std::string name;
  bool done = false;   ///< node 0's side: it said `done`
  bool closed = false; ///< EOF or a socket error: nothing more will come
  Clock::time_point last_heard{};
  std::string nonce;          ///< node 0's side: the challenge it sent
  std::string source;         ///< node 0's side: the address it connected from
  bool authenticated = false; ///< node 0's side: its `auth` checked out
  Clock::time_point connected{};
  /// Lines already read whose phase had ended when they came (the rest of a
  /// batch after `start` or `restart`): read_lines hands them out first, so a
  /// message that arrived together with another is never lost.
  std::vector<std::string> unread;
};

namespace {

/// A line longer than this is not our protocol: drop the connection.
constexpr std::size_t k_max_line = 8192;
/// How long closing waits for the peer's own close, so no unread byte turns
/// our close into a reset that could eat the last message.
constexpr milliseconds k_linger{2'000};
/// Pause between connection attempts while node 0's agent is not up yet.
constexpr milliseconds k_retry_interval{200};
/// Bytes taken from one socket per read: a peer that floods cannot keep the
/// agent reading (the rest waits in the kernel for the next poll).
constexpr std::size_t k_max_read_per_call = 65536;
/// Connections node 0 holds that have not said hello yet, in all and per
/// source address (core/cluster/join_admission.hpp): strangers can neither
/// exhaust its descriptors nor push a real node's connection out.
constexpr AdmissionLimits k_admission{64, 8, milliseconds(1'000)};
/// How long a connection may take to authenticate (a real agent needs one
/// round trip), and to authenticate and say hello.
constexpr milliseconds k_auth_timeout{5'000};
constexpr milliseconds k_hello_timeout{10'000};
/// Connections taken from the listener per wake, so a flood cannot keep
/// node 0 from reading the connections it holds.
constexpr int k_max_accepts_per_wake = 256;
/// Out of descriptors with none to spare: the listener rests this long
/// instead of waking the loop again at once.
constexpr milliseconds k_accept_pause{100};

/// 32 random hex digits for a join challenge.
std::string make_nonce() {
  unsigned char bytes[16] = {};
  std::size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    filled += static_cast<std::size_t>(n);
  }
  if (filled < sizeof bytes) return make_run_id() + make_run_id(); // /dev/urandom, else pid and clock
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

/// The address a connection comes from, without its port: what the
/// per-source limits count ("" when unknown).
std::string source_address(const sockaddr_storage& from) {
  char text[INET6_ADDRSTRLEN] = {};
  if (from.ss_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, &from, sizeof in6);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
  } else if (from.ss_family == AF_INET) {
    sockaddr_in in4{};
    std::memcpy(&in4, &from, sizeof in4);
    ::inet_ntop(AF_INET, &in4.sin_addr, text, sizeof text);
  }
  return text;
}

/// A descriptor held in reserve while the nodes join: when accept() fails for
/// want of descriptors, closing it lets node 0 take the waiting connection
/// and close it, instead of finding the listener readable again at once.
UniqueFd spare_descriptor() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

int poll_timeout(Clock::time_point now, Clock::time_point deadline) {
  const auto wait = std::chrono::ceil<milliseconds>(deadline - now).count();
  return static_cast<int>(std::clamp<long long>(wait, 0, 60'000));
}

int poll_retry(pollfd* fds, std::size_t n, int timeout_ms) {
  int r;
  do {
    r = ::poll(fds, n, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r;
}

/// Sends a whole (short) message without SIGPIPE, waiting briefly when the
/// socket buffer is full. false: the peer is gone or stuck.
bool send_all(int fd, const std::string& data) {
  std::size_t sent = 0;
  int stalls = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && stalls++ < 5) {
      pollfd p{fd, POLLOUT, 0};
      poll_retry(&p, 1, 100);
      continue;
    }
    return false;
  }
  return true;
}

bool send_message(ControlChannel::Peer& peer, const ControlMessage& m);

/// The names of a `nodes` line.
std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t space = text.find(' ', at);
    const std::size_t end = space == std::string::npos ? text.size() : space;
    if (end > at) names.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return names;
}

/// Reads whatever is ready; returns the complete lines. Marks the peer closed
/// on EOF, on an error, and on a line too long to be ours.
std::vector<std::string> read_lines(ControlChannel::Peer& peer) {
  std::vector<std::string> lines = std::move(peer.unread);
  peer.unread.clear();
  if (peer.closed) return lines;
  char buf[4096];
  for (std::size_t taken = 0; taken < k_max_read_per_call;) {
    const ssize_t n = ::recv(peer.fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      peer.in.append(buf, static_cast<std::size_t>(n));
      peer.last_heard = Clock::now();
      taken += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    peer.closed = true; // 0: EOF; <0: reset or another error
    break;
  }
  std::size_t start = 0;
  // Peer text reaches terminals and reports: no control characters survive.
  for (std::size_t nl; (nl = peer.in.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (nl - start > k_max_line) {
      peer.closed = true;
      break;
    }
    lines.push_back(strip_control_characters(std::string_view(peer.in).substr(start, nl - start)));
  }
  peer.in.erase(0, start);
  if (peer.in.size() > k_max_line) peer.closed = true;
  return lines;
}

bool send_message(ControlChannel::Peer& peer, const ControlMessage& m) {
  if (peer.closed) return false;
  return send_all(peer.fd.get(), format_control_message(m));
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// Listens on `port` on every interface (IPv6 dual stack, else IPv4).
Expected<UniqueFd> listen_on(int port, bool* in_use = nullptr) {
  int family = AF_INET6;
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    family = AF_INET;
    fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  }
  if (!fd) return sys_error("socket (control port)", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (family == AF_INET6) {
    int zero = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_addr = in6addr_any;
    sa.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)); // NOLINT
  } else {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    sa.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)); // NOLINT
  }
  if (rc != 0) {
    if (errno == EADDRINUSE) {
      if (in_use != nullptr) *in_use = true;
      return usage_error(fmt::format("control port {} is already in use on this node; choose another with "
                                     "--control-port (default: master port + 1) on every node",
                                     port));
    }
    return sys_error(fmt::format("bind (control port {})", port), errno);
  }
  if (::listen(fd.get(), 128) != 0) return sys_error("listen (control port)", errno);
  return fd;
}

/// One connection attempt to host:port within `timeout`; "" in `error` on success.
UniqueFd connect_once(const std::string& host, int port, milliseconds timeout, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    error = fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(rc));
    return UniqueFd();
  }
  UniqueFd result;
  for (addrinfo* ai = res; ai != nullptr && !result; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd) {
      error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = std::strerror(errno);
        continue;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      if (poll_retry(&p, 1, static_cast<int>(timeout.count())) <= 0) {
        error = "connection timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        error = std::strerror(err);
        continue;
      }
    }
    set_nodelay(fd.get());
    result = std::move(fd);
    error.clear();
  }
  ::freeaddrinfo(res);
  return result;
}

/// Writes a failure elsewhere into this node's outcome, so it exits with that node's code.
void adopt(RunOutcome& outcome, const RemoteFailure& failure) {
  outcome.status = failure.hung ? RunOutcome::Status::hung : RunOutcome::Status::failed;
  outcome.root_cause_rank = -1;
  outcome.reason = remote_failure_reason(failure);
  outcome.remote_failure = failure;
}

Error join_error(int code, std::string message) {
  return Error{code == 2 ? ErrorKind::usage : ErrorKind::system, std::move(message)};
}

} // namespace

ControlChannel::ControlChannel(ControlOptions options)
    : options_(std::move(options)), run_id_(options_.run_id),
      mlflow_experiment_id_(options_.mlflow_experiment_id), mlflow_run_id_(options_.mlflow_run_id),
      max_nodes_(options_.num_nodes) {}

ControlChannel::~ControlChannel() = default;

std::string ControlChannel::plain_name(int node_rank, const std::string& said) const {
  std::string name = said == "?" ? "" : said;
  if (node_rank >= 0 && static_cast<std::size_t>(node_rank) < options_.node_names.size())
    name = options_.node_names[static_cast<std::size_t>(node_rank)];
  if (node_rank == options_.node_rank) name = options_.node_name;
  return name;
}

std::string ControlChannel::name_of(int node_rank, const std::string& said) const {
  const std::string name = plain_name(node_rank, said);
  return name.empty() ? fmt::format("node {}", node_rank) : fmt::format("node {} ({})", node_rank, name);
}

int ControlChannel::take_interrupt() const {
  if (options_.interrupt_fd < 0) return 0;
  signalfd_siginfo info{};
  const ssize_t n = ::read(options_.interrupt_fd, &info, sizeof(info));
  return n == static_cast<ssize_t>(sizeof(info)) ? static_cast<int>(info.ssi_signo) : 0;
}

Expected<std::unique_ptr<ControlChannel>> ControlChannel::join(const ControlOptions& options,
                                                               int* interrupted_by) {
  std::unique_ptr<ControlChannel> channel(new ControlChannel(options));
  channel->master_port_ = options.master_port;
  UniqueFd listener;
  if (options.c10d) {
    // The first agent to bind the endpoint's port hosts the join and is node 0.
    channel->options_.node_rank = -1;
    if (options.may_host) {
      bool in_use = false;
      auto bound = listen_on(options.port, &in_use);
      if (bound) {
        listener = std::move(*bound);
        channel->options_.node_rank = 0;
      } else if (!in_use) {
        return bound.error();
      }
    }
  } else if (options.node_rank == 0) {
    auto bound = listen_on(options.port);
    if (!bound) return bound.error();
    listener = std::move(*bound);
  }
  const Status joined = listener ? channel->serve_join(std::move(listener)) : channel->client_join();
  if (interrupted_by != nullptr) *interrupted_by = channel->interrupted_by_;
  if (!joined) return joined.error();
  const auto now = Clock::now();
  for (auto& peer : channel->peers_) peer->last_heard = now;
  channel->next_heartbeat_ = now + options.heartbeat_interval;
  channel->running_ = true;
  return channel;
}

Status ControlChannel::serve_join(UniqueFd listener_fd) {
  const UniqueFd* listener = &listener_fd;
  const auto started = Clock::now();
  const auto deadline = started + options_.join_timeout;
  const int max_nodes = options_.num_nodes;
  const int min_nodes = options_.c10d && options_.min_nodes > 0 ? options_.min_nodes : max_nodes;
  // c10d with MIN:MAX: once MIN nodes are in, wait last_call_timeout for more (torchrun's last call).
  std::optional<Clock::time_point> last_call;
  const auto enough = [&](std::size_t others) {
    const int present = static_cast<int>(others) + 1;
    if (present >= max_nodes) return true;
    if (present < min_nodes) return false;
    if (!last_call) last_call = Clock::now() + options_.last_call_timeout;
    return Clock::now() >= *last_call;
  };
  std::vector<std::unique_ptr<Peer>> pending;  // connected, no hello yet
  std::map<int, std::unique_ptr<Peer>> joined; // by node rank
  std::string refused;                         // last stray connection we dropped, for the timeout message
  const JoinSecret secret{options_.join_token, options_.job_id};
  UniqueFd spare = spare_descriptor();
  Clock::time_point accept_resumes{}; // while later, the listener rests (out of descriptors)
  const auto waiting = [](const std::vector<std::unique_ptr<Peer>>& connections) {
    std::vector<WaitingConnection> view;
    for (const auto& p : connections) view.push_back({p->source, p->authenticated, p->connected});
    return view;
  };

  // Refuses everyone connected so far, so no agent waits for a start that will never come.
  const auto refuse_all = [&](int code, const std::string& message, Peer* also) {
    ControlMessage m;
    m.kind = ControlMessage::Kind::refuse;
    m.exit_code = code;
    m.text = message;
    for (auto& [rank, peer] : joined) send_message(*peer, m);
    if (also) send_message(*also, m);
    return join_error(code, message);
  };

  while (!enough(joined.size())) {
    const auto now = Clock::now();
    if (now >= deadline && options_.c10d) {
      return refuse_all(125,
                        fmt::format("only {} of at least {} nodes joined within {} (node 0's agent waited on "
                                    "port {}){}",
                                    joined.size() + 1, min_nodes, format_duration(options_.join_timeout),
                                    options_.port,
                                    refused.empty() ? "" : "; refused a connection: " + refused),
                        nullptr);
    }
    if (now >= deadline) {
      std::string missing;
      int count = 0;
      for (int r = 1; r < options_.num_nodes; ++r) {
        if (joined.count(r) != 0) continue;
        if (count++ < 8) missing += (missing.empty() ? "" : ", ") + name_of(r, "");
      }
      if (count > 8) missing += fmt::format(" and {} more", count - 8);
      return refuse_all(125,
                        fmt::format("{} did not join within {} (node 0's agent waited on control port {}){}",
                                    missing, format_duration(options_.join_timeout), options_.port,
                                    refused.empty() ? "" : "; refused a connection: " + refused),
                        nullptr);
    }
    // fd -1: poll passes over the listener while it rests.
    const bool resting = now < accept_resumes;
    std::vector<pollfd> fds{{resting ? -1 : listener->get(), POLLIN, 0}, {options_.interrupt_fd, POLLIN, 0}};
    for (auto& p : pending) fds.push_back({p->fd.get(), POLLIN, 0});
    for (auto& [rank, p] : joined) fds.push_back({p->fd.get(), POLLIN, 0});
    // Wake at least every second while connections wait, to drop silent ones.
    const auto wake = last_call ? std::min(deadline, *last_call) : deadline;
    int wait_ms = pending.empty() ? poll_timeout(now, wake) : std::min(poll_timeout(now, wake), 1000);
    if (resting) wait_ms = std::min(wait_ms, poll_timeout(now, accept_resumes));
    if (poll_retry(fds.data(), fds.size(), wait_ms) < 0)
      return refuse_all(125, std::string("poll (control join): ") + std::strerror(errno), nullptr);
    if (const int sig = take_interrupt(); sig != 0) {
      interrupted_by_ = sig;
      return refuse_all(128 + sig,
                        fmt::format("node 0's agent was interrupted by {} while waiting for the other nodes",
                                    signal_name(sig)),
                        nullptr);
    }

    if (fds[0].revents != 0) {
      for (int taken = 0; taken < k_max_accepts_per_wake; ++taken) {
        sockaddr_storage from{};
        socklen_t from_len = sizeof from;
        const int fd = ::accept4(listener->get(), reinterpret_cast<sockaddr*>(&from), &from_len, // NOLINT
                                 SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
          // No descriptor left while connections wait: the listener stays
          // readable, so polling it again would spin. Make room from the
          // busiest source, else take the connection with the spare
          // descriptor and close it (a real agent retries), else rest.
          if (auto drop = connection_to_drop(waiting(pending), Clock::now(), k_admission)) {
            refused = "a connection from " + pending[*drop]->source + " that did not authenticate";
            pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(*drop));
            continue;
          }
          if (spare) {
            spare.reset();
            const UniqueFd dropped(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
            spare = spare_descriptor();
            if (dropped) continue;
          }
          accept_resumes = Clock::now() + k_accept_pause;
        }
        if (fd < 0) break;
        UniqueFd connection(fd);
        const std::string source = source_address(from);
        const Admission admission = admit_connection(waiting(pending), source, Clock::now(), k_admission);
        if (admission.verdict == Admission::Verdict::refuse) continue; // closed: a real agent retries
        if (admission.verdict == Admission::Verdict::evict_then_admit)
          pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(admission.evict));
        set_nodelay(fd);
        auto peer = std::make_unique<Peer>();
        peer->fd = std::move(connection);
        peer->source = source;
        peer->connected = Clock::now();
        peer->nonce = make_nonce();
        if (!send_all(fd, format_challenge(peer->nonce))) peer->closed = true;
        pending.push_back(std::move(peer));
      }
    }
    // A joined agent that goes away before the start is a node lost before it began.
    for (auto& [rank, p] : joined) {
      for (const auto& line : read_lines(*p)) {
        // A joined agent that is interrupted before the start says so.
        auto m = parse_control_message(line);
        if (m && m->kind == ControlMessage::Kind::fail) {
          if (m->exit_code > 128 && m->exit_code < 128 + 65) interrupted_by_ = m->exit_code - 128;
          return refuse_all(m->exit_code, fmt::format("{} {}", name_of(rank, p->name), m->text), nullptr);
        }
      }
      if (p->closed) {
        return refuse_all(125,
                          fmt::format("{} left before the start (its agent closed the control connection)",
                                      name_of(rank, p->name)),
                          nullptr);
      }
    }
    for (auto& p : pending) {
      const auto lines = read_lines(*p);
      const auto age = Clock::now() - p->connected;
      if (!p->authenticated && lines.empty() && age > k_auth_timeout) {
        refused = fmt::format("a connection from {} that did not authenticate within {}", p->source,
                              format_duration(k_auth_timeout));
        p->closed = true;
        continue;
      }
      if (age > k_hello_timeout) {
        refused = fmt::format("a connection from {} that did not authenticate and say hello within {}",
                              p->source, format_duration(k_hello_timeout));
        p->closed = true;
        continue;
      }
      if (lines.empty()) continue;
      std::size_t next = 0; // the line that must be hello
      // Nothing a connection says counts before it proves it holds the join
      // token: a stranger is dropped without disturbing the join.
      if (!p->authenticated) {
        const auto auth = parse_auth(lines.front());
        if (!auth || !equal_in_constant_time(auth->proof,
                                             join_proof(secret, JoinRole::agent, p->nonce, auth->nonce))) {
          refused = "a connection that failed authentication (not this job, or another join token)";
          ControlMessage m;
          m.kind = ControlMessage::Kind::refuse;
          m.exit_code = 2;
          m.text = "node 0's agent refused the connection: wrong join token or job id (AIR_RUN_JOIN_TOKEN)";
          send_message(*p, m);
          p->closed = true;
          continue;
        }
        p->authenticated = true;
        if (!send_all(p->fd.get(),
                      format_proof(join_proof(secret, JoinRole::node0, p->nonce, auth->nonce)))) {
          p->closed = true;
          continue;
        }
        next = 1;
        if (lines.size() < 2) continue;
      }
      const std::string& line = lines[next];
      auto hello = parse_control_message(line);
      if (!hello || hello->kind != ControlMessage::Kind::hello) {
        refused = hello ? fmt::format("expected hello, got '{}'", line) : hello.error().message;
        ControlMessage m;
        m.kind = ControlMessage::Kind::refuse;
        m.exit_code = 2;
        m.text = "node 0's agent refused the connection: " + refused;
        send_message(*p, m);
        p->closed = true;
        continue;
      }
      if (options_.c10d != (hello->node_rank < 0)) {
        return refuse_all(
            2,
            fmt::format("the agent on {} uses {} rendezvous but node 0 ({}) uses {}: give every "
                        "node the same --rdzv-backend",
                        hello->name, hello->node_rank < 0 ? "c10d" : "static", options_.node_name,
                        options_.c10d ? "c10d" : "static"),
            p.get());
      }
      if (options_.c10d && static_cast<int>(joined.size()) + 1 >= max_nodes) {
        ControlMessage m;
        m.kind = ControlMessage::Kind::refuse;
        m.exit_code = 2;
        m.text = fmt::format("the job already has its {} nodes", max_nodes);
        send_message(*p, m);
        p->closed = true;
        continue;
      }
      // c10d: node ranks in order of arrival, node 0 being the host.
      const int r = options_.c10d ? static_cast<int>(joined.size()) + 1 : hello->node_rank;
      p->node_rank = r;
      p->name = hello->name;
      const std::string who = name_of(r, hello->name);
      if (r < 1 || r >= options_.num_nodes) {
        return refuse_all(2,
                          fmt::format("an agent on {} says it is node {}, outside 1..{} ({} nodes)",
                                      hello->name, r, options_.num_nodes - 1, options_.num_nodes),
                          p.get());
      }
      if (hello->num_nodes != options_.num_nodes) {
        return refuse_all(2,
                          fmt::format("{} was started for {} nodes but {} for {}: give every node the "
                                      "same --nnodes",
                                      who, hello->num_nodes, name_of(0, ""), options_.num_nodes),
                          p.get());
      }
      if (auto other = joined.find(r); other != joined.end()) {
        return refuse_all(2,
                          fmt::format("two agents say they are node {}: {} and {}; give each node its own "
                                      "--node-rank",
                                      r, other->second->name, hello->name),
                          p.get());
      }
      if (hello->ranks_per_node != options_.ranks_per_node) {
        return refuse_all(
            2,
            fmt::format("{} runs {} rank(s) but {} runs {}: every node must run the same number "
                        "of ranks (--num-accelerators / --cpu-ranks)",
                        who, hello->ranks_per_node, name_of(0, ""), options_.ranks_per_node),
            p.get());
      }
      joined.emplace(r, std::move(p));
    }
    pending.erase(
        std::remove_if(pending.begin(), pending.end(), [](const auto& p) { return !p || p->closed; }),
        pending.end());
  }

  options_.num_nodes = static_cast<int>(joined.size()) + 1;
  ControlMessage start;
  start.kind = ControlMessage::Kind::start;
  start.text = run_id_;
  start.num_nodes = options_.num_nodes;
  start.master_port = master_port_;
  start.mlflow_experiment_id = mlflow_experiment_id_;
  start.mlflow_run_id = mlflow_run_id_;
  for (auto& [rank, peer] : joined) {
    start.node_rank = rank;
    if (!send_message(*peer, start))
      return refuse_all(125, fmt::format("{} left before the start", name_of(rank, peer->name)), nullptr);
    peers_.push_back(std::move(peer));
  }
  send_members();
  // Elastic: node 0 keeps listening, so an agent that comes later is admitted
  // at the next restart (admit_late); otherwise the listener closes here.
  if (elastic()) listener_ = std::move(listener_fd);
  return ok_status();
}

Status ControlChannel::client_join() {
  const auto started = Clock::now();
  const auto deadline = started + options_.join_timeout;
  const std::string where = fmt::format("{}:{}", options_.master_host, options_.port);
  std::string dropped; // why the last connection ended before node 0 proved itself
  for (;;) {
    auto peer = std::make_unique<Peer>();
    peer->node_rank = 0;
    std::string error;
    for (;;) {
      const auto now = Clock::now();
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
      peer->fd = connect_once(options_.master_host, options_.port,
                              std::clamp(left, milliseconds(1), milliseconds(2000)), error);
      if (peer->fd) break;
      if (Clock::now() + k_retry_interval >= deadline) {
        if (!dropped.empty()) error = dropped + "; then " + error;
        return Error{ErrorKind::system, fmt::format("could not reach node 0's agent at {} within {}: {}",
                                                    where, format_duration(options_.join_timeout), error)};
      }
      if (const Status waited = wait_before_retry(where); !waited) return waited;
    }
    auto joined = handshake(std::move(peer), where, deadline);
    if (joined) return *joined;
    // Node 0 closed the connection before it proved itself: it had no room
    // for one more while others flooded its port, or it is not up yet. Try
    // again while the join timeout lasts.
    dropped = fmt::format("node 0's agent at {} closed the connection before the handshake", where);
    if (Clock::now() + k_retry_interval >= deadline) {
      return Error{ErrorKind::system, fmt::format("{}, each time until the join timeout ({})", dropped,
                                                  format_duration(options_.join_timeout))};
    }
    if (const Status waited = wait_before_retry(where); !waited) return waited;
  }
}

Status ControlChannel::wait_before_retry(const std::string& where) {
  pollfd wait{options_.interrupt_fd, POLLIN, 0};
  poll_retry(&wait, 1, static_cast<int>(k_retry_interval.count()));
  if (const int sig = take_interrupt(); sig != 0) {
    interrupted_by_ = sig;
    return Error{ErrorKind::system, fmt::format("interrupted by {} while waiting for node 0's agent at {}",
                                                signal_name(sig), where)};
  }
  return ok_status();
}

std::optional<Status> ControlChannel::handshake(std::unique_ptr<Peer> peer, const std::string& where,
                                                Clock::time_point deadline) {
  // Node 0 speaks first: its challenge. Answer it with our proof, then hello.
  std::string challenge;
  std::vector<std::string> early; // lines that came with the challenge
  bool not_ours = false;
  while (challenge.empty()) {
    auto lines = read_lines(*peer);
    if (!lines.empty()) {
      // The first line is the challenge, or this is not our protocol.
      if (auto nonce = parse_challenge(lines.front()))
        challenge = *nonce;
      else
        not_ours = true;
      early.assign(lines.begin() + 1, lines.end());
    }
    if (!challenge.empty()) break;
    if (peer->closed && !not_ours) return std::nullopt; // closed before a word: try again
    const auto now = Clock::now();
    if (not_ours || now >= deadline + options_.join_timeout) {
      return Error{ErrorKind::system,
                   fmt::format("node 0's agent at {} sent no join challenge (not an air-run agent of this "
                               "version?)",
                               where)};
    }
    pollfd p{peer->fd.get(), POLLIN, 0};
    poll_retry(&p, 1, std::min(poll_timeout(now, deadline + options_.join_timeout), 1000));
  }
  const JoinSecret secret{options_.join_token, options_.job_id};
  const std::string nonce = make_nonce();
  ControlMessage hello;
  hello.kind = ControlMessage::Kind::hello;
  hello.node_rank = options_.node_rank;
  hello.num_nodes = options_.num_nodes;
  hello.ranks_per_node = options_.ranks_per_node;
  hello.name = options_.node_name;
  if (!send_all(peer->fd.get(), format_auth(nonce, join_proof(secret, JoinRole::agent, challenge, nonce))) ||
      !send_message(*peer, hello))
    return std::nullopt; // closed while we answered: try again
  bool node0_proven = false;
  bool waiting = false; // node 0 said `wait`: the job runs, this node joins at the next restart
  bool started = false; // after `wait`: `start` came, its `restart` (the attempt) follows

  // Node 0 may itself wait up to join_timeout for slower nodes.
  auto start_deadline = deadline + options_.join_timeout;
  for (;;) {
    std::vector<std::string> lines = std::move(early);
    early.clear();
    for (auto& line : read_lines(*peer)) lines.push_back(std::move(line));
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i];
      if (!node0_proven) {
        // Whoever answers must prove it holds the token before we believe it.
        if (auto proof = parse_proof(line);
            proof && equal_in_constant_time(*proof, join_proof(secret, JoinRole::node0, challenge, nonce))) {
          node0_proven = true;
          continue;
        }
        auto m = parse_control_message(line);
        if (m && m->kind == ControlMessage::Kind::refuse) return join_error(2, m->text);
        return Error{ErrorKind::usage,
                     fmt::format("the agent at {} could not prove it holds this job's join token "
                                 "(AIR_RUN_JOIN_TOKEN differs between the nodes, or it is not node 0)",
                                 where)};
      }
      auto m = parse_control_message(line);
      if (!m) continue;
      if (m->kind == ControlMessage::Kind::wait && !waiting) {
        // The job is running: no start within the join timeout, it comes at the
        // group's next restart, however long the attempt runs.
        waiting = true;
        start_deadline = Clock::time_point::max();
        if (options_.notice)
          options_.notice("the job is running; node 0 admitted this node, which joins at the next restart");
        continue;
      }
      if (m->kind == ControlMessage::Kind::start) {
        run_id_ = m->text;
        options_.node_rank = m->node_rank;
        options_.num_nodes = m->num_nodes;
        master_port_ = m->master_port;
        mlflow_experiment_id_ = m->mlflow_experiment_id;
        mlflow_run_id_ = m->mlflow_run_id;
        started = true;
      }
      if (waiting && m->kind == ControlMessage::Kind::restart && started) {
        first_attempt_ = m->attempt;
        master_port_ = m->master_port;
        if (m->node_rank > 0) {
          options_.node_rank = m->node_rank;
          options_.num_nodes = m->num_nodes;
        }
      }
      if (started && (!waiting || m->kind == ControlMessage::Kind::restart)) {
        // What came with the start (an abort of a rank that failed at once) belongs to the run.
        peer->unread.assign(lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, lines.end());
        peers_.push_back(std::move(peer));
        return ok_status();
      }
      if (m->kind == ControlMessage::Kind::refuse) {
        // Another node's interrupt ends this one with the same 128+N.
        if (m->exit_code > 128 && m->exit_code < 128 + 65) interrupted_by_ = m->exit_code - 128;
        return join_error(m->exit_code, m->text);
      }
    }
    if (peer->closed) {
      // Before node 0's proof the connection is nobody's yet: try again.
      if (!node0_proven) return std::nullopt;
      return Error{ErrorKind::system,
                   fmt::format("node 0's agent at {} closed the control connection before the start", where)};
    }
    const auto now = Clock::now();
    if (now >= start_deadline) {
      return Error{ErrorKind::system, fmt::format("node 0's agent at {} did not start the job within {}",
                                                  where, format_duration(options_.join_timeout * 2))};
    }
    pollfd p[2] = {{peer->fd.get(), POLLIN, 0}, {options_.interrupt_fd, POLLIN, 0}};
    poll_retry(p, 2, poll_timeout(now, start_deadline));
    if (const int sig = take_interrupt(); sig != 0) {
      interrupted_by_ = sig;
      ControlMessage fail;
      fail.kind = ControlMessage::Kind::fail;
      fail.node_rank = options_.node_rank;
      fail.exit_code = 128 + sig;
      fail.name = options_.node_name;
      fail.text = fmt::format("was interrupted by {} while waiting for the start", signal_name(sig));
      send_message(*peer, fail);
      return Error{ErrorKind::system,
                   fmt::format("interrupted by {} while waiting for node 0's agent at {} to "
                               "start the job",
                               signal_name(sig), where)};
    }
  }
}

std::vector<int> ControlChannel::poll_fds() const {
  std::vector<int> fds;
  for (const auto& peer : peers_)
    if (!peer->closed) fds.push_back(peer->fd.get());
  if (admitting()) {
    if (Clock::now() >= accept_resumes_) fds.push_back(listener_.get());
    for (const auto& group : {&late_, &waiting_})
      for (const auto& peer : *group)
        if (!peer->closed) fds.push_back(peer->fd.get());
  }
  return fds;
}

std::optional<Clock::time_point> ControlChannel::next_deadline() const {
  std::optional<Clock::time_point> next = next_heartbeat_;
  if (round_deadline_ && *round_deadline_ < *next) next = round_deadline_;
  if (counts_deadline_ && !preempt_decided_ && *counts_deadline_ < *next) next = counts_deadline_;
  for (const auto& peer : peers_) {
    if (peer->closed) continue;
    const auto silent = peer->last_heard + options_.heartbeat_timeout;
    if (silent < *next) next = silent;
  }
  return next;
}

std::vector<JobEvent> ControlChannel::check(Clock::time_point now) {
  const auto failure = pump(now);
  std::vector<JobEvent> events;
  due_preemption(now, events);
  if (failure) events.push_back(JobEvent::failed_with(*failure));
  due_hang(now, events);
  return events;
}

std::vector<JobEvent> ControlChannel::tell(const NodeEvent& event, Clock::time_point now) {
  switch (event.kind) {
  case NodeEvent::Kind::failed:
    if (event.outcome) local_failure(*event.outcome);
    break;
  case NodeEvent::Kind::quiet:
    ranks_quiet();
    break;
  case NodeEvent::Kind::placed:
    ranks_placed(event.places);
    break;
  case NodeEvent::Kind::preempted:
    preempt_signalled(event.signal, event.steps, event.grace);
    break;
  case NodeEvent::Kind::counted:
    ranks_counted(event.steps);
    break;
  }
  std::vector<JobEvent> events;
  due_preemption(now, events);
  due_hang(now, events);
  return events;
}

void ControlChannel::due_preemption(Clock::time_point now, std::vector<JobEvent>& events) {
  if (counts_asked()) events.push_back(JobEvent::of(JobEvent::Kind::counts_asked));
  if (auto stop = job_stop(now)) events.push_back(JobEvent::stop_at(std::move(*stop)));
}

void ControlChannel::due_hang(Clock::time_point now, std::vector<JobEvent>& events) {
  if (places_asked()) events.push_back(JobEvent::of(JobEvent::Kind::places_asked));
  if (auto job = job_places(now)) events.push_back(JobEvent::places_of(std::move(*job)));
}

std::optional<RemoteFailure> ControlChannel::pump(Clock::time_point now) {
  std::optional<RemoteFailure> failure;
  const bool server = options_.node_rank == 0;
  for (auto& peer : peers_) {
    const bool was_closed = peer->closed;
    for (const auto& line : read_lines(*peer)) {
      auto f = on_line(*peer, line);
      if (f && !failure) failure = std::move(f);
    }
    if (was_closed) continue;
    // A peer that is gone before the end: its agent exited or was killed.
    const bool expected_end = server ? peer->done : finished_;
    std::string lost;
    if (peer->closed && !expected_end) {
      lost = "its agent closed the control connection (it exited or was killed)";
    } else if (!peer->closed && now - peer->last_heard > options_.heartbeat_timeout) {
      lost = fmt::format("no word from its agent for {}", format_duration(options_.heartbeat_timeout));
      peer->closed = true;
    }
    if (!lost.empty() && !failure) {
      RemoteFailure f;
      f.node_rank = peer->node_rank;
      f.node_name = plain_name(peer->node_rank, peer->name);
      f.exit_code = 1;
      f.reason = lost;
      failure = std::move(f);
    }
  }
  if (server && admitting()) {
    auto joined = admit_late(now);
    if (joined && !failure) failure = std::move(joined);
  }
  if (now >= next_heartbeat_) {
    ControlMessage hb;
    for (auto& peer : peers_)
      if (!peer->closed) send_message(*peer, hb);
    next_heartbeat_ = now + options_.heartbeat_interval;
  }
  // Only the first failure anywhere counts, and not after this node's own.
  if (!failure || remote_ || failure_reported_) return std::nullopt;
  remote_ = failure;
  if (server) {
    const Peer* origin = nullptr;
    for (const auto& peer : peers_)
      if (peer->node_rank == failure->node_rank) origin = peer.get();
    broadcast_abort(*failure, origin);
  }
  return failure;
}

namespace {

/// A `preempt` or `counted` line's counts.
NodeSteps steps_of(const ControlMessage& m) {
  NodeSteps n;
  n.node = m.node_rank;
  n.polling = m.count;
  n.steps = m.steps;
  n.rate = static_cast<double>(m.rate_milli) / 1000;
  return n;
}

/// A rate in steps per 1000 s, as the lines carry it.
std::uint64_t rate_milli(double rate) {
  if (!(rate > 0)) return 0;
  return static_cast<std::uint64_t>(std::min(rate, 1e9) * 1000);
}

} // namespace

std::optional<RemoteFailure> ControlChannel::on_line(Peer& peer, const std::string& line) {
  auto m = parse_control_message(line);
  if (!m) return std::nullopt; // a newer agent's message this one does not know: ignore it
  const bool server = options_.node_rank == 0;
  switch (m->kind) {
  case ControlMessage::Kind::done:
    if (server) peer.done = true;
    return std::nullopt;
  case ControlMessage::Kind::finish:
    if (!server) finished_ = true;
    return std::nullopt;
  case ControlMessage::Kind::nodes:
    if (!server) members_ = split_names(m->text);
    return std::nullopt;
  case ControlMessage::Kind::over:
    // A node whose attempt ended first says whether it may restart while this
    // one is still stopping its ranks: kept for agree_restart.
    if (server) early_over_[peer.node_rank] = m->restartable;
    return std::nullopt;
  case ControlMessage::Kind::regroup: {
    if (server) return std::nullopt;
    RemoteFailure f;
    f.node_rank = 0;
    f.node_name = members_.empty() ? plain_name(0, "") : members_.front();
    f.reason = m->text;
    f.membership_change = true;
    return f;
  }
  case ControlMessage::Kind::quiet:
    if (server && !round_deadline_) start_round(Clock::now());
    return std::nullopt;
  case ControlMessage::Kind::where:
    if (!server && m->round > hang_round_) {
      hang_round_ = m->round;
      places_asked_ = true;
    }
    return std::nullopt;
  case ControlMessage::Kind::place:
    // Only this round's, and only a node's own ranks, up to the count it gave.
    if (server && round_deadline_ && m->round == hang_round_ && m->node_rank == peer.node_rank) {
      auto& places = round_places_[m->node_rank];
      round_counts_[m->node_rank] = m->count;
      if (places.size() < static_cast<std::size_t>(m->count)) places.push_back(m->place);
    }
    return std::nullopt;
  case ControlMessage::Kind::preempt:
    // Only a node's own signal, and only while its ranks run (after the end
    // that node is on its own fallback anyway).
    if (server && running_ && m->node_rank == peer.node_rank) {
      const auto now = Clock::now();
      take_counts(m->node_rank, steps_of(*m), std::nullopt, now);
      start_preemption(m->signal, m->node_rank, std::chrono::milliseconds(m->grace_ms), now);
    }
    return std::nullopt;
  case ControlMessage::Kind::count:
    if (!server) counts_asked_ = true;
    return std::nullopt;
  case ControlMessage::Kind::counted:
    if (server && counts_deadline_ && !preempt_decided_ && m->node_rank == peer.node_rank) {
      const auto now = Clock::now();
      take_counts(m->node_rank, steps_of(*m), (now - count_sent_) / 2, now);
    }
    return std::nullopt;
  case ControlMessage::Kind::stopat:
    if (!server && !job_stop_ && !preempt_decided_) {
      preempt_decided_ = true; // the first decision counts
      JobStop stop;
      stop.signal = m->signal;
      stop.stop_step = m->steps;
      stop.grace = std::chrono::milliseconds(m->grace_ms);
      stop.node = m->node_rank;
      job_stop_ = std::move(stop);
    }
    return std::nullopt;
  case ControlMessage::Kind::fail:
  case ControlMessage::Kind::abort:
  case ControlMessage::Kind::hung: {
    if (m->node_rank == options_.node_rank) return std::nullopt; // our own failure, echoed
    RemoteFailure f;
    f.node_rank = m->node_rank;
    f.node_name = plain_name(m->node_rank, m->name);
    f.rank = m->rank;
    f.exit_code = m->exit_code;
    f.reason = m->text;
    f.hung = m->kind == ControlMessage::Kind::hung;
    return f;
  }
  default:
    return std::nullopt;
  }
}

namespace {

/// A node's name as one word of a `nodes` line.
std::string one_name(const std::string& name) {
  std::string out = name.empty() ? "?" : name;
  for (char& c : out)
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') c = '_';
  return out;
}

/// A failure as the line that carries it: `fail` towards node 0, `abort` from it.
ControlMessage failure_message(ControlMessage::Kind kind, const RemoteFailure& failure) {
  ControlMessage m;
  m.kind = kind;
  m.node_rank = failure.node_rank;
  m.rank = failure.rank;
  m.exit_code = failure.exit_code;
  m.name = failure.node_name;
  m.text = failure.reason;
  return m;
}

} // namespace

void ControlChannel::send_members() {
  members_.assign(1, options_.node_name);
  for (const auto& peer : peers_) members_.push_back(peer->name);
  ControlMessage m;
  m.kind = ControlMessage::Kind::nodes;
  for (const auto& name : members_) m.text += (m.text.empty() ? "" : " ") + one_name(name);
  for (auto& peer : peers_)
    if (!peer->closed) send_message(*peer, m);
}

void ControlChannel::broadcast_abort(const RemoteFailure& failure, const Peer* except) {
  ControlMessage m = failure_message(ControlMessage::Kind::abort, failure);
  if (failure.membership_change) { // not a failure: the others end the attempt for the restart
    m.kind = ControlMessage::Kind::regroup;
    m.text = failure.reason;
  }
  // A hang stop says `hung` first; the `abort` after it stops an agent that
  // does not know `hung` (the first failure a node hears is the one it keeps).
  const ControlMessage hung = failure_message(ControlMessage::Kind::hung, failure);
  for (auto& peer : peers_) {
    if (peer.get() == except) continue;
    if (hang_stop_) send_message(*peer, hung);
    send_message(*peer, m);
  }
}

void ControlChannel::report_failure(int exit_code, int rank, const std::string& reason) {
  if (failure_reported_ || remote_) return;
  failure_reported_ = true;
  RemoteFailure mine;
  mine.node_rank = options_.node_rank;
  mine.node_name = options_.node_name;
  mine.rank = rank;
  mine.exit_code = exit_code == 0 ? 1 : exit_code;
  mine.reason = reason;
  if (options_.node_rank == 0) {
    broadcast_abort(mine, nullptr);
    return;
  }
  const ControlMessage m = failure_message(ControlMessage::Kind::fail, mine);
  for (auto& peer : peers_) send_message(*peer, m);
}

void ControlChannel::local_failure(const RunOutcome& outcome) {
  // Node 0 stopping for a hang stops the others as hung, not as failed.
  hang_stop_ = options_.node_rank == 0 && outcome.status == RunOutcome::Status::hung;
  report_failure(outcome.exit_code(), outcome.root_cause_rank, outcome.reason);
}

void ControlChannel::start_round(Clock::time_point now) {
  ++hang_round_;
  round_deadline_ = now + options_.places_wait;
  round_places_.clear();
  round_counts_.clear();
  places_asked_ = true; // node 0's own ranks too
  ControlMessage where;
  where.kind = ControlMessage::Kind::where;
  where.round = hang_round_;
  for (auto& peer : peers_)
    if (!peer->closed) send_message(*peer, where);
}

void ControlChannel::ranks_quiet() {
  if (options_.node_rank == 0) {
    if (!round_deadline_) start_round(Clock::now());
    return;
  }
  ControlMessage quiet;
  quiet.kind = ControlMessage::Kind::quiet;
  quiet.node_rank = options_.node_rank;
  for (auto& peer : peers_)
    if (!peer->closed) send_message(*peer, quiet);
}

bool ControlChannel::places_asked() { return std::exchange(places_asked_, false); }

void ControlChannel::ranks_placed(const std::vector<HangRank>& ranks) {
  if (options_.node_rank == 0) {
    if (!round_deadline_) return; // a diagnosis of node 0's own: the round that follows asks again
    round_places_[0] = ranks;
    round_counts_[0] = static_cast<int>(ranks.size());
    return;
  }
  if (hang_round_ <= answered_round_) return; // not asked (yet): `where` comes after our `quiet`
  answered_round_ = hang_round_;
  for (const HangRank& rank : ranks) {
    ControlMessage place;
    place.kind = ControlMessage::Kind::place;
    place.round = hang_round_;
    place.node_rank = options_.node_rank;
    place.count = static_cast<int>(ranks.size());
    place.place = rank;
    for (auto& peer : peers_)
      if (!peer->closed) send_message(*peer, place);
  }
}

std::optional<JobPlaces> ControlChannel::job_places(Clock::time_point now) {
  if (options_.node_rank != 0 || !round_deadline_) return std::nullopt;
  const auto complete = [this](int node) {
    const auto count = round_counts_.find(node);
    const auto places = round_places_.find(node);
    return count != round_counts_.end() && places != round_places_.end() &&
           places->second.size() >= static_cast<std::size_t>(count->second);
  };
  bool all = complete(0);
  for (const auto& peer : peers_)
    if (!peer->closed && !complete(peer->node_rank)) all = false;
  if (!all && now < *round_deadline_) return std::nullopt;
  round_deadline_.reset();
  JobPlaces job = merge_places(round_places_, options_.num_nodes);
  round_places_.clear();
  round_counts_.clear();
  return job;
}

void ControlChannel::settle(RunOutcome& outcome) {
  if (settled_) return;
  settled_ = true;
  running_ = false;        // the ranks here are done: no agent is admitted until the next attempt
  round_deadline_.reset(); // a hang diagnosis still gathering belongs to the attempt that ended
  reset_preemption();      // so does a preemption (the next attempt starts afresh)
  const bool local_ok = outcome.status == RunOutcome::Status::succeeded;
  if (!local_ok && !outcome.remote_failure)
    report_failure(outcome.exit_code(), outcome.root_cause_rank, outcome.reason);
  if (local_ok && remote_ && !outcome.remote_failure)
    adopt(outcome, *remote_); // taken by check() after the end
  if (local_ok && !remote_) {
    const bool server = options_.node_rank == 0;
    if (!server) {
      ControlMessage done;
      done.kind = ControlMessage::Kind::done;
      done.node_rank = options_.node_rank;
      for (auto& peer : peers_) send_message(*peer, done);
    }
    // Wait for the others (node 0) or for node 0's finish (the rest), with
    // heartbeats still going so a dead peer is noticed.
    for (;;) {
      const bool all_done =
          server ? std::all_of(peers_.begin(), peers_.end(), [](const auto& p) { return p->done; })
                 : finished_;
      if (all_done) break;
      std::vector<pollfd> fds;
      for (const int fd : poll_fds()) fds.push_back({fd, POLLIN, 0});
      const auto now = Clock::now();
      poll_retry(fds.data(), fds.size(),
                 poll_timeout(now, next_deadline().value_or(now + milliseconds(1000))));
      if (auto f = pump(Clock::now())) {
        adopt(outcome, *f);
        break;
      }
    }
    if (server && !remote_) {
      ControlMessage fin;
      fin.kind = ControlMessage::Kind::finish;
      for (auto& peer : peers_) send_message(*peer, fin);
    }
  }
}

void ControlChannel::finish(RunOutcome& outcome) {
  settle(outcome);
  close_gracefully();
}

std::optional<int> ControlChannel::agree_restart(RunOutcome& outcome, bool restartable, int attempt,
                                                 int master_port) {
  const bool server = options_.node_rank == 0;
  if (!server) {
    ControlMessage over;
    over.kind = ControlMessage::Kind::over;
    over.node_rank = options_.node_rank;
    over.restartable = restartable;
    for (auto& peer : peers_) send_message(*peer, over);
  }
  // Node 0: every other node's word; the others: node 0's decision. Lines
  // from the attempt that just ended (fail, abort, done) come first on each
  // connection and are passed over.
  std::map<int, bool> said = std::move(early_over_); // node 0: node rank -> may restart
  early_over_.clear();
  std::optional<int> decided_port;
  bool decided = false;
  bool lost = false;
  auto next_hb = Clock::now();
  while (!decided && !lost) {
    const auto now = Clock::now();
    if (now >= next_hb) {
      ControlMessage hb;
      for (auto& peer : peers_)
        if (!peer->closed) send_message(*peer, hb);
      next_hb = now + options_.heartbeat_interval;
    }
    for (auto& peer : peers_) {
      const std::vector<std::string> lines = read_lines(*peer);
      for (std::size_t i = 0; i < lines.size() && !decided; ++i) {
        auto m = parse_control_message(lines[i]);
        if (!m) continue;
        if (server && m->kind == ControlMessage::Kind::over) said[peer->node_rank] = m->restartable;
        if (!server && m->kind == ControlMessage::Kind::restart) {
          decided = true;
          decided_port = m->master_port;
          if (m->node_rank > 0) { // node 0 regrouped the nodes after one was lost
            options_.node_rank = m->node_rank;
            options_.num_nodes = m->num_nodes;
          }
        }
        if (!server && m->kind == ControlMessage::Kind::stop) decided = true;
        // Node 0 may already be in the next attempt: what follows its answer
        // (an abort of a rank that failed at once) belongs to that attempt.
        if (decided) peer->unread.assign(lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, lines.end());
      }
      const bool silent = now - peer->last_heard > options_.heartbeat_timeout;
      if ((peer->closed || silent) && !(server && said.count(peer->node_rank) != 0)) {
        if (server && elastic())
          peer->closed = true; // dropped below: the others go on without it
        else
          lost = true;
      }
    }
    if (server && std::all_of(peers_.begin(), peers_.end(),
                              [&said](const auto& p) { return p->closed || said.count(p->node_rank) != 0; }))
      break;
    if (decided || lost) break;
    std::vector<pollfd> fds{{options_.interrupt_fd, POLLIN, 0}};
    for (const int fd : poll_fds()) fds.push_back({fd, POLLIN, 0});
    poll_retry(fds.data(), fds.size(), poll_timeout(Clock::now(), next_hb));
    if (const int sig = take_interrupt(); sig != 0) {
      interrupted_by_ = sig;
      outcome.status = RunOutcome::Status::interrupted;
      outcome.interrupt_signal = sig;
      outcome.remote_failure.reset();
      outcome.reason = fmt::format("interrupted by {} before restart {}", signal_name(sig), attempt);
      restartable = false;
      lost = true; // closing tells the others (node 0 sees a node gone; node 0 gone ends the rest)
    }
  }
  if (server) {
    // Elastic: the nodes that are gone leave the group; the rest must be enough.
    bool regroup = false;
    int min_nodes = options_.min_nodes;
    if (elastic() && !lost) {
      const auto gone = std::remove_if(peers_.begin(), peers_.end(), [](const auto& p) { return p->closed; });
      regroup = gone != peers_.end();
      peers_.erase(gone, peers_.end());
      const int left = static_cast<int>(peers_.size()) + 1;
      if (regroup && left < min_nodes) {
        lost = true;
        outcome.reason += fmt::format("; {} node{} left, fewer than the {} --nnodes asks for", left,
                                      left == 1 ? "" : "s", min_nodes);
      }
    }
    const bool all =
        !lost && restartable && std::all_of(peers_.begin(), peers_.end(), [&said](const auto& p) {
          const auto it = said.find(p->node_rank);
          return it != said.end() && it->second;
        });
    // The agents waiting to join (admit_late) become the last nodes of the
    // next attempt; when there is none, they are told the job ends.
    std::vector<const Peer*> joining;
    if (all) {
      for (auto& peer : waiting_) {
        if (peer->closed) continue;
        peer->last_heard = Clock::now(); // it waited in silence: its heartbeats start now
        joining.push_back(peer.get());
        peers_.push_back(std::move(peer));
        regroup = true;
      }
      waiting_.clear();
    } else {
      refuse_waiting(125, "the job ended before a restart could admit this node");
    }
    ControlMessage m;
    m.kind = all ? ControlMessage::Kind::restart : ControlMessage::Kind::stop;
    m.attempt = attempt;
    m.master_port = master_port;
    if (all && regroup) options_.num_nodes = static_cast<int>(peers_.size()) + 1;
    int next_rank = 1;
    for (auto& peer : peers_) {
      if (peer->closed) continue;
      if (all && regroup) { // contiguous again, in the old order, those joining last
        peer->node_rank = next_rank++;
        m.node_rank = peer->node_rank;
        m.num_nodes = options_.num_nodes;
      }
      if (std::find(joining.begin(), joining.end(), peer.get()) != joining.end()) {
        // A joining agent learns the run first, as at the start; `restart` then names its attempt.
        ControlMessage start;
        start.kind = ControlMessage::Kind::start;
        start.node_rank = peer->node_rank;
        start.num_nodes = options_.num_nodes;
        start.master_port = master_port;
        start.text = run_id_;
        start.mlflow_experiment_id = mlflow_experiment_id_;
        start.mlflow_run_id = mlflow_run_id_;
        send_message(*peer, start);
      }
      send_message(*peer, m);
    }
    if (all) {
      decided_port = master_port;
      send_members(); // the next attempt's nodes, after `restart` on each connection
    }
  }
  if (!decided_port) return std::nullopt;
  // A fresh attempt: nothing failed yet, nobody is done.
  failure_reported_ = false;
  remote_.reset();
  finished_ = false;
  settled_ = false;
  master_port_ = *decided_port;
  running_ = true;
  for (auto& peer : peers_) peer->done = false;
  return decided_port;
}

void ControlChannel::close_gracefully() {
  refuse_waiting(125, "the job ended before a restart could admit this node");
  late_.clear();
  listener_.reset();
  const auto deadline = Clock::now() + k_linger;
  for (auto& peer : peers_)
    if (!peer->closed) ::shutdown(peer->fd.get(), SHUT_WR);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Peer*> open;
    for (auto& peer : peers_) {
      if (peer->closed) continue;
      fds.push_back({peer->fd.get(), POLLIN, 0});
      open.push_back(peer.get());
    }
    const auto now = Clock::now();
    if (fds.empty() || now >= deadline) break;
    poll_retry(fds.data(), fds.size(), poll_timeout(now, deadline));
    for (Peer* peer : open) read_lines(*peer); // read and discard until the peer's EOF
  }
  peers_.clear();
}

// A node that joins later (c10d --nnodes MIN:MAX). Node 0 keeps the control
// port open while the ranks run; an agent that connects then goes through the
// same authentication and hello as at the start, and is admitted (`wait`)
// while the nodes, those waiting included, stay at most MAX. Its admission
// ends the attempt everywhere (`regroup`), as torchrun's agent restarts the
// workers when num_nodes_waiting() > 0, and agree_restart makes it the last
// node of the next attempt. A bad or surplus agent is refused alone: the
// running job never stops for it.

bool ControlChannel::admitting() const {
  return options_.node_rank == 0 && listener_ && running_ && !remote_ && !failure_reported_;
}

void ControlChannel::accept_late(Clock::time_point now) {
  if (now < accept_resumes_) return;
  for (int taken = 0; taken < k_max_accepts_per_wake; ++taken) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from), &from_len, // NOLINT
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
    if (fd < 0) {
      // Out of descriptors the listener stays readable: rest instead of spinning.
      if (errno == EMFILE || errno == ENFILE) accept_resumes_ = now + k_accept_pause;
      return;
    }
    UniqueFd connection(fd);
    const std::string source = source_address(from);
    std::vector<WaitingConnection> view;
    for (const auto& p : late_) view.push_back({p->source, p->authenticated, p->connected});
    const Admission admission = admit_connection(view, source, now, k_admission);
    if (admission.verdict == Admission::Verdict::refuse) continue; // closed: a real agent retries
    if (admission.verdict == Admission::Verdict::evict_then_admit)
      late_.erase(late_.begin() + static_cast<std::ptrdiff_t>(admission.evict));
    set_nodelay(fd);
    auto peer = std::make_unique<Peer>();
    peer->fd = std::move(connection);
    peer->source = source;
    peer->connected = now;
    peer->nonce = make_nonce();
    if (!send_all(fd, format_challenge(peer->nonce))) peer->closed = true;
    late_.push_back(std::move(peer));
  }
}

std::optional<std::string> ControlChannel::hear_late(Peer& p, Clock::time_point now) {
  const auto refuse = [&p](int code, const std::string& text) {
    ControlMessage m;
    m.kind = ControlMessage::Kind::refuse;
    m.exit_code = code;
    m.text = text;
    send_message(p, m);
    p.closed = true;
  };
  const auto lines = read_lines(p);
  const auto age = now - p.connected;
  if ((!p.authenticated && lines.empty() && age > k_auth_timeout) || age > k_hello_timeout) {
    p.closed = true; // silent: not an agent, or one that will connect again
    return std::nullopt;
  }
  if (lines.empty() || p.closed) return std::nullopt;
  std::size_t next = 0; // the line that must be hello
  if (!p.authenticated) {
    const JoinSecret secret{options_.join_token, options_.job_id};
    const auto auth = parse_auth(lines.front());
    if (!auth ||
        !equal_in_constant_time(auth->proof, join_proof(secret, JoinRole::agent, p.nonce, auth->nonce))) {
      refuse(2, "node 0's agent refused the connection: wrong join token or job id (AIR_RUN_JOIN_TOKEN)");
      return std::nullopt;
    }
    p.authenticated = true;
    if (!send_all(p.fd.get(), format_proof(join_proof(secret, JoinRole::node0, p.nonce, auth->nonce)))) {
      p.closed = true;
      return std::nullopt;
    }
    next = 1;
    if (lines.size() < 2) return std::nullopt;
  }
  auto hello = parse_control_message(lines[next]);
  if (!hello || hello->kind != ControlMessage::Kind::hello) {
    refuse(2, "node 0's agent refused the connection: " +
                  (hello ? fmt::format("expected hello, got '{}'", lines[next]) : hello.error().message));
    return std::nullopt;
  }
  const int min_nodes = options_.min_nodes;
  if (hello->node_rank >= 0) {
    refuse(2, fmt::format("the agent on {} uses static rendezvous but node 0 ({}) uses c10d: give every "
                          "node the same --rdzv-backend",
                          hello->name, options_.node_name));
    return std::nullopt;
  }
  if (hello->num_nodes != max_nodes_ || hello->ranks_per_node != options_.ranks_per_node) {
    refuse(2, fmt::format("the agent on {} was started for up to {} nodes of {} rank(s) but the running job "
                          "has --nnodes {}:{} and {} rank(s) per node: give every node the same --nnodes "
                          "and ranks per node",
                          hello->name, hello->num_nodes, hello->ranks_per_node, min_nodes, max_nodes_,
                          options_.ranks_per_node));
    return std::nullopt;
  }
  int nodes = 1 + static_cast<int>(waiting_.size());
  for (const auto& peer : peers_) nodes += peer->closed ? 0 : 1;
  if (nodes >= max_nodes_) {
    refuse(2, fmt::format("the job already has its {} nodes (--nnodes {}:{}); this agent ({}) was not "
                          "admitted",
                          max_nodes_, min_nodes, max_nodes_, hello->name));
    return std::nullopt;
  }
  p.name = hello->name;
  ControlMessage wait;
  wait.kind = ControlMessage::Kind::wait;
  if (!send_message(p, wait)) return std::nullopt;
  return hello->name;
}

std::optional<RemoteFailure> ControlChannel::admit_late(Clock::time_point now) {
  accept_late(now);
  std::vector<std::string> joined;
  for (auto& p : late_) {
    if (auto name = hear_late(*p, now)) {
      joined.push_back(*name);
      waiting_.push_back(std::move(p));
    }
  }
  late_.erase(std::remove_if(late_.begin(), late_.end(), [](const auto& p) { return !p || p->closed; }),
              late_.end());
  // A waiting agent says nothing until it starts; one that leaves (or is
  // interrupted: `fail`) is no longer waiting.
  for (auto& p : waiting_)
    for (const auto& line : read_lines(*p))
      if (auto m = parse_control_message(line); m && m->kind == ControlMessage::Kind::fail) p->closed = true;
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), [](const auto& p) { return p->closed; }),
                 waiting_.end());
  if (joined.empty()) return std::nullopt;
  int nodes = 1 + static_cast<int>(waiting_.size());
  for (const auto& peer : peers_) nodes += peer->closed ? 0 : 1;
  std::string names;
  for (const auto& name : joined) names += (names.empty() ? "" : ", ") + name;
  RemoteFailure change;
  change.node_rank = 0;
  change.node_name = options_.node_name;
  change.membership_change = true;
  change.reason = fmt::format("{} joined; the worker group restarts with {} nodes", names, nodes);
  return change;
}

void ControlChannel::refuse_waiting(int exit_code, const std::string& why) {
  ControlMessage m;
  m.kind = ControlMessage::Kind::refuse;
  m.exit_code = exit_code;
  m.text = why;
  for (auto& peer : waiting_) send_message(*peer, m);
  waiting_.clear();
}

} // namespace air

// Preemption across nodes (docs/preemption.md, "Several nodes").

namespace air {

namespace {

/// Half a round trip to a node whose counts came unasked (a `preempt` line)
/// when no other node's answer measured one: generous for a data centre's
/// network, and doubled again by pick_stop_step's margin.
constexpr auto k_unknown_trip = std::chrono::milliseconds(100);

} // namespace

void ControlChannel::preempt_signalled(int sig, const NodeSteps& mine, std::chrono::milliseconds grace) {
  const auto now = Clock::now();
  if (options_.node_rank == 0) {
    take_counts(0, mine, Clock::duration::zero(), now);
    start_preemption(sig, 0, grace, now);
    return;
  }
  ControlMessage m;
  m.kind = ControlMessage::Kind::preempt;
  m.node_rank = options_.node_rank;
  m.signal = sig;
  m.grace_ms = static_cast<int>(std::min<long long>(grace.count(), 999'999'999));
  m.count = mine.polling;
  m.steps = mine.steps;
  m.rate_milli = rate_milli(mine.rate);
  for (auto& peer : peers_)
    if (!peer->closed) send_message(*peer, m);
}

void ControlChannel::start_preemption(int sig, int node, std::chrono::milliseconds grace,
                                      Clock::time_point now) {
  if (preempt_decided_) return; // a later signal elsewhere: the stopat is out already
  if (counts_deadline_) {
    grace_ends_ = std::min(grace_ends_, now + grace); // the grace period of the first signal
    return;
  }
  preempt_signal_ = sig;
  preempt_node_ = node;
  grace_ends_ = now + grace;
  counts_deadline_ = now + options_.counts_wait;
  count_sent_ = now;
  // One round trip: every node whose counts node 0 does not have yet is
  // asked; node 0's own ranks through its supervisor (counts_asked).
  if (counted_.count(0) == 0) counts_asked_ = true;
  ControlMessage count;
  count.kind = ControlMessage::Kind::count;
  for (auto& peer : peers_)
    if (!peer->closed && counted_.count(peer->node_rank) == 0) send_message(*peer, count);
}

void ControlChannel::take_counts(int node, NodeSteps counts, std::optional<Clock::duration> trip,
                                 Clock::time_point now) {
  counts.node = node;
  counted_[node] = Counted{counts, now, trip};
}

bool ControlChannel::counts_asked() { return std::exchange(counts_asked_, false); }

void ControlChannel::ranks_counted(const NodeSteps& mine) {
  if (options_.node_rank == 0) {
    if (counts_deadline_ && !preempt_decided_) take_counts(0, mine, Clock::duration::zero(), Clock::now());
    return;
  }
  ControlMessage m;
  m.kind = ControlMessage::Kind::counted;
  m.node_rank = options_.node_rank;
  m.count = mine.polling;
  m.steps = mine.steps;
  m.rate_milli = rate_milli(mine.rate);
  for (auto& peer : peers_)
    if (!peer->closed) send_message(*peer, m);
}

std::optional<JobStop> ControlChannel::job_stop(Clock::time_point now) {
  if (options_.node_rank != 0) return std::exchange(job_stop_, std::nullopt);
  if (!counts_deadline_ || preempt_decided_) return std::nullopt;
  bool all = counted_.count(0) > 0;
  for (const auto& peer : peers_)
    if (!peer->closed && counted_.count(peer->node_rank) == 0) all = false;
  if (!all && now < *counts_deadline_) return std::nullopt;
  return decide_stop(now);
}

JobStop ControlChannel::decide_stop(Clock::time_point now) {
  preempt_decided_ = true;
  // A count taken `trip` before it reached node 0 ages until now, and the
  // stopat takes about as long again to reach that node: its lead.
  std::optional<Clock::duration> known;
  for (const auto& [node, c] : counted_)
    if (c.trip && node != 0) known = std::max(known.value_or(Clock::duration::zero()), *c.trip);
  std::vector<NodeSteps> nodes;
  for (auto [node, c] : counted_) {
    const Clock::duration trip = c.trip.value_or(known.value_or(k_unknown_trip));
    c.steps.lead_s = std::chrono::duration<double>(now - c.arrived + 2 * trip).count();
    nodes.push_back(c.steps);
  }
  JobStop stop;
  stop.signal = preempt_signal_;
  stop.stop_step = pick_stop_step(nodes);
  stop.grace = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(grace_ends_ - now),
                        std::chrono::milliseconds(0));
  stop.node = preempt_node_;
  for (int node = 0; node < options_.num_nodes; ++node)
    if (counted_.count(node) == 0) stop.missing_nodes.push_back(node);
  ControlMessage m;
  m.kind = ControlMessage::Kind::stopat;
  m.steps = stop.stop_step;
  m.signal = stop.signal;
  m.grace_ms = static_cast<int>(std::min<long long>(stop.grace.count(), 999'999'999));
  m.node_rank = stop.node;
  for (auto& peer : peers_)
    if (!peer->closed) send_message(*peer, m);
  return stop;
}

void ControlChannel::reset_preemption() {
  counts_deadline_.reset();
  counted_.clear();
  preempt_decided_ = false;
  counts_asked_ = false;
  job_stop_.reset();
  preempt_signal_ = 0;
  preempt_node_ = -1;
}

} // namespace air
