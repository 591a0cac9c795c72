// Pipe readers: the pipes of ranks that print in bulk, read beside their writers.
#include "core/run/output/pipe_readers.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <system_error>

namespace air {

namespace {

UniqueFd make_eventfd() { return UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

void signal_eventfd(int fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one); // full only after 2^64 - 1 wakes
}

void clear_eventfd(int fd) {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = ::read(fd, &count, sizeof count);
}

/// What read_batch() took from a pipe.
struct Batch {
  std::size_t size = 0; ///< bytes at the start of the buffer
  bool ended = false;   ///< the pipe ended (EOF, or an error that ends it all the same)
};

/// Reads `fd` into `buffer` (PipeReaders::k_read_size) until the pipe is
/// empty or the buffer full: a small pipe's reads, handed on together.
Batch read_batch(int fd, char* buffer) {
  Batch batch;
  while (batch.size < PipeReaders::k_read_size) {
    const ssize_t n = ::read(fd, buffer + batch.size, PipeReaders::k_read_size - batch.size);
    if (n > 0) {
      batch.size += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    batch.ended = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    break;
  }
  return batch;
}

} // namespace

PipeReaders::PipeReaders(std::mutex& lock, Write write, Deliver deliver, std::size_t most_threads)
    : lock_(lock), write_(std::move(write)), deliver_(std::move(deliver)), most_threads_(most_threads) {
  readers_.reserve(most_threads_); // start_reader() appends a running thread: no reallocation then
}

PipeReaders::~PipeReaders() {
  if (readers_.empty()) return;
  {
    const std::lock_guard<std::mutex> held(lock_);
    stopping_ = true;
    for (const auto& r : readers_) wake(*r);
  }
  stopped_.notify_all();
  for (const auto& r : readers_) {
    if (r->thread.joinable()) r->thread.join();
  }
}

void PipeReaders::wake(const Reader& r) { signal_eventfd(r.wake.get()); }

void PipeReaders::clear_ended() const {
  if (ended_) clear_eventfd(ended_.get());
}

void PipeReaders::adopt(RankState& r) {
  if (!adopting() || r.streams[0].reader >= 0 || r.streams[1].reader >= 0) return; // adopted already
  int index = 0;
  if (readers_.size() < most_threads_) {
    const Reader* started = start_reader();
    if (started == nullptr) return; // no thread: the supervisor's loop goes on reading them
    index = started->index;
  } else {
    index = static_cast<int>(adopted_ % readers_.size()); // every thread runs: the ranks share them in turn
  }
  ++adopted_;
  Reader& reader = *readers_[static_cast<std::size_t>(index)];
  for (RankStream& s : r.streams) {
    if (!s.fd) continue;
    reader.pipes.push_back({&r, &s});
    s.reader = index;
  }
  wake(reader);
}

/// A new thread, with every signal blocked from its first instruction on
/// (the supervisor takes them through its signalfd); nullptr if none starts.
PipeReaders::Reader* PipeReaders::start_reader() {
  if (!ended_) ended_ = make_eventfd();
  auto reader = std::make_unique<Reader>();
  reader->index = static_cast<int>(readers_.size());
  reader->wake = make_eventfd();
  if (!ended_ || !reader->wake) return nullptr;
  reader->buffer.reset(new char[k_read_size]); // not zeroed: only what a read fills is touched
  sigset_t all;
  sigset_t old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    Reader& me = *reader;
    reader->thread = std::thread([this, &me] { run(me); });
  } catch (const std::system_error&) {
    reader->thread = std::thread();
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!reader->thread.joinable()) return nullptr;
  ::pthread_setname_np(reader->thread.native_handle(), "air-run-read");
  readers_.push_back(std::move(reader));
  return readers_.back().get();
}

void PipeReaders::park() {
  if (parked_) return;
  parked_ = true;
  for (const auto& r : readers_) wake(*r);
  idle_.wait(lock_, [this] {
    return std::none_of(readers_.begin(), readers_.end(), [](const auto& r) { return r->busy; });
  });
  for (const auto& r : readers_) {
    for (const Owned& o : r->pipes) o.stream->reader = -1;
    r->pipes.clear();
  }
}

void PipeReaders::stop() {
  park();
  if (readers_.empty()) return;
  stopping_ = true;
  stopped_.notify_all();
  lock_.unlock(); // each thread takes the lock once more on its way out
  for (const auto& r : readers_) r->thread.join();
  lock_.lock();
  readers_.clear();
}

/// A reader's loop: poll its pipes without the lock, read each ready one
/// and write it to the rank's logs without the lock, hand on the rest
/// under it.
void PipeReaders::run(Reader& me) {
  std::unique_lock<std::mutex> held(lock_);
  std::vector<pollfd> fds;
  std::vector<std::size_t> polled; ///< indices into me.pipes (adopt() may append meanwhile)
  while (!stopping_ && !parked_) {
    fds.clear();
    polled.clear();
    for (std::size_t i = 0; i < me.pipes.size(); ++i) {
      const RankStream& s = *me.pipes[i].stream;
      if (s.reader != me.index || !s.fd) continue;
      fds.push_back({s.fd.get(), POLLIN, 0});
      polled.push_back(i);
    }
    fds.push_back({me.wake.get(), POLLIN, 0});
    // Busy until what it reads is handed on: park() waits for that, so that
    // no read of a pipe it takes back is still on its way.
    me.busy = true;
    held.unlock();
    if (::poll(fds.data(), fds.size(), -1) > 0 && fds.back().revents != 0) clear_eventfd(me.wake.get());
    held.lock();
    for (std::size_t i = 0; i + 1 < fds.size() && !parked_ && !stopping_; ++i) {
      if (fds[i].revents == 0) continue;
      // The pipe is this thread's until park(), which waits for it, so its
      // descriptor stays open (only its owner closes it) while read unlocked.
      // me.pipes may grow meanwhile (adopt() under the lock): copy the entry.
      const Owned pipe = me.pipes[polled[i]];
      held.unlock();
      const Batch batch = read_batch(fds[i].fd, me.buffer.get());
      if (batch.size > 0) write_(*pipe.rank, *pipe.stream, std::string_view(me.buffer.get(), batch.size));
      held.lock();
      if (batch.size > 0)
        deliver_(*pipe.rank, *pipe.stream, std::string_view(me.buffer.get(), batch.size), false);
      if (batch.ended) {
        deliver_(*pipe.rank, *pipe.stream, {}, true);
        signal_eventfd(ended_.get()); // the supervisor's loop: is the run over?
      }
    }
  }
  me.busy = false;
  idle_.notify_all();
  stopped_.wait(held, [this] { return stopping_; });
}

} // namespace air
