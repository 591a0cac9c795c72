#include "core/warm/warm_start.hpp"

#include "core/base/text.hpp"
#include "core/os/atomic_file.hpp"
#include "core/os/spawn_request.hpp"
#include "core/warm/python/air_run_warm_py.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <optional>
#include <set>

namespace air {

namespace {

/// How long a fork may take before the interpreter counts as stuck (a
/// loaded host forking a process of a few GB).
constexpr int k_fork_reply_ms = 30'000;
/// How long the interpreter gets to leave after its socket closes.
constexpr auto k_exit_wait = std::chrono::milliseconds(1000);
/// How long the imports may take before the warm start is abandoned and the
/// ranks start fresh: far more than torch takes on a loaded host, far less
/// than forever (an import that blocks: a lock, a network mount, a sleep).
constexpr auto k_import_limit = std::chrono::seconds(120);
/// Of what the interpreter printed while importing, the end kept for its
/// error message.
constexpr std::size_t k_printed_tail = 2000;

/// A signalfd that becomes readable while SIGINT, SIGTERM or SIGHUP is
/// pending for air-run (the supervisor blocks them). Only polled, never
/// read: the signal stays pending for the supervisor's own signalfd, which
/// ends the run as for any interrupt. -1 if it cannot be made.
UniqueFd pending_stop_fd() {
  sigset_t set;
  sigemptyset(&set);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  return UniqueFd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
}

void replace_all(std::string& text, std::string_view from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

/// Writes all of `data`; false on an error (EPIPE: the interpreter is gone).
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

/// Sends `data` with `fds` attached (SCM_RIGHTS) to its first byte.
bool send_with_fds(int fd, std::string_view data, const std::vector<int>& fds) {
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  iovec io{const_cast<char*>(data.data()), data.size()};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr) return false;
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  return send_all(fd, data.substr(static_cast<std::size_t>(n)));
}

/// What is in `fd` now, appended to `into` (kept to its last `keep` bytes).
void drain(int fd, std::string& into, std::size_t keep);

/// After a poll that gave `revents` for `fd`: what it has read into `into`
/// (its last k_printed_tail bytes); at its end, `fd` closed.
void drain_output(UniqueFd& fd, short revents, std::string& into) {
  if (!fd || (revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
  const std::size_t before = into.size();
  drain(fd.get(), into, k_printed_tail);
  if (into.size() == before && (revents & POLLIN) == 0) fd.reset();
}

void drain(int fd, std::string& into, std::size_t keep) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    into.append(buf, static_cast<std::size_t>(n));
    if (into.size() > keep) into.erase(0, into.size() - keep);
  }
}

} // namespace

std::string_view warm_start_source() { return embedded_python::air_run_warm(); }

std::string warm_start_program() {
  std::string text(warm_start_source());
  replace_all(text, "AIR_RUN_FAILED_CHDIR", std::to_string(k_failed_chdir));
  replace_all(text, "AIR_RUN_FAILED_AFFINITY", std::to_string(k_failed_affinity));
  replace_all(text, "AIR_RUN_FAILED_MEMPOLICY", std::to_string(k_failed_mempolicy));
  return text;
}

std::optional<WarmTarget> warm_target(const std::vector<std::string>& argv, const std::string& python) {
  if (argv.size() < 2 || argv[0] != python) return std::nullopt;
  WarmTarget target;
  std::size_t at = 1;
  for (; at < argv.size() && argv[at] == "-u"; ++at) target.unbuffered = true;
  if (at < argv.size() && argv[at] == "-m") ++at;
  if (at >= argv.size() || argv[at].empty() || argv[at][0] == '-') return std::nullopt;
  target.name = argv[at];
  return target;
}

Environment common_environment(const std::vector<const Environment*>& ranks) {
  Environment common;
  if (ranks.empty()) return common;
  for (const auto& [name, value] : *ranks.front()) {
    bool everywhere = true;
    for (std::size_t i = 1; i < ranks.size() && everywhere; ++i) {
      const auto it = ranks[i]->find(name);
      everywhere = it != ranks[i]->end() && it->second == value;
    }
    if (everywhere) common.emplace(name, value);
  }
  return common;
}

Environment common_environment(const std::vector<const RankEnvironment*>& ranks) {
  if (ranks.empty()) return {};
  const auto& shared = ranks.front()->shared();
  const bool one_map = shared != nullptr && std::all_of(ranks.begin(), ranks.end(), [&shared](const auto* r) {
                         return r->shared() == shared;
                       });
  if (!one_map) {
    std::vector<Environment> flat;
    flat.reserve(ranks.size());
    for (const auto* r : ranks) flat.push_back(r->flat());
    std::vector<const Environment*> envs;
    for (const auto& e : flat) envs.push_back(&e);
    return common_environment(envs);
  }
  // The shared map, less or plus what the ranks' own variables make of it:
  // only the names some rank has of its own can differ between ranks.
  Environment common = *shared;
  std::set<std::string> own;
  for (const auto* r : ranks)
    for (const auto& entry : r->own()) own.insert(entry.first);
  for (const auto& name : own) {
    const std::string* first = ranks.front()->get(name);
    bool everywhere = first != nullptr;
    for (std::size_t i = 1; i < ranks.size() && everywhere; ++i) {
      const std::string* value = ranks[i]->get(name);
      everywhere = value != nullptr && *value == *first;
    }
    if (everywhere)
      common[name] = *first;
    else
      common.erase(name);
  }
  return common;
}

EnvironmentChanges environment_changes(const Environment& base, const Environment& env) {
  EnvironmentChanges out;
  auto b = base.begin();
  auto e = env.begin();
  while (b != base.end() || e != env.end()) {
    if (e == env.end() || (b != base.end() && b->first < e->first)) {
      out.emplace_hint(out.end(), b->first, std::nullopt); // the rank lacks it
      ++b;
    } else if (b == base.end() || e->first < b->first) {
      out.emplace_hint(out.end(), e->first, e->second); // the rank adds it
      ++e;
    } else {
      if (b->second != e->second) out.emplace_hint(out.end(), e->first, e->second);
      ++b;
      ++e;
    }
  }
  return out;
}

EnvironmentChanges environment_changes(const Environment& base, const RankEnvironment& env,
                                       const EnvironmentChanges& shared) {
  EnvironmentChanges out = shared;
  for (const auto& [name, value] : env.own()) {
    const auto it = base.find(name);
    const bool same = value ? it != base.end() && it->second == *value : it == base.end();
    if (same)
      out.erase(name);
    else
      out[name] = value;
  }
  return out;
}

std::string warm_start_request(pid_t parent, const std::string& cwd, bool unbuffered, int memory_node,
                               const std::vector<int>& cpus, const std::vector<std::string>& argv,
                               const EnvironmentChanges& env) {
  std::string out;
  const auto field = [&out](std::string_view text) {
    out.append(text);
    out.push_back('\0');
  };
  std::string cpu_list;
  for (int cpu : cpus) cpu_list += (cpu_list.empty() ? "" : ",") + std::to_string(cpu);
  field("air-run-warm-2");
  field(std::to_string(parent));
  field(cwd);
  field(unbuffered ? "1" : "0");
  field(std::to_string(memory_node));
  field(cpu_list);
  field(std::to_string(argv.size()));
  for (const auto& a : argv) field(a);
  const auto set = std::count_if(env.begin(), env.end(), [](const auto& change) { return change.second; });
  field(std::to_string(set));
  for (const auto& [name, value] : env)
    if (value) field(name + "=" + *value);
  for (const auto& [name, value] : env)
    if (!value) field(name);
  return out;
}

Expected<std::unique_ptr<WarmStart>> WarmStart::start(const std::string& python, bool unbuffered,
                                                      Environment env,
                                                      const std::vector<std::string>& modules,
                                                      const std::string& dir) {
  std::unique_ptr<WarmStart> w(new WarmStart());
  w->python_ = python;
  w->started_ = Clock::now();
  AIR_TRY(write_file_atomically(dir + "/air_run_warm.py", warm_start_program()));
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return sys_error("socketpair", errno);
  w->socket_.reset(pair[0]);
  UniqueFd theirs(pair[1]);
  // `-c` puts '' (the working directory) first on sys.path: taken off before
  // anything is imported, or a torch.py where air-run was started would be
  // what every rank imports (a fresh `python script.py` never looks there;
  // -P, which does the same, exists only from Python 3.11 on). Each rank puts
  // its own first entry back (the script's folder). The program is imported
  // from `dir` and `dir` is taken off sys.path again.
  std::vector<std::string> argv = {python};
  if (unbuffered) argv.push_back("-u");
  argv.insert(argv.end(), {"-c",
                           "import sys; sys.path[:1] = [p for p in sys.path[:1] if p]; d = sys.argv[1]; "
                           "sys.path.insert(0, d); import air_run_warm as w; sys.path.remove(d); "
                           "w.main(sys.argv[2:])",
                           dir});
  argv.insert(argv.end(), modules.begin(), modules.end());
  SpawnOptions options;
  options.stdin_from = theirs.get();
  auto started = start_process(argv, env, {}, options);
  if (!started) return started.error();
  w->base_ = std::move(env); // kept, not copied: it may hold 100,000 variables
  w->pid_ = started->child.pid;
  auto child = confirm_exec(std::move(*started));
  if (!child) return child.error();
  // Read until it is ready: its stderr for the reason it fails; its stdout
  // kept open so that a print while importing does not fail.
  w->stderr_ = std::move(child->stderr_fd);
  w->stdout_ = std::move(child->stdout_fd);
  return w;
}

WarmStart::~WarmStart() {
  socket_.reset(); // EOF: the interpreter leaves
  if (pid_ <= 0) return;
  const auto until = std::chrono::steady_clock::now() + k_exit_wait;
  for (;;) {
    const pid_t got = ::waitpid(pid_, nullptr, WNOHANG);
    if (got != 0) return; // reaped now, or by someone else (ECHILD): not ours to signal
    if (std::chrono::steady_clock::now() >= until) break;
    ::usleep(2000);
  }
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void WarmStart::broken(std::string why) {
  if (failure_.empty()) failure_ = std::move(why);
  ready_ = false;
  socket_.reset();
  stderr_.reset();
  stdout_.reset();
}

void WarmStart::abandon(std::string why) {
  broken(std::move(why));
  if (pid_ <= 0) return;
  // Its process group: what the imports started (they are refused anyway).
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

WarmStart::Wait WarmStart::read_line(std::string& line, Clock::time_point until, int stop_fd,
                                     const std::function<void()>& meanwhile) {
  auto next_meanwhile = Clock::now() + k_meanwhile_period;
  for (;;) {
    if (meanwhile && Clock::now() >= next_meanwhile) {
      meanwhile();
      next_meanwhile = Clock::now() + k_meanwhile_period;
    }
    const auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return Wait::line;
    }
    if (!socket_) return Wait::gone;
    const auto now = Clock::now();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    if (left <= 0) return Wait::timed_out;
    const long long wait_ms =
        meanwhile ? std::min<long long>(
                        left, std::chrono::ceil<std::chrono::milliseconds>(next_meanwhile - now).count())
                  : left;
    // Its stdout and stderr are pipes until it is ready: read at every turn,
    // so that an import that prints much does not block on a full pipe.
    pollfd fds[4] = {{socket_.get(), POLLIN, 0},
                     {stderr_ ? stderr_.get() : -1, POLLIN, 0},
                     {stdout_ ? stdout_.get() : -1, POLLIN, 0},
                     {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, 4, static_cast<int>(std::clamp<long long>(wait_ms, 0, INT_MAX)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Wait::gone;
    if (stop_fd >= 0 && (fds[3].revents & POLLIN) != 0) return Wait::stopped;
    drain_output(stderr_, fds[1].revents, printed_); // its traceback, if it dies
    std::string discarded;
    drain_output(stdout_, fds[2].revents, discarded);
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      char buf[256];
      const ssize_t got = ::read(socket_.get(), buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return Wait::gone; // the interpreter is gone
      buffer_.append(buf, static_cast<std::size_t>(got));
    }
  }
}

bool WarmStart::ready(std::optional<Clock::time_point> deadline, const std::function<void()>& meanwhile) {
  if (ready_) return true;
  if (!socket_) return false;
  const auto limit = started_ + k_import_limit;
  const auto until = deadline ? std::min(*deadline, limit) : limit;
  const UniqueFd stop = pending_stop_fd();
  std::string line;
  switch (read_line(line, until, stop.get(), meanwhile)) {
  case Wait::line:
    break;
  case Wait::stopped:
    abandon("air-run was asked to stop while the interpreter was importing");
    return false;
  case Wait::timed_out:
    abandon(deadline && *deadline < limit
                ? "the run's --timeout came while the interpreter was importing"
                : "the imports took more than " + std::to_string(k_import_limit.count()) +
                      " s (the interpreter was abandoned)");
    return false;
  case Wait::gone: {
    std::string printed(trim(printed_));
    const auto last = printed.rfind('\n');
    if (last != std::string::npos) printed = printed.substr(last + 1); // the exception's line
    broken("the interpreter ended while importing" + (printed.empty() ? std::string() : ": " + printed));
    return false;
  }
  }
  if (line != "ready") {
    broken(line.starts_with("error ") ? line.substr(6) : "unexpected answer " + line);
    return false;
  }
  stderr_.reset(); // it writes to /dev/null from now on
  stdout_.reset();
  printed_.clear();
  ready_ = true;
  return true;
}

namespace {

/// A request sent, its reply not yet read: what becomes the StartedProcess.
struct SentRank {
  ChildProcess parent;
  UniqueFd set_up;
  std::string name;
  std::string working_dir;
};

} // namespace

std::vector<WarmStart::Forked> WarmStart::start_ranks(const std::vector<Rank>& ranks, CgroupTarget cgroup) {
  std::vector<Forked> results;
  std::vector<std::optional<SentRank>> sent(ranks.size());
  std::vector<std::optional<Error>> errors(ranks.size());
  char buf[PATH_MAX];
  const std::string own_cwd = ::getcwd(buf, sizeof buf) != nullptr ? buf : ".";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (!ready()) {
      errors[i] = Error{ErrorKind::system, failure_};
      continue;
    }
    const auto& argv = *ranks[i].argv;
    const auto target = warm_target(argv, python_);
    if (!target) {
      errors[i] = Error{ErrorKind::usage, "not python [-u] SCRIPT or -m MODULE under " + python_};
      continue;
    }
    const SpawnOptions& options = ranks[i].options;
    auto streams = open_child_streams(options);
    if (!streams) {
      errors[i] = streams.error();
      continue;
    }
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      errors[i] = sys_error("pipe2", errno);
      continue;
    }
    UniqueFd set_up(pipe_fds[0]);
    UniqueFd set_up_write(pipe_fds[1]);
    std::vector<int> cpus;
    if (options.bind_cpus)
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &options.cpus)) cpus.push_back(cpu);
    int memory_node = -1;
    if (options.bind_memory) {
      constexpr int bits = static_cast<int>(sizeof(unsigned long) * 8);
      for (int node = 0; node < 16 * bits && memory_node < 0; ++node)
        if ((options.memory_nodes[node / bits] >> (node % bits)) & 1UL) memory_node = node;
    }
    const RankEnvironment& env = *ranks[i].env;
    if (!have_shared_changes_ || env.shared() != changes_of_) {
      changes_of_ = env.shared();
      shared_changes_ = environment_changes(base_, changes_of_ ? *changes_of_ : Environment());
      have_shared_changes_ = true;
    }
    const std::string payload = warm_start_request(
        ::getpid(), options.working_dir.empty() ? own_cwd : options.working_dir, target->unbuffered,
        memory_node, cpus, argv, environment_changes(base_, env, shared_changes_));
    const auto size = static_cast<std::uint32_t>(payload.size());
    const unsigned char header[4] = {static_cast<unsigned char>(size), static_cast<unsigned char>(size >> 8),
                                     static_cast<unsigned char>(size >> 16),
                                     static_cast<unsigned char>(size >> 24)};
    std::vector<int> fds = {streams->stdin_end.get(), streams->stdout_end.get(), streams->stderr_end.get(),
                            set_up_write.get()};
    if (cgroup.procs_fd >= 0) fds.push_back(cgroup.procs_fd);
    if (!send_with_fds(socket_.get(), std::string_view(reinterpret_cast<const char*>(header), 4), fds) ||
        !send_all(socket_.get(), payload)) {
      broken("the interpreter is gone");
      errors[i] = Error{ErrorKind::system, failure_};
      continue;
    }
    // Only the rank will hold its ends: the pipes reach EOF when it ends.
    SentRank s;
    s.parent = std::move(streams->parent);
    s.set_up = std::move(set_up);
    s.name = target->name;
    s.working_dir = options.working_dir;
    sent[i] = std::move(s);
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (!sent[i]) {
      results.push_back({std::move(*errors[i])});
      continue;
    }
    std::string line;
    if (read_line(line, Clock::now() + std::chrono::milliseconds(k_fork_reply_ms)) != Wait::line) {
      // It may have forked the rank before it died or stuck: not to be
      // started again in this attempt.
      abandon("the interpreter did not answer a fork");
      results.push_back({Error{ErrorKind::system, "the warm interpreter ended or stuck while forking it "
                                                  "(not started again: it may have been forked)"},
                         true});
      continue;
    }
    const pid_t pid = line.starts_with("pid ") ? static_cast<pid_t>(std::atol(line.c_str() + 4)) : 0;
    if (pid <= 0) {
      // One rank could not be forked; the next may be. Started fresh instead.
      results.push_back({Error{ErrorKind::system, line.starts_with("error ") ? line.substr(6) : line}});
      continue;
    }
    StartedProcess started;
    started.child = std::move(sent[i]->parent);
    started.child.pid = pid;
    started.exec = PendingExec(pid, std::move(sent[i]->set_up));
    started.name = std::move(sent[i]->name);
    started.working_dir = std::move(sent[i]->working_dir);
    results.push_back({std::move(started)});
  }
  return results;
}

} // namespace air
