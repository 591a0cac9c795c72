// The stdin relay: air-run's stdin into the --stdin rank's pipe.
#include "core/run/stdin_relay.hpp"

#include <unistd.h>

#include <cerrno>

namespace air {

bool StdinRelay::input_wanted() const {
  if (!rank_stdin_ || ended_ || !pending_.empty()) return false;
  return ::isatty(input_) != 1 || ::tcgetpgrp(input_) == ::getpgrp();
}

std::optional<pollfd> StdinRelay::poll_entry() const {
  if (input_wanted()) return pollfd{input_, POLLIN, 0};
  if (rank_stdin_ && !pending_.empty()) return pollfd{rank_stdin_.get(), POLLOUT, 0};
  return std::nullopt;
}

void StdinRelay::forward(bool readable, bool writable) {
  if (readable) {
    char buf[4096];
    const ssize_t n = ::read(input_, buf, sizeof buf);
    if (n > 0) {
      pending_.append(buf, static_cast<std::size_t>(n));
      writable = true;
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      ended_ = true; // EOF (Ctrl-D) reaches the rank once it took the rest
    }
  }
  if (writable && rank_stdin_ && !pending_.empty()) {
    const ssize_t n = ::write(rank_stdin_.get(), pending_.data(), pending_.size());
    if (n > 0)
      pending_.erase(0, static_cast<std::size_t>(n));
    else if (n < 0 && errno != EAGAIN && errno != EINTR)
      stop(); // EPIPE: the rank closed its stdin
  }
  if (ended_ && pending_.empty()) rank_stdin_.reset();
}

void StdinRelay::stop() {
  rank_stdin_.reset();
  pending_.clear();
}

} // namespace air
