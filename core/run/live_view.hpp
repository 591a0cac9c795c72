#pragma once

#include "core/base/environment.hpp"
#include "core/hw/nvml.hpp"
#include "core/run/live_status.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// A GPU the status area reports on: its UUID for NVML and what detection
/// already knows (fake GPUs are never looked up).
struct LiveGpuSource {
  int index = 0;
  std::string uuid;
  std::uint64_t memory_total_bytes = 0;
};

/// Whether the live status area may show: stderr is a terminal, CI is unset
/// (a CI log is no terminal, even under a pty), the user did not turn it off
/// (`live: false`, --no-live, AIR_RUN_LIVE=0), and escape codes are welcome
/// (NO_COLOR unset, TERM not "dumb"). Pure.
bool live_view_wanted(bool asked, bool stderr_is_tty, const Environment& env);

/// The terminal side of the live status area (its text: core/run/live_status.hpp).
/// The area sits under the scrolling rank output on `fd` (stderr). Rank lines
/// are written through `wrap`: erase the area, the lines, the area again, in
/// one write, so a redraw never tears or splits a rank line. Its text is
/// computed at most every 250 ms and GPUs are read at most once a second,
/// both from the supervisor's poll loop (deadlines, no thread).
///
/// Above the status lines the area holds the ranks' unfinished lines (a
/// progress bar updated with '\r'), one line each, so they show as they
/// change (redrawn at most every 50 ms) without tearing other ranks' lines;
/// a line leaves the area when its newline comes and it scrolls up. A view
/// made with `status` false holds only those.
///
/// Nothing of the terminal's settings changes (no cursor hiding, no raw mode):
/// erasing the area is all that `close` has to restore, and a run that dies
/// without it leaves one stale status line and a working terminal.
class LiveView {
public:
  /// `stdout_fd`: where rank stdout goes; it shares the area's terminal when
  /// it is the same terminal as `fd`. `nvml`: read the GPUs through NVML
  /// (false for fake GPUs and CPU runs).
  LiveView(int fd, int stdout_fd, std::vector<LiveGpuSource> gpus, bool nvml, bool color, bool status = true);

  /// Sets the unfinished line shown for `key` (a rank's stream), already
  /// prefixed; "" removes it. Shown at the next redraw: the next `tick` once
  /// due, or the next batch of lines.
  void set_partial(std::size_t key, const std::string& text);

  /// The terminal was resized (SIGWINCH): its width is read again. Between
  /// resizes the area uses the width it knows rather than asking the
  /// terminal at each rank's read (tick() also asks, at most every 50 ms).
  void resized();

  /// Whether writes to `fd` land on the area's terminal (and must be wrapped).
  bool wraps(int fd) const { return !closed_ && (fd == fd_ || (fd == stdout_fd_ && stdout_shared_)); }

  /// Text to put before lines written to a wrapped fd: erases the area.
  std::string erase() const { return erase_text(drawn_lines_); }
  /// Text to put after them: the area again (the current text).
  const std::string& redraw() {
    drawn_lines_ = lines_;
    drawn_text_ = text_;
    return text_;
  }

  /// When `tick` next has something to do.
  std::chrono::steady_clock::time_point next_deadline() const;

  /// Renders `snapshot` (with the GPU readings, re-read when a second has
  /// passed) when due, and returns the text to write (erase + area), else "".
  std::string tick(std::chrono::steady_clock::time_point now, LiveSnapshot snapshot);

  /// The text that erases the area for good; the view draws nothing after it.
  std::string close();

private:
  void sample(std::chrono::steady_clock::time_point now);
  void compose();

  int fd_;
  int stdout_fd_;
  int width_ = 80; ///< the terminal's columns: read at the start, on resized() and in tick()
  bool stdout_shared_ = false;
  bool color_;
  bool closed_ = false;
  std::vector<LiveGpuSource> sources_;
  std::vector<LiveGpu> gpus_;
  std::unique_ptr<NvmlLibrary> nvml_;
  bool use_nvml_;
  std::chrono::steady_clock::time_point next_render_{};
  std::chrono::steady_clock::time_point next_sample_{};
  bool status_ = true;
  std::vector<std::string> status_lines_;
  std::map<std::size_t, std::string> partials_; ///< unfinished lines by key, in key order
  bool partials_changed_ = false;
  std::chrono::steady_clock::time_point next_partial_draw_{};
  std::string text_;            ///< the area as last rendered
  std::size_t lines_ = 0;       ///< its line count
  std::size_t drawn_lines_ = 0; ///< the line count on screen now (0: not shown)
  std::string drawn_text_;      ///< the area's text on screen now
};

} // namespace air
