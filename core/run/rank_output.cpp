// Rank output: the ranks' pipes fanned out to logs, tail and console.
#include "core/run/rank_output.hpp"

#include "core/base/count_newlines.hpp"
#include "core/base/text.hpp"
#include "core/run/console_style.hpp"
#include "core/run/python_traceback.hpp"
#include "core/run/terminal_line.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace air {

namespace {

/// How long after a rank's exit the end of the run waits for its pipes to
/// close; past that, whatever holds them is a leftover (the sweep ends it).
constexpr auto k_drain_timeout = std::chrono::seconds(2);
/// How much of a reaped rank's pipes to read before judging how it failed.
constexpr int k_max_drain_reads = 16;
constexpr std::size_t k_read_size = 64 * 1024;
/// One tail entry keeps at most this much of a line: the tail is for the
/// human summary, and 50 lines of 1 MiB would be 50 MiB.
constexpr std::size_t k_tail_line_max = 4096;

} // namespace

RankOutput::RankOutput(const LaunchPlan& plan, RankTable& ranks, Console& console, RunOutcome& out,
                       const Teardown& teardown, HangClock& hang)
    : plan_(plan), ranks_(ranks), console_(console), out_(out), teardown_(teardown), hang_(hang),
      read_buf_(k_read_size) {}

bool RankOutput::open_logs() {
  const auto open = [&](const std::string& path, std::optional<LineSink>& sink) {
    auto fd = open_log_file(path);
    if (!fd) {
      out_.status = RunOutcome::Status::launch_failed;
      out_.reason = fd.error().message;
      return false;
    }
    sink.emplace(std::move(*fd));
    return true;
  };
  for (auto& r : ranks_) {
    if (!r.plan->log_file.empty() && !open(r.plan->log_file, r.log)) return false;
  }
  for (auto& r : ranks_) {
    for (int stream = 0; stream < 2; ++stream) {
      const std::string& path = r.plan->stream_files[stream];
      if (!path.empty() && !open(path, r.stream_logs[stream])) return false;
    }
  }
  for (int stream = 0; stream < 2; ++stream) {
    const std::string& path = plan_.filtered_files[stream];
    if (!path.empty() && !open(path, filtered_[stream])) return false;
  }
  return true;
}

void RankOutput::add_poll_fds(std::vector<pollfd>& fds,
                              std::vector<std::pair<RankState*, RankStream*>>& owners) const {
  for (auto& r : ranks_) {
    for (auto& s : r.streams) {
      if (!s.fd || held_back(r, s)) continue;
      fds.push_back({s.fd.get(), POLLIN, 0});
      owners.emplace_back(&r, &s);
    }
  }
}

bool RankOutput::held_back(const RankState& r, const RankStream& s) const {
  if (!r.plan->console || teardown_.active()) return false;
  return console_.full(s.index());
}

RankOutput::Clock::time_point RankOutput::drain_deadline(const RankState& r) const {
  auto from = std::max(r.reaped_at, teardown_.killed() ? teardown_.killed_at() : r.reaped_at);
  // A slow console that still takes output gets it all: count from its last progress.
  for (const auto& s : r.streams) {
    if (s.fd && held_back(r, s)) from = std::max(from, console_.last_progress(s.index()));
  }
  return from + k_drain_timeout;
}

bool RankOutput::read(RankState& r, RankStream& s) {
  const ssize_t n = ::read(s.fd.get(), read_buf_.data(), read_buf_.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n <= 0) {
    close(r, s); // EOF, or an error that ends the stream all the same
    return false;
  }
  deliver(r, s, std::string_view(read_buf_.data(), static_cast<std::size_t>(n)), false);
  return true;
}

void RankOutput::drain_ready(RankState& r) {
  for (auto& s : r.streams) {
    for (int i = 0; i < k_max_drain_reads && s.fd; ++i) {
      if (!read(r, s)) break;
    }
  }
}

void RankOutput::close_all() {
  for (auto& r : ranks_) {
    for (auto& s : r.streams) {
      while (s.fd) {
        const ssize_t n = ::read(s.fd.get(), read_buf_.data(), read_buf_.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        deliver(r, s, std::string_view(read_buf_.data(), static_cast<std::size_t>(n)), false);
      }
      close(r, s);
    }
  }
}

void RankOutput::close(RankState& r, RankStream& s) {
  if (!s.fd) return;
  deliver(r, s, {}, true);
  s.fd.reset();
}

void RankOutput::deliver(RankState& r, RankStream& s, std::string_view data, bool eof) {
  const bool echo = r.plan->console && r.plan->stream_console[s.index()];
  write_logs(r, s, data, eof);
  const std::size_t lines = take_lines(r, s, data, eof, echo);
  if (echo) update_partial(r, s);
  if (!data.empty()) {
    // Any byte is progress, a line's or a `\r` progress bar's that ends none.
    RankOutcome& o = out_.ranks[r.index];
    o.last_output_at = Clock::now();
    hang_.progress(*o.last_output_at);
  }
  if (lines == 0) {
    if (echo && r.reads_stdin) show_partial(r, s);
    return;
  }
  if (echo) {
    console_.write(s.index(), console_batch_, lines);
    if (r.reads_stdin) show_partial(r, s);
  }
}

/// The logs get the rank's bytes unchanged; only the console's view splits
/// an over-long line and ends a last line without a newline.
void RankOutput::write_logs(RankState& r, RankStream& s, std::string_view data, bool eof) {
  const int stream = s.index();
  const bool log = r.log.has_value() && !r.log->broken();
  std::optional<LineSink>& stream_log = r.stream_logs[stream];
  const bool to_stream_log = stream_log.has_value() && !stream_log->broken();
  if (!log && !to_stream_log) return;
  RankOutcome& o = out_.ranks[r.index];
  const auto write = [&](std::string_view bytes, std::size_t newlines) {
    if (log) {
      // One file for both streams: bytes of one that follow a line the
      // other left unfinished (its last line, a piece of an over-long one)
      // start on a line of their own, as they would in separate files.
      if (r.log_open_line >= 0 && r.log_open_line != stream) r.log->write("\n", 1);
      r.log->write(bytes, newlines);
      if (!bytes.empty()) r.log_open_line = bytes.back() == '\n' ? -1 : stream;
      if (r.log->broken()) o.log_error = "write " + r.plan->log_file + ": " + std::strerror(r.log->error());
    }
    if (to_stream_log) {
      stream_log->write(bytes, newlines);
      if (stream_log->broken())
        o.log_error = "write " + r.plan->stream_files[stream] + ": " + std::strerror(stream_log->error());
    }
  };
  if (eof)
    s.log_chunker.finish(write);
  else
    s.log_chunker.feed(data, write);
}

/// Splits `data` into lines for the filtered logs, the tail and (`echo`)
/// the console batch; returns how many whole lines came.
std::size_t RankOutput::take_lines(RankState& r, RankStream& s, std::string_view data, bool eof, bool echo) {
  const int stream = s.index();
  RankOutcome& o = out_.ranks[r.index];
  const auto tail_max = static_cast<std::size_t>(std::max(plan_.tail_lines, 0));
  console_batch_.clear();
  std::size_t lines = 0;
  // One stamp for the lines of one read: they arrived together.
  const std::string stamp =
      console_.options().timestamps && echo ? clock_stamp(std::chrono::system_clock::now()) : "";
  const auto& filters = plan_.duplicate_filters[stream];
  std::optional<LineSink>& filtered = filtered_[stream];
  filtered_batch_.clear();
  std::size_t filtered_lines = 0;
  // Only the last `tail_max` lines of a read can stay in the tail: the ones
  // before are skipped rather than copied in and dropped again. A line that
  // lies in `data` before its last `tail_max` whole lines has at least that
  // many lines after it (a piece of an over-long line too); a line held over
  // from an earlier read (not in `data`) is always taken.
  const auto data_begin = reinterpret_cast<std::uintptr_t>(data.data());
  const auto tail_from = reinterpret_cast<std::uintptr_t>(start_of_last_lines(data, tail_max));
  const auto on_line = [&](std::string_view raw) {
    ++lines;
    const auto at = reinterpret_cast<std::uintptr_t>(raw.data());
    const bool before_tail = at >= data_begin && at < tail_from;
    // torch's own "[rankN]: " is said once: by air-run's prefix (a rank's
    // log file keeps its bytes; only what is shown and reported changes).
    const std::string_view own = without_own_rank_prefix(raw, r.plan->rank);
    // Not when air-run adds none, nor under a prompt already shown whole.
    const std::string_view line = r.prefix_of(stream).empty() || s.shown_partial > 0 ? raw : own;
    // torchrun's --duplicate-*-filters: the line, prefixed, also in filtered_*.log.
    if (filtered.has_value() && std::any_of(filters.begin(), filters.end(),
                                            [&](const std::string& f) { return raw.find(f) != raw.npos; })) {
      filtered_batch_ += r.filter_prefix;
      filtered_batch_ += own;
      filtered_batch_ += '\n';
      ++filtered_lines;
    }
    if (echo) {
      if (s.shown_partial == 0) {
        console_batch_ += stamp;
        console_batch_ += r.prefix_of(stream);
      }
      if (s.tty && s.shown_partial == 0)
        append_visible_line(console_batch_, line); // a progress bar's final state, not every '\r' of it
      else
        console_batch_ += line.substr(std::min(s.shown_partial, line.size())); // a prompt already shown
      console_batch_ += '\n';
      s.shown_partial = 0;
    }
    if (tail_max > 0 && !before_tail) {
      // The tail goes into reports, which hold no escape sequence or NUL byte,
      // and keep what a terminal would show: a progress bar drawn with '\r'
      // off a terminal (CI, nohup, Slurm's logs) is one long line, and its
      // last state, not 4 KiB of earlier ones, is what comes before a crash.
      if (own.find('\r') == std::string_view::npos) {
        o.tail.emplace_back(strip_control_characters(own.substr(0, k_tail_line_max)));
      } else {
        const std::string shown = visible_line(own);
        o.tail.emplace_back(strip_control_characters(std::string_view(shown).substr(0, k_tail_line_max)));
      }
      while (o.tail.size() > tail_max) o.tail.pop_front();
    }
  };
  if (eof)
    s.splitter.finish(on_line);
  else
    s.splitter.feed(data, on_line);
  if (filtered_lines > 0 && !filtered->broken()) filtered->write(filtered_batch_, filtered_lines);
  return lines;
}

/// Shows a rank's unfinished line under the output (or takes it away), on a
/// pseudo-terminal stream that reaches the live area's terminal.
void RankOutput::update_partial(RankState& r, RankStream& s) {
  if (!s.tty || r.reads_stdin || !console_.shows_partials(s.index())) return;
  const std::size_t key = r.index * 2 + static_cast<std::size_t>(s.index());
  const std::string shown = s.splitter.has_partial() ? visible_line(s.splitter.partial()) : std::string();
  console_.set_partial(key, shown.empty() ? shown : r.prefix_of(s.index()) + shown);
}

/// Shows the unfinished line of the rank that reads the terminal as it
/// comes: an input() or pdb prompt ends without a newline and would
/// otherwise stay hidden while the rank waits for an answer.
void RankOutput::show_partial(RankState& r, RankStream& s) {
  const std::string_view partial = s.splitter.partial();
  if (partial.size() <= s.shown_partial) return;
  std::string text = s.shown_partial == 0 ? r.prefix_of(s.index()) : std::string();
  text += partial.substr(s.shown_partial);
  s.shown_partial = partial.size();
  console_.write_piece(s.index(), text);
}

} // namespace air
