// Pipe readers: real pipes written by threads of the test, read by the
// readers' threads, handed on under the lock as the supervisor's loop would.
#include "core/run/output/pipe_readers.hpp"
#include "tests/unit/catch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

/// What the readers handed on, per rank and stream, and the ends seen;
/// `written`: what they wrote first, without the lock (the logs' part).
struct Delivered {
  std::string bytes[4][2];
  std::string written[4][2];
  bool written_first = true; ///< each read was written before it was handed on
  int ends = 0;
};

/// A rank whose two pipes the test writes: `write_ends` are the test's.
struct PipedRank {
  air::RankState state;
  air::UniqueFd write_ends[2];

  explicit PipedRank(std::size_t index) {
    state.index = index;
    for (int stream = 0; stream < 2; ++stream) {
      int fds[2];
      REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
      ::fcntl(fds[1], F_SETFL, 0); // the writer blocks, as a rank's does
      state.streams[stream].fd = air::UniqueFd(fds[0]);
      state.streams[stream].is_stderr = stream == 1;
      write_ends[stream] = air::UniqueFd(fds[1]);
    }
  }
};

/// `count` numbered lines of rank `rank`, stream `stream`.
std::string lines_of(std::size_t rank, int stream, int count) {
  std::string text;
  for (int i = 0; i < count; ++i)
    text += "r" + std::to_string(rank) + " s" + std::to_string(stream) + " " + std::to_string(i) + "\n";
  return text;
}

/// Writes all of `text` (from a writer thread: no REQUIRE there); a short
/// pipe shows as bytes missing on the reading side.
void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

/// Waits, without the lock, as the supervisor's loop does in poll, until
/// `done()` holds (checked under the lock) or 10 s pass.
template <class Done> bool wait_unlocked(std::mutex& lock, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    lock.lock();
  }
  return true;
}

} // namespace

TEST_CASE("pipe readers write and hand on each pipe's bytes in order and close it at its end") {
  std::mutex lock;
  Delivered got;
  air::PipeReaders readers(
      lock,
      [&](air::RankState& r, air::RankStream& s, std::string_view data) {
        got.written[r.index][s.index()].append(data); // by the rank's one reader only
      },
      [&](air::RankState& r, air::RankStream& s, std::string_view data, bool end) {
        if (end) {
          s.fd.reset();
          ++got.ends;
        } else {
          std::string& bytes = got.bytes[r.index][s.index()];
          bytes.append(data);
          if (got.written[r.index][s.index()] != bytes) got.written_first = false;
        }
      },
      2); // 3 ranks, 2 threads: the third shares one
  std::vector<std::unique_ptr<PipedRank>> ranks;
  for (std::size_t r = 0; r < 3; ++r) ranks.push_back(std::make_unique<PipedRank>(r));
  const std::lock_guard<std::mutex> held(lock);
  for (auto& r : ranks) readers.adopt(r->state);
  for (auto& r : ranks) {
    CHECK(r->state.streams[0].reader >= 0);
    CHECK(r->state.streams[0].reader == r->state.streams[1].reader); // a rank's pipes in one thread
  }
  CHECK(readers.ended_fd() >= 0);
  std::vector<std::thread> writers;
  for (auto& r : ranks) {
    for (int stream = 0; stream < 2; ++stream) {
      writers.emplace_back([&r, stream] {
        write_all(r->write_ends[stream].get(), lines_of(r->state.index, stream, 200000));
        r->write_ends[stream].reset(); // the end of the pipe
      });
    }
  }
  CHECK(wait_unlocked(lock, [&] { return got.ends == 6; }));
  lock.unlock();
  for (auto& w : writers) w.join();
  lock.lock();
  for (auto& r : ranks) {
    for (int stream = 0; stream < 2; ++stream) {
      CHECK(got.bytes[r->state.index][stream] == lines_of(r->state.index, stream, 200000));
      CHECK(got.written[r->state.index][stream] == got.bytes[r->state.index][stream]);
    }
  }
  CHECK(got.written_first);
  pollfd ended{readers.ended_fd(), POLLIN, 0};
  CHECK(::poll(&ended, 1, 0) == 1); // the supervisor's loop was told
  readers.clear_ended();
  CHECK(::poll(&ended, 1, 0) == 0);
  readers.stop();
}

TEST_CASE("park hands every pipe back once what was read is handed on, and nothing comes after") {
  std::mutex lock;
  Delivered got;
  air::PipeReaders readers(
      lock, [](air::RankState&, air::RankStream&, std::string_view) {},
      [&](air::RankState& r, air::RankStream& s, std::string_view data, bool end) {
        if (!end) got.bytes[r.index][s.index()].append(data);
      },
      4);
  PipedRank rank(0);
  const std::string text = lines_of(0, 0, 400000);
  const std::lock_guard<std::mutex> held(lock);
  readers.adopt(rank.state);
  std::thread writer([&] { write_all(rank.write_ends[0].get(), text); }); // the pipe stays open
  CHECK(wait_unlocked(lock, [&] { return got.bytes[0][0].size() > 100000; }));
  readers.park();
  CHECK(rank.state.streams[0].reader == -1);
  CHECK(rank.state.streams[1].reader == -1);
  CHECK_FALSE(readers.adopting()); // for the rest of the run
  // The pipe is the caller's now: its bytes follow what was handed on, and
  // the readers hand on nothing more.
  const std::size_t handed_on = got.bytes[0][0].size();
  std::string rest;
  char buffer[65536];
  while (rest.size() + handed_on < text.size()) {
    const ssize_t n = ::read(rank.state.streams[0].fd.get(), buffer, sizeof buffer);
    if (n > 0) {
      rest.append(buffer, static_cast<std::size_t>(n));
    } else {
      lock.unlock(); // the writer waits for room
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
  }
  lock.unlock();
  writer.join();
  lock.lock();
  CHECK(got.bytes[0][0].size() == handed_on);
  CHECK(got.bytes[0][0] + rest == text);
  readers.adopt(rank.state); // refused once parked
  CHECK(rank.state.streams[0].reader == -1);
  readers.stop();
}
