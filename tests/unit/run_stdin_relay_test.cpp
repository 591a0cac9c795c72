// The stdin relay (core/run/stdin_relay.hpp): input into the --stdin rank's
// pipe, with what the pipe does not take kept, the end passed on, and a
// rank that closed its stdin let go. Pipes stand in for stdin and the rank.
#include "core/run/stdin_relay.hpp"
#include "tests/unit/catch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <string>

namespace {

struct Pipe {
  air::UniqueFd read;
  air::UniqueFd write;
  Pipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
};

std::string read_some(int fd) {
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

void put(int fd, const std::string& text) {
  REQUIRE(::write(fd, text.data(), text.size()) == ssize_t(text.size()));
}

} // namespace

TEST_CASE("the relay moves input into the rank's pipe and passes its end on", "[stdin_relay]") {
  Pipe input;
  Pipe rank;
  air::StdinRelay relay(input.read.get());
  CHECK_FALSE(relay.poll_entry()); // no rank reads it
  relay.attach(std::move(rank.write));
  REQUIRE(relay.poll_entry());
  CHECK(relay.poll_entry()->fd == input.read.get());
  CHECK(relay.poll_entry()->events == POLLIN);
  put(input.write.get(), "c\n");
  relay.forward(true, false);
  CHECK(read_some(rank.read.get()) == "c\n");
  input.write.reset(); // Ctrl-D
  relay.forward(true, false);
  CHECK_FALSE(relay.attached());
  char byte;
  CHECK(::read(rank.read.get(), &byte, 1) == 0); // the rank sees the end
}

TEST_CASE("input the rank's pipe cannot take waits, and stdin is not read meanwhile", "[stdin_relay]") {
  Pipe input;
  Pipe rank;
  REQUIRE(::fcntl(rank.write.get(), F_SETFL, O_NONBLOCK) == 0);
  // Fill the rank's pipe: the rank is not reading.
  const std::string block(4096, 'x');
  std::size_t filled = 0;
  while (::write(rank.write.get(), block.data(), block.size()) > 0) filled += block.size();
  air::StdinRelay relay(input.read.get());
  const int rank_fd = rank.write.get();
  relay.attach(std::move(rank.write));
  put(input.write.get(), "next\n");
  relay.forward(true, false);
  REQUIRE(relay.poll_entry());
  CHECK(relay.poll_entry()->fd == rank_fd); // waits for the pipe, not for more input
  CHECK(relay.poll_entry()->events == POLLOUT);
  // The rank reads: the pipe takes the rest.
  std::string drained;
  while (drained.size() < filled) drained += read_some(rank.read.get());
  relay.forward(*relay.poll_entry());
  CHECK(read_some(rank.read.get()) == "next\n");
  REQUIRE(relay.poll_entry());
  CHECK(relay.poll_entry()->fd == input.read.get());
}

TEST_CASE("a rank that closed its stdin is let go", "[stdin_relay]") {
  Pipe input;
  Pipe rank;
  const auto old = std::signal(SIGPIPE, SIG_IGN); // air-run ignores it while it supervises
  air::StdinRelay relay(input.read.get());
  relay.attach(std::move(rank.write));
  rank.read.reset();
  put(input.write.get(), "lost\n");
  relay.forward(true, false);
  std::signal(SIGPIPE, old);
  CHECK_FALSE(relay.attached());
  CHECK_FALSE(relay.poll_entry());
}
