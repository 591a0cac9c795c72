// Helper programs run to completion with their output captured: the
// preflight's air-nccl-check, the environment build, scontrol. Ranks go
// through the supervisor instead.
#include "core/os/capture.hpp"

#include "core/os/process.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

/// Reads what is there now; false at EOF or on an error other than EAGAIN/EINTR.
bool drain(UniqueFd& fd, std::string& into, bool from_stderr, const CaptureOptions& options) {
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n > 0) {
      const std::string_view chunk(buffer, static_cast<std::size_t>(n));
      if (options.on_output) options.on_output(chunk, from_stderr);
      const std::size_t room = options.max_bytes > into.size() ? options.max_bytes - into.size() : 0;
      into.append(chunk.substr(0, room));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    fd.reset(); // EOF or a read error: this stream is done
    return false;
  }
}

/// Waits for `pid` until `until`; true when it was reaped (status in `wstatus`).
bool reap_until(pid_t pid, int& wstatus, std::optional<Clock::time_point> until) {
  while (true) {
    const pid_t got = ::waitpid(pid, &wstatus, until ? WNOHANG : 0);
    if (got == pid) return true;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return true; // not our child any more: nothing left to wait for
    if (until && Clock::now() >= *until) return false;
    ::usleep(10'000);
  }
}

} // namespace

Expected<CapturedRun> run_captured(const std::vector<std::string>& argv, const Environment& env,
                                   const CaptureOptions& options) {
  const auto started = Clock::now();
  auto child = spawn_process(argv, env);
  if (!child) return child.error();
  CapturedRun run;
  const std::optional<Clock::time_point> deadline =
      options.timeout ? std::optional(started + *options.timeout) : std::nullopt;

  // Read both pipes until both reach EOF (the child and anything it forked
  // closed them), the deadline passes or a stop is asked for.
  auto next_tick = started + options.tick_interval;
  while ((child->stdout_fd || child->stderr_fd) && !run.timed_out && !run.stopped) {
    long long wait_ms = 1000;
    if (options.on_tick) {
      const auto now = Clock::now();
      if (now >= next_tick) {
        options.on_tick();
        next_tick = now + options.tick_interval;
      }
      wait_ms = std::min<long long>(
          wait_ms, std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now).count() + 1);
    }
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      if (left.count() <= 0) {
        run.timed_out = true;
        break;
      }
      wait_ms = std::min<long long>(left.count(), wait_ms);
    }
    pollfd fds[3];
    nfds_t count = 0;
    UniqueFd* owners[2];
    for (UniqueFd* fd : {&child->stdout_fd, &child->stderr_fd}) {
      if (!*fd) continue;
      fds[count] = {fd->get(), POLLIN, 0};
      owners[count++] = fd;
    }
    const nfds_t streams = count;
    if (options.stop_fd >= 0) fds[count++] = {options.stop_fd, POLLIN, 0};
    const int ready = ::poll(fds, count, static_cast<int>(wait_ms));
    if (ready < 0 && errno != EINTR) return sys_error("poll", errno);
    if (ready <= 0) continue;
    for (nfds_t i = 0; i < streams; ++i) {
      if (fds[i].revents == 0) continue;
      const bool from_stderr = owners[i] == &child->stderr_fd;
      drain(*owners[i], from_stderr ? run.err : run.out, from_stderr, options);
    }
    if (options.stop_fd >= 0 && (fds[streams].revents & POLLIN) != 0) run.stopped = true;
  }

  int wstatus = 0;
  if (run.timed_out) {
    ::kill(-child->pid, SIGKILL);
    reap_until(child->pid, wstatus, std::nullopt);
  } else if (run.stopped) {
    // A helper such as pip may have started build subprocesses: stop the
    // whole group, politely first.
    ::kill(-child->pid, SIGTERM);
    if (!reap_until(child->pid, wstatus, Clock::now() + options.stop_grace)) {
      ::kill(-child->pid, SIGKILL);
      reap_until(child->pid, wstatus, std::nullopt);
    }
    ::kill(-child->pid, SIGKILL); // stragglers left in the group
  } else if (!reap_until(child->pid, wstatus, deadline)) {
    // Both pipes closed but the child still runs (it closed them itself):
    // it had the rest of the deadline.
    run.timed_out = true;
    ::kill(-child->pid, SIGKILL);
    reap_until(child->pid, wstatus, std::nullopt);
  }
  run.status = ExitStatus::from_wait_status(wstatus);
  run.duration_s = std::chrono::duration<double>(Clock::now() - started).count();
  return run;
}

Expected<CapturedRun> run_captured(const std::vector<std::string>& argv, const Environment& env,
                                   std::chrono::milliseconds timeout, std::size_t max_bytes) {
  CaptureOptions options;
  options.timeout = timeout;
  options.max_bytes = max_bytes;
  return run_captured(argv, env, options);
}

} // namespace air
