// The ranks' output pipes: how large, within the kernel's limits, and made so.
#include "core/os/pipe_capacity.hpp"
#include "core/os/process.hpp"
#include "tests/unit/catch.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
/// The kernel's defaults: 1 MiB a pipe, 16384 pages a user.
const air::PipeLimits k_defaults{MiB, 16384 * 4 * KiB};

} // namespace

TEST_CASE("a few ranks' output pipes get 1 MiB each") {
  CHECK(air::output_pipe_size(2, k_defaults) == MiB);
  CHECK(air::output_pipe_size(16, k_defaults) == MiB); // 8 ranks
}

TEST_CASE("many ranks share a quarter of the user's soft limit, in powers of two") {
  CHECK(air::output_pipe_size(32, k_defaults) == 512 * KiB);  // 16 MiB / 32
  CHECK(air::output_pipe_size(48, k_defaults) == 256 * KiB);  // 341 KiB, rounded down
  CHECK(air::output_pipe_size(128, k_defaults) == 128 * KiB); // 64 ranks
  CHECK(air::output_pipe_size(256, k_defaults) == 0);         // 64 KiB: the kernel's own
  CHECK(air::output_pipe_size(2048, k_defaults) == 0);        // 1,024 ranks: left alone
}

TEST_CASE("the pipe limit and an absent soft limit are kept to") {
  CHECK(air::output_pipe_size(2, {256 * KiB, 16384 * 4 * KiB}) == 256 * KiB);
  CHECK(air::output_pipe_size(2, {100 * KiB, 16384 * 4 * KiB}) == 0); // not above 64 KiB
  CHECK(air::output_pipe_size(4096, {MiB, 0}) == MiB);                // no per-user limit
  CHECK(air::output_pipe_size(0, k_defaults) == 0);
}

TEST_CASE("this machine's limits are read") {
  const air::PipeLimits& limits = air::pipe_limits();
  CHECK(limits.max_bytes >= 4 * KiB);
  CHECK(&limits == &air::pipe_limits()); // read once
}

TEST_CASE("a child's output pipes are made as large as asked") {
  air::SpawnOptions options;
  const std::size_t asked = air::output_pipe_size(2, air::pipe_limits());
  options.output_pipe_size = asked;
  auto streams = air::open_child_streams(options);
  REQUIRE(streams);
  const int stdout_size = ::fcntl(streams->parent.stdout_fd.get(), F_GETPIPE_SZ);
  const int stderr_size = ::fcntl(streams->parent.stderr_fd.get(), F_GETPIPE_SZ);
  // Within the limits: the tests run as root, or as a user with few pipes open.
  const auto expected = static_cast<int>(asked > 0 ? asked : 64 * KiB);
  CHECK(stdout_size == expected);
  CHECK(stderr_size == expected);

  air::SpawnOptions plain;
  auto kernel = air::open_child_streams(plain);
  REQUIRE(kernel);
  CHECK(::fcntl(kernel->parent.stdout_fd.get(), F_GETPIPE_SZ) == static_cast<int>(64 * KiB));
}
