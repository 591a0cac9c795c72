#pragma once

#include "core/base/unique_fd.hpp"

#include <poll.h>

#include <optional>
#include <string>
#include <utility>

namespace air {

/// The stdin relay: moves air-run's stdin into the pipe of the rank that
/// reads it (ConsoleOptions::stdin_rank: breakpoint(), pdb). The rank's stdin
/// is a pipe, not the terminal: air-run stays the terminal's foreground
/// group, so Ctrl-C still stops the run the usual way, while the terminal (in
/// its usual line mode) echoes what is typed and hands it over a line at a time.
class StdinRelay {
public:
  /// `input`: what is relayed (air-run's stdin; a pipe in tests).
  explicit StdinRelay(int input = 0) : input_(input) {}

  /// Starts relaying into `rank_stdin`, the write end of the rank's stdin pipe.
  void attach(UniqueFd rank_stdin) { rank_stdin_ = std::move(rank_stdin); }
  /// Whether the rank's pipe is still open.
  bool attached() const { return static_cast<bool>(rank_stdin_); }
  /// What to poll for next: the input while nothing waits for the rank (and,
  /// on a terminal, air-run is in the foreground: a background read would
  /// stop air-run with SIGTTIN), else the rank's pipe while input waits for
  /// it; nullopt: neither.
  std::optional<pollfd> poll_entry() const;
  /// After poll: moves what the input has into the rank's pipe.
  /// `readable`: the input is ready; `writable`: the rank's pipe is.
  void forward(bool readable, bool writable);
  /// After poll reported `entry` (one poll_entry gave) ready.
  void forward(const pollfd& entry) { forward(entry.fd == input_, entry.fd != input_); }
  /// Stops relaying: the rank ended or closed its stdin.
  void stop();

private:
  bool input_wanted() const;

  int input_;
  UniqueFd rank_stdin_; ///< the pipe's write end (nonblocking)
  std::string pending_; ///< what the rank's pipe has not taken yet
  bool ended_ = false;  ///< the input has ended
};

} // namespace air
