// --numa-binding in the spawn (core/os/process): the child runs on the CPUs
// and with the memory policy the parent prepared, or its start is an error.
#include "core/os/process.hpp"
#include "tests/unit/catch.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

namespace {

/// The child's stdout to EOF; the child reaped.
std::string output_of(air::ChildProcess& child) {
  std::string out;
  while (true) {
    pollfd p{child.stdout_fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) break;
    char buf[4096];
    const ssize_t n = ::read(child.stdout_fd.get(), buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EAGAIN) {
      break;
    }
  }
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  return out;
}

int lowest_allowed_cpu() {
  cpu_set_t mine;
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0) return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mine)) return cpu;
  return -1;
}

air::Expected<air::ChildProcess> start(const std::string& script, const air::SpawnOptions& options) {
  auto started = air::start_process({"/bin/sh", "-c", script}, {{"PATH", "/usr/bin:/bin"}}, {}, options);
  if (!started) return started.error();
  return air::confirm_exec(std::move(*started));
}

} // namespace

TEST_CASE("a bound child runs on its CPUs with its memory preferred on its node", "[process][numa]") {
  const int cpu = lowest_allowed_cpu();
  REQUIRE(cpu >= 0);
  air::SpawnOptions options;
  air::bind_to(options, {cpu}, 0);
  CHECK(options.bind_cpus);
  CHECK(options.bind_memory);
  auto child = start("grep '^Cpus_allowed_list' /proc/self/status; "
                     "[ -r /proc/self/numa_maps ] && head -1 /proc/self/numa_maps | cut -d' ' -f2",
                     options);
  REQUIRE(child.ok());
  const std::string out = output_of(*child);
  CHECK(out.rfind("Cpus_allowed_list:\t" + std::to_string(cpu) + "\n", 0) == 0);
  if (std::filesystem::exists("/proc/self/numa_maps")) CHECK(out.find("\nprefer:0\n") != std::string::npos);

  // Unbound: the parent's CPUs and the default policy.
  auto plain = start("[ -r /proc/self/numa_maps ] && head -1 /proc/self/numa_maps | cut -d' ' -f2", {});
  REQUIRE(plain.ok());
  if (std::filesystem::exists("/proc/self/numa_maps")) CHECK(output_of(*plain) == "default\n");
}

TEST_CASE("a binding the kernel refuses is a start error naming the call", "[process][numa]") {
  air::SpawnOptions options;
  air::bind_to(options, {1000}, -1); // no machine here has CPU 1000 online
  REQUIRE(options.bind_cpus);
  CHECK_FALSE(options.bind_memory);
  auto child = start("exit 0", options);
  REQUIRE_FALSE(child.ok());
  CHECK(child.error().kind == air::ErrorKind::system);
  CHECK(child.error().message == "/bin/sh: --numa-binding: sched_setaffinity: Invalid argument");

  air::SpawnOptions memory;
  air::bind_to(memory, {}, 1000); // a node that does not exist
  CHECK_FALSE(memory.bind_cpus);
  REQUIRE(memory.bind_memory);
  auto no_node = start("exit 0", memory);
  REQUIRE_FALSE(no_node.ok());
  CHECK(no_node.error().message.rfind("/bin/sh: --numa-binding: set_mempolicy: ", 0) == 0);
}
