#include "core/os/log_sink.hpp"
#include "tests/unit/catch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

namespace {

/// What a pipe's reader gets once the writing end is closed.
std::string drain(int fd) {
  std::string all;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<std::size_t>(n));
  return all;
}

} // namespace

TEST_CASE("log sink: a batch in two pieces goes out as one, in order", "[log_sink]") {
  char path[] = "/tmp/air-log-sink-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  {
    air::LineSink file(fd); // a regular file: blocking writes
    file.write("held ", "line\nnext\n", 2);
    file.write({}, "only second\n", air::LineSink::k_uncounted);
    file.write("only first\n", {}, 1);
  }
  std::string all(200, '\0');
  all.resize(static_cast<std::size_t>(::pread(fd, all.data(), all.size(), 0)));
  CHECK(all == "held line\nnext\nonly second\nonly first\n");
  ::close(fd);
  ::unlink(path);
}

TEST_CASE("log sink: a pipe that is full keeps both pieces, in order", "[log_sink]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::string second(100000, 'x');
  second += '\n';
  std::string got;
  {
    air::LineSink console(fds[1]); // a pipe: written without blocking, the rest buffered
    console.write("first ", second, air::LineSink::k_uncounted); // more than the pipe takes
    CHECK(console.pending());
    console.write("then\n", {}, 1);
    char buf[65536];
    while (console.pending()) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      REQUIRE(n > 0);
      got.append(buf, static_cast<std::size_t>(n));
      console.flush();
    }
    CHECK(console.lines_dropped() == 0);
  } // its own nonblocking handle of the pipe closes here
  ::close(fds[1]);
  got += drain(fds[0]);
  CHECK(got == "first " + second + "then\n");
  ::close(fds[0]);
}

TEST_CASE("log sink: lines not counted are counted when they are dropped", "[log_sink]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  air::LineSink console(fds[1]);
  ::close(fds[0]); // nobody reads: EPIPE
  std::signal(SIGPIPE, SIG_IGN);
  console.write("a\nb", "\nc\n", air::LineSink::k_uncounted);
  CHECK(console.broken());
  console.write("d\n", "e\n", air::LineSink::k_uncounted);
  CHECK(console.lines_dropped() == 5);
  ::close(fds[1]);
}

TEST_CASE("log sink: /dev/null is known, and its writes skipped", "[log_sink]") {
  const int fd = ::open("/dev/null", O_WRONLY);
  REQUIRE(fd >= 0);
  air::LineSink null(fd);
  CHECK(null.discards());
  null.write("x\n", 1);
  CHECK(!null.broken());
  ::close(fd);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  CHECK(!air::LineSink(fds[1]).discards());
  ::close(fds[0]);
  ::close(fds[1]);
}
