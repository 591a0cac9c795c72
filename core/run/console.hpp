#pragma once

#include "core/base/speaker.hpp"
#include "core/os/log_sink.hpp"
#include "core/run/live_view.hpp"
#include "core/run/supervisor.hpp"

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// Whole lines on their way to the console, with how many they are (the
/// console counts what it drops in lines).
struct ConsoleBatch {
  std::string text;
  std::size_t lines = 0;

  /// Appends one line of air-run's own ("air-run: " + `line` + "\n"; the
  /// console names the node on its way out).
  void say(const std::string& line) {
    text += "air-run: " + line + "\n";
    ++lines;
  }
};

/// The console: air-run's stdout and stderr, written without blocking the
/// loop (core/os/log_sink.hpp), and the live status area under the rank
/// output (core/run/live_view.hpp). Streams are numbered 0 (stdout) and 1
/// (stderr) as the ranks' are.
class Console {
public:
  explicit Console(const ConsoleOptions& options);

  const ConsoleOptions& options() const { return options_; }
  /// Writes whole lines to `stream`. On the live area's terminal they go out
  /// in one write between the area's erase and its redraw, so the area never
  /// splits a line and always ends up under the newest one.
  void write(int stream, std::string_view batch, std::size_t lines) { write(stream, batch, {}, lines); }
  /// The same for a batch in two pieces, `first` then `second` (no joined
  /// copy); `lines` may be LineSink::k_uncounted.
  void write(int stream, std::string_view first, std::string_view second, std::size_t lines);
  /// Whether `stream` goes to /dev/null: its lines need not be built at all.
  bool discards(int stream) const { return sink(stream).discards(); }
  /// Writes `batch` to stderr, when it holds any line: air-run's own lines,
  /// which name the node in a job of several (core/base/speaker.hpp).
  void write(const ConsoleBatch& batch) {
    if (batch.lines > 0) say(batch.text, batch.lines);
  }
  /// Writes `lines` whole lines of air-run's own to stderr, each "air-run: ..."
  /// naming the node in a job of several (said()). Never a rank's lines:
  /// those stay as the rank wrote them.
  void say(std::string_view text, std::size_t lines = 1) { write(1, said(text), lines); }
  /// Between begin_batch() and end_batch() (one pass over the ranks' ready
  /// pipes), the lines bound for the live area's terminal go out together:
  /// one erase, every rank's lines, one redraw, one write, rather than all
  /// three for each read (a rank on a terminal is read 4 KiB at a time).
  /// A batch is also written when it changes stream or reaches 1 MiB;
  /// outside a pass every write goes out at once, so nothing waits then.
  void begin_batch() { batching_ = true; }
  /// Writes what the pass gathered (see begin_batch()).
  void end_batch() {
    batching_ = false;
    write_batch();
  }
  /// The terminal was resized: the live area takes its new width.
  void resized();
  /// Writes a piece of a line (a rank's prompt): no line is counted, the area is not redrawn.
  void write_piece(int stream, std::string_view text);
  /// Whether no write to either stream ever waits or is held back: each
  /// goes to a file or /dev/null, and there is no live area.
  bool never_waits() const { return !live_ && stdout_.never_waits() && stderr_.never_waits(); }
  /// Whether `stream` has bytes its reader has not taken yet: the ranks'
  /// pipes wait until they are written (RankOutput::held_back).
  bool behind(int stream) const { return sink(stream).pending(); }
  /// When `stream` last took anything.
  std::chrono::steady_clock::time_point last_progress(int stream) const {
    return sink(stream).last_progress();
  }
  /// Adds the descriptors that have output waiting to `fds` (POLLOUT).
  void add_poll_fds(std::vector<pollfd>& fds) const;
  /// Writes what waits, after poll said a descriptor takes more.
  void flush();

  /// Turns the live area on (when the options ask for it), once the ranks
  /// run. `prompt`: a rank reads the terminal (--stdin), and its prompt owns the last line.
  void start_live(bool prompt);
  /// Whether writes to `stream` land on the live area's terminal, which
  /// shows the ranks' unfinished lines.
  bool shows_partials(int stream) const;
  /// Sets the unfinished line of `key` (a rank's stream) shown in the area; "" removes it.
  void set_partial(std::size_t key, const std::string& text);
  /// When the area wants redrawing; nullopt without an area, or while the
  /// console is behind (it is redrawn with the next lines then).
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const;
  /// Redraws the area when its deadline has come, with `snapshot()`.
  void live_tick(std::chrono::steady_clock::time_point now, const std::function<LiveSnapshot()>& snapshot);
  /// Erases the area for good: the run is over, the report follows.
  void stop_live();
  /// Writes what is left, giving up after `stall_ms` without progress; the
  /// lines dropped on both streams, all run long.
  std::uint64_t finish(int stall_ms);

private:
  /// Both streams' sink is stdout_'s where they lead to the same terminal
  /// or pipe: two buffers of their own would let one stream's lines pass
  /// what waits in the other's (the live area's erase landing on the wrong
  /// lines, an old redraw shown after newer lines).
  LineSink& sink(int stream) { return stream == 1 && !shared_ ? stderr_ : stdout_; }
  const LineSink& sink(int stream) const { return stream == 1 && !shared_ ? stderr_ : stdout_; }
  /// Where the live area and the lines it wraps go: stderr's sink, which is
  /// stdout's too when the area wraps stdout (the same terminal: shared_).
  LineSink& area_sink() { return sink(1); }
  int fd(int stream) const { return stream == 1 ? options_.stderr_fd : options_.stdout_fd; }
  /// Writes the gathered lines, wrapped in the area's erase and redraw.
  void write_batch();

  ConsoleOptions options_;
  bool shared_; ///< stdout and stderr lead to the same terminal or pipe: one sink
  LineSink stdout_;
  LineSink stderr_;              ///< unused (fd -1) when shared_
  std::optional<LiveView> live_; ///< the live status area, when on
  std::string live_batch_;       ///< a console batch wrapped in the area's erase and redraw
  int batch_stream_ = -1;        ///< the stream live_batch_ holds lines of; -1: none gathered
  std::size_t batch_lines_ = 0;  ///< the lines in live_batch_
  bool batching_ = false;        ///< between begin_batch() and end_batch()
};

} // namespace air
