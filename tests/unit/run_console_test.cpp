#include "core/run/console.hpp"
#include "tests/unit/catch.hpp"

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <string>

TEST_CASE("console: a terminal that is behind sets no redraw deadline", "[console]") {
  // A passed deadline of the live area while the terminal takes nothing made
  // every poll return at once: air-run spun at full CPU until it caught up.
  int master = -1;
  int slave = -1;
  REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  air::ConsoleOptions options;
  options.stdout_fd = slave;
  options.stderr_fd = slave;
  options.live = true;
  air::Console console(options);
  console.start_live(false);
  REQUIRE(console.next_deadline().has_value());
  std::string batch;
  for (int i = 0; i < 4000; ++i) { // far more than a terminal buffers unread
    batch.append(99, 'x');
    batch += '\n';
  }
  console.write(0, batch, 4000);
  REQUIRE(!console.full(0)); // buffered, not refused
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
  console.stop_live();
  ::close(slave);
  ::close(master);
}
