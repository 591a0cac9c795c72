// The console: air-run's stdout and stderr and the live area under the ranks' lines.
#include "core/run/console.hpp"

#include "core/base/count_newlines.hpp"

#include <unistd.h>

namespace air {

namespace {

/// A batch of the area's terminal is written once it holds this much: a
/// pass over many ranks' pipes (1 MiB reads off a terminal) keeps no more.
constexpr std::size_t k_most_batched = std::size_t{1} << 20;

} // namespace

Console::Console(const ConsoleOptions& options)
    : options_(options), shared_(same_waiting_destination(options.stdout_fd, options.stderr_fd)),
      stdout_(options.stdout_fd), stderr_(shared_ ? -1 : options.stderr_fd) {}

void Console::write(int stream, std::string_view first, std::string_view second, std::size_t lines) {
  if (!live_ || !live_->wraps(fd(stream))) {
    sink(stream).write(first, second, lines);
    return;
  }
  // The area's own lines are not the ranks': a dropped batch counts only these.
  if (lines == LineSink::k_uncounted) lines = count_newlines(first) + count_newlines(second);
  if (batch_stream_ >= 0 && batch_stream_ != stream) write_batch(); // each stream's lines in their order
  if (batch_stream_ < 0) {
    live_batch_ = live_->erase();
    batch_stream_ = stream;
    batch_lines_ = 0;
  }
  live_batch_ += first;
  live_batch_ += second;
  batch_lines_ += lines;
  if (!batching_ || live_batch_.size() >= k_most_batched) write_batch();
}

void Console::write_batch() {
  if (batch_stream_ < 0) return;
  live_batch_ += live_->redraw();
  area_sink().write(live_batch_, batch_lines_);
  batch_stream_ = -1;
}

void Console::resized() {
  if (live_) live_->resized();
}

void Console::write_piece(int stream, std::string_view text) {
  write_batch(); // a prompt shown during a pass comes after the lines gathered before it
  sink(stream).write(text, 0);
}

void Console::add_poll_fds(std::vector<pollfd>& fds) const {
  for (const LineSink* s : {&stdout_, &stderr_}) {
    if (s->pending()) fds.push_back({s->poll_fd(), POLLOUT, 0});
  }
}

void Console::flush() {
  stdout_.flush();
  stderr_.flush();
}

void Console::start_live(bool prompt) {
  // Without the status (--no-live, -q) the area still carries the ranks'
  // unfinished lines when they have terminals; not beside a rank's prompt
  // (--stdin), which owns the last line.
  const bool partials =
      (options_.stdout_tty || options_.stderr_tty) && ::isatty(options_.stderr_fd) == 1 && !prompt;
  if (!options_.live && !partials) return;
  live_.emplace(options_.stderr_fd, options_.stdout_fd, options_.live_gpus, options_.live_nvml,
                options_.stderr_color, options_.live);
}

bool Console::shows_partials(int stream) const { return live_ && live_->wraps(fd(stream)); }

void Console::set_partial(std::size_t key, const std::string& text) {
  if (live_) live_->set_partial(key, text);
}

std::optional<std::chrono::steady_clock::time_point> Console::next_deadline() const {
  if (!live_) return std::nullopt;
  // A console that is behind gets no redraw (live_tick): the terminal's
  // POLLOUT wakes the loop then, not the area's clock, whose passed deadline
  // would make every poll return at once until the terminal caught up.
  if (stdout_.pending() || stderr_.pending()) return std::nullopt;
  return live_->next_deadline();
}

void Console::live_tick(std::chrono::steady_clock::time_point now,
                        const std::function<LiveSnapshot()>& snapshot) {
  if (!live_ || now < live_->next_deadline()) return;
  // A console that is behind gets no redraw now: the next batch of lines
  // brings the area along anyway.
  if (stdout_.pending() || stderr_.pending()) return;
  const std::string text = live_->tick(now, snapshot());
  if (text.empty()) return;
  area_sink().write(text, 0);
}

void Console::stop_live() {
  if (!live_) return;
  const std::string text = live_->close();
  if (!text.empty()) area_sink().write(text, 0);
  live_.reset();
}

std::uint64_t Console::finish(int stall_ms) {
  stdout_.finish(stall_ms);
  stderr_.finish(stall_ms);
  return stdout_.lines_dropped() + stderr_.lines_dropped();
}

} // namespace air
