// A helper program run to completion with its output captured: the preflight
// runs air-nccl-check this way. Ranks go through the supervisor instead.
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
bool drain(UniqueFd& fd, std::string& into, std::size_t max_bytes) {
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n > 0) {
      const std::size_t room = max_bytes > into.size() ? max_bytes - into.size() : 0;
      into.append(buffer, std::min(room, static_cast<std::size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    fd.reset(); // EOF or a read error: this stream is done
    return false;
  }
}

} // namespace

Expected<CapturedRun> run_captured(const std::vector<std::string>& argv, const Environment& env,
                                   std::chrono::milliseconds timeout, std::size_t max_bytes) {
  const auto started = Clock::now();
  auto child = spawn_process(argv, env);
  if (!child) return child.error();
  CapturedRun run;
  const auto deadline = started + timeout;

  // Read both pipes until both reach EOF (the child and anything it forked
  // closed them) or the deadline passes.
  while (child->stdout_fd || child->stderr_fd) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      break;
    }
    pollfd fds[2];
    nfds_t count = 0;
    UniqueFd* owners[2];
    for (UniqueFd* fd : {&child->stdout_fd, &child->stderr_fd}) {
      if (!*fd) continue;
      fds[count] = {fd->get(), POLLIN, 0};
      owners[count++] = fd;
    }
    const int ready = ::poll(fds, count, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) return sys_error("poll", errno);
    for (nfds_t i = 0; ready > 0 && i < count; ++i) {
      if (fds[i].revents == 0) continue;
      drain(*owners[i], owners[i] == &child->stdout_fd ? run.out : run.err, max_bytes);
    }
  }
  if (run.timed_out) ::kill(-child->pid, SIGKILL);

  int wstatus = 0;
  while (true) {
    const pid_t got = ::waitpid(child->pid, &wstatus, run.timed_out ? 0 : WNOHANG);
    if (got == child->pid) break;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return sys_error("waitpid", errno);
    // Both pipes closed but the child still runs (it closed them itself):
    // give it the rest of the deadline, then kill it.
    if (Clock::now() >= deadline) {
      run.timed_out = true;
      ::kill(-child->pid, SIGKILL);
      continue;
    }
    ::usleep(10'000);
  }
  run.status = ExitStatus::from_wait_status(wstatus);
  run.duration_s = std::chrono::duration<double>(Clock::now() - started).count();
  return run;
}

} // namespace air
