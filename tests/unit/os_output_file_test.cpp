// Reports written where the user points them: devices and FIFOs in place,
// regular files atomically, every byte checked; closed standard streams.
#include "core/base/text.hpp"
#include "core/os/output_file.hpp"
#include "core/os/std_streams.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <thread>

using air::test::TempDir;

namespace {

bool is_symlink(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

} // namespace

TEST_CASE("a report into /dev/full is an error naming the device", "[output]") {
  const auto written = air::write_output_file("/dev/full", "{}\n");
  REQUIRE_FALSE(written.ok());
  CHECK(written.error().message == "cannot write /dev/full: write: No space left on device");
  struct stat st {};
  REQUIRE(::stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("a report into a FIFO reaches its reader; no reader is an error at once", "[output]") {
  TempDir dir;
  const std::string fifo = dir.file("collector.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto alone = air::write_output_file(fifo, "lost\n");
  REQUIRE_FALSE(alone.ok());
  CHECK(alone.error().message.find("no process reads this FIFO") != std::string::npos);

  std::string got;
  std::thread reader([&] { got = air::test::read_all(fifo); });
  // The reader opens the FIFO in its own time: retry until it is there.
  air::Status written = alone;
  for (int i = 0; i < 500 && !written.ok(); ++i) {
    written = air::write_output_file(fifo, "summary\n");
    if (!written.ok()) ::usleep(10000);
  }
  reader.join();
  CHECK(written.ok());
  CHECK(got == "summary\n");
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
}

TEST_CASE("a symlink to a regular file keeps the link and replaces the file", "[output]") {
  TempDir dir;
  dir.write("real.json", "old");
  const std::string link = dir.file("link.json");
  REQUIRE(::symlink("real.json", link.c_str()) == 0);
  REQUIRE(air::write_output_file(link, "new").ok());
  CHECK(is_symlink(link));
  CHECK(air::test::read_all(dir.file("real.json")) == "new");
}

TEST_CASE("a symlink pointing nowhere gets its target created", "[output]") {
  TempDir dir;
  const std::string link = dir.file("link.json");
  REQUIRE(::symlink("made.json", link.c_str()) == 0);
  REQUIRE(air::write_output_file(link, "made").ok());
  CHECK(is_symlink(link));
  CHECK(air::test::read_all(dir.file("made.json")) == "made");
}

TEST_CASE("a regular file or a new one is written atomically", "[output]") {
  TempDir dir;
  CHECK(air::output_target(dir.file("new.json")).kind == air::OutputTarget::Kind::replace);
  CHECK(air::output_target("/dev/null").kind != air::OutputTarget::Kind::replace);
  REQUIRE(air::write_output_file(dir.file("new.json"), std::string("a\0b", 3)).ok());
  CHECK(air::test::read_all(dir.file("new.json")) == std::string("a\0b", 3));
}

TEST_CASE("a pipe whose reader is gone is EPIPE, not death by SIGPIPE", "[output]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);
  // The default disposition, as at the end of a run: SIGPIPE would kill the process.
  struct sigaction old {};
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, &old);
  const auto written = air::write_to_fd(fds[1], "{}\n", "stdout");
  ::sigaction(SIGPIPE, &old, nullptr);
  ::close(fds[1]);
  REQUIRE_FALSE(written.ok());
  CHECK(written.error().message == "cannot write stdout: write: Broken pipe");
}

TEST_CASE("closed standard streams are opened on /dev/null", "[output]") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(STDIN_FILENO);
    ::close(STDOUT_FILENO);
    ::close(STDERR_FILENO);
    if (!air::open_standard_streams().ok()) ::_exit(10);
    struct stat null {};
    if (::stat("/dev/null", &null) != 0) ::_exit(11);
    for (int fd = 0; fd <= 2; ++fd) {
      struct stat st {};
      if (::fstat(fd, &st) != 0) ::_exit(20 + fd);
      if (st.st_rdev != null.st_rdev || !S_ISCHR(st.st_mode)) ::_exit(30 + fd);
    }
    // The next file air-run opens comes after them.
    const int next = ::open("/dev/null", O_RDONLY);
    ::_exit(next > STDERR_FILENO ? 0 : 40);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("control characters become '?'; line breaks stay where asked", "[output]") {
  const std::string nul_line("before\0after", 12);
  CHECK(air::strip_control_characters(nul_line) == "before?after");
  CHECK(air::strip_control_characters("\x1b]52;c;aGk=\x07\x1b]0;pwned\x07") == "?]52;c;aGk=??]0;pwned?");
  CHECK(air::strip_control_characters("a\tb\nc\r", air::LineBreaks::keep) == "a\tb\nc?");
  CHECK(air::strip_control_characters("a\tb\nc", air::LineBreaks::replace) == "a?b?c");
  CHECK(air::strip_control_characters("x\xc2\x9b"
                                      "31m\xc3\xa9",
                                      air::LineBreaks::keep) == "x?31m\xc3\xa9");
}
