#include "core/run/console.hpp"
#include "tests/unit/catch.hpp"

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <string>

namespace {

/// A console on a fresh pseudo-terminal, stdout on it and stderr on a
/// second descriptor of it (as `2>&1`), with its live area on unless `live`
/// is false; `master` is the terminal's other end, what a user's screen reads.
struct LiveTerminal {
  int master = -1;
  int slave = -1;
  int err = -1;
  air::Console console; ///< after the three above: made from the terminal they open

  explicit LiveTerminal(bool live = true) : console(open_terminal(live)) {
    if (live) console.start_live(false);
  }
  ~LiveTerminal() {
    console.stop_live();
    ::close(err);
    ::close(slave);
    ::close(master);
  }
  LiveTerminal(const LiveTerminal&) = delete;
  LiveTerminal& operator=(const LiveTerminal&) = delete;

private:
  air::ConsoleOptions open_terminal(bool live) {
    REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
    err = ::dup(slave);
    air::ConsoleOptions options;
    options.stdout_fd = slave;
    options.stderr_fd = err;
    options.live = live;
    return options;
  }
};

} // namespace

TEST_CASE("console: a terminal that is behind sets no redraw deadline", "[console]") {
  // A passed deadline of the live area while the terminal takes nothing made
  // every poll return at once: air-run spun at full CPU until it caught up.
  LiveTerminal term;
  air::Console& console = term.console;
  const int master = term.master;
  REQUIRE(console.next_deadline().has_value());
  std::string batch;
  for (int i = 0; i < 4000; ++i) { // far more than a terminal buffers unread
    batch.append(99, 'x');
    batch += '\n';
  }
  console.write(0, batch, 4000);
  REQUIRE(console.behind(0)); // buffered, not refused: the ranks' pipes wait now
  CHECK(!console.next_deadline().has_value());
  // Once the terminal took it all, the area keeps its clock again.
  ::fcntl(master, F_SETFL, ::fcntl(master, F_GETFL) | O_NONBLOCK);
  char buf[65536];
  for (int i = 0; i < 100000 && !console.next_deadline().has_value(); ++i) {
    while (::read(master, buf, sizeof buf) > 0) {
    }
    console.flush();
  }
  CHECK(console.next_deadline().has_value());
  CHECK(!console.behind(0));
}

namespace {

/// Everything the terminal `master` holds now (its reads never wait).
std::string drain_terminal(int master) {
  ::fcntl(master, F_SETFL, ::fcntl(master, F_GETFL) | O_NONBLOCK);
  std::string got;
  char buf[65536];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  return got;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++count;
  return count;
}

} // namespace

TEST_CASE("console: one pass's lines reach the live area's terminal in one write, one redraw", "[console]") {
  // A rank on a terminal is read 4 KiB at a time: an erase, the lines and a
  // redraw of the area for each read cost more than the lines themselves.
  LiveTerminal term;
  air::Console& console = term.console;
  const int master = term.master;
  console.set_partial(0, "PARTIAL-LINE");
  console.begin_batch();
  console.write(0, "rank 0 line\n", 1);
  console.write(0, "rank 1 line\n", 1);
  console.write(0, "rank 2 line\n", air::LineSink::k_uncounted);
  CHECK(drain_terminal(master).empty()); // gathered, not written yet
  console.end_batch();
  const std::string pass = drain_terminal(master);
  CHECK(pass.find("rank 0 line\r\nrank 1 line\r\nrank 2 line\r\n") != std::string::npos);
  CHECK(occurrences(pass, "PARTIAL-LINE") == 1); // redrawn once, under the last line
  CHECK(pass.rfind("PARTIAL-LINE") > pass.find("rank 2 line"));
  // Another stream's line ends the batch of the first: each stream's lines
  // go out in the order they came.
  console.begin_batch();
  console.write(0, "out line\n", 1);
  console.write(1, "err line\n", 1);
  CHECK(drain_terminal(master).find("out line") != std::string::npos);
  console.end_batch();
  const std::string second = drain_terminal(master);
  CHECK(second.find("err line") != std::string::npos);
  CHECK(second.find("out line") == std::string::npos);
  // Outside a pass each write goes out at once.
  console.write(0, "alone\n", 1);
  CHECK(drain_terminal(master).find("alone") != std::string::npos);
}

TEST_CASE("console: stdout and stderr on one terminal come out in the order written, however far behind",
          "[console]") {
  // Two buffers of their own let a stderr line (or the live area's redraw)
  // pass the stdout lines still waiting: the area's erase then lands on the
  // wrong lines and an old redraw shows up below newer lines.
  LiveTerminal term(false);
  air::Console& console = term.console;
  const int master = term.master;
  std::string batch;
  for (int i = 0; i < 4000; ++i) batch += "out " + std::to_string(i) + " " + std::string(90, 'x') + "\n";
  console.write(0, batch, 4000);
  REQUIRE(console.behind(0));                 // far more than a terminal buffers unread
  std::string shown = drain_terminal(master); // the terminal has room again, stdout's rest still waits
  console.write(1, "the error line\n", 1);
  for (int i = 0; i < 100000 && (console.behind(0) || console.behind(1)); ++i) {
    shown += drain_terminal(master);
    console.flush();
  }
  shown += drain_terminal(master);
  const auto last_out = shown.find("out 3999 ");
  const auto error = shown.find("the error line");
  REQUIRE(last_out != std::string::npos);
  REQUIRE(error != std::string::npos);
  CHECK(error > last_out);
  CHECK(console.finish(0) == 0); // nothing dropped
}
