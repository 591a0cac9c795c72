// Rank output: the ranks' pipes fanned out to logs, tail and console.
#include "core/run/output/rank_output.hpp"

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
constexpr std::size_t k_read_size = PipeReaders::k_read_size;
/// A read this large (a full pipe of the kernel's size) says the rank
/// prints in bulk: its pipes move to a pipe reader of their own.
constexpr std::size_t k_bulk_read = std::size_t{64} * 1024;
/// A read of a rank's terminal this full says its writer has more queued.
constexpr std::size_t k_terminal_read_full = 4000;
/// What one pass gathers from a rank's terminal at most.
constexpr std::size_t k_terminal_batch = std::size_t{64} * 1024;
/// Pipe readers at most: a thread per rank up to this many.
constexpr std::size_t k_most_pipe_readers = 64;
/// One tail entry keeps at most this much of a line: the tail is for the
/// human summary, and 50 lines of 1 MiB would be 50 MiB.
constexpr std::size_t k_tail_line_max = 4096;
/// Raw bytes kept for the tail before they are settled into it anyway
/// (besides the last read's last lines, at most a read).
constexpr std::size_t k_tail_pending_max = std::size_t{64} * 1024;

} // namespace

RankOutput::RankOutput(const LaunchPlan& plan, RankTable& ranks, Console& console, RunOutcome& out,
                       const Teardown& teardown, HangClock& hang)
    : plan_(plan), ranks_(ranks), console_(console), out_(out), teardown_(teardown), hang_(hang),
      read_buf_(new char[k_read_size]), tail_pending_(ranks.size()),
      readers_(
          lock_,
          [this](RankState& r, RankStream& s, std::string_view data) { write_logs(r, s, data, false); },
          [this](RankState& r, RankStream& s, std::string_view data, bool end) {
            if (end)
              close(r, s);
            else
              take(r, s, data, false);
          },
          std::min(ranks.size(), k_most_pipe_readers)) {}

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
      if (!s.fd || s.reader >= 0 || held_back(r, s)) continue;
      fds.push_back({s.fd.get(), POLLIN, 0});
      owners.emplace_back(&r, &s);
    }
  }
}

bool RankOutput::held_back(const RankState& r, const RankStream& s) const {
  if (!r.plan->console || teardown_.active()) return false;
  // Held back while anything waits for the console, not only once its
  // buffer is full: a terminal takes a few KiB a wakeup, and a pipe read
  // each time it takes some would be as small, each with a write, a wakeup
  // of the rank and a redraw of the live area of its own. Left in the pipe
  // meanwhile, the rank's bytes come in one read of up to a pipe's size
  // once the console has caught up.
  return console_.behind(s.index());
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
  if (s.reader >= 0) return false; // a pipe reader's now (handed over earlier in this pass)
  ssize_t n = ::read(s.fd.get(), read_buf_.get(), k_read_size);
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n <= 0) {
    close(r, s); // EOF, or an error that ends the stream all the same
    return false;
  }
  if (s.tty) n = static_cast<ssize_t>(read_more(s.fd.get(), static_cast<std::size_t>(n)));
  deliver(r, s, std::string_view(read_buf_.get(), static_cast<std::size_t>(n)), false);
  if (static_cast<std::size_t>(n) >= k_bulk_read && may_hand_over(r)) readers_.adopt(r);
  return true;
}

/// A terminal hands over at most its line discipline's buffer (4 KiB) a
/// read, however much its writer has queued behind it: while reads come
/// back that full, more is read into the same batch (to k_terminal_batch),
/// so that the console gets one write for many of them. `have`: the bytes
/// of the first read; returns the batch's size.
std::size_t RankOutput::read_more(int fd, std::size_t have) {
  std::size_t last = have;
  while (last >= k_terminal_read_full && have + k_terminal_read_full < k_terminal_batch) {
    const ssize_t n = ::read(fd, read_buf_.get() + have, k_read_size - have);
    if (n <= 0) break; // nothing more now (EAGAIN), or the end, which the next read finds again
    last = static_cast<std::size_t>(n);
    have += last;
  }
  return have;
}

/// Whether the pipes of `r` may be read by a pipe reader: one of several
/// ranks', running on, whose lines go to consoles that never make a writer
/// wait (a file, /dev/null: no lines held back, no live area) and that no
/// prompt or terminal needs shown as it comes.
bool RankOutput::may_hand_over(const RankState& r) const {
  return readers_.adopting() && ranks_.size() >= 2 && !r.reads_stdin && !r.reaped && !teardown_.active() &&
         console_.never_waits() && !r.streams[0].tty && !r.streams[1].tty;
}

void RankOutput::drain_ready(RankState& r) {
  readers_.park();
  for (auto& s : r.streams) {
    for (int i = 0; i < k_max_drain_reads && s.fd; ++i) {
      if (!read(r, s)) break;
    }
  }
  settle_tail(r); // the caller reads it
}

void RankOutput::close_all() {
  readers_.stop();
  for (auto& r : ranks_) {
    for (auto& s : r.streams) {
      while (s.fd) {
        const ssize_t n = ::read(s.fd.get(), read_buf_.get(), k_read_size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        deliver(r, s, std::string_view(read_buf_.get(), static_cast<std::size_t>(n)), false);
      }
      close(r, s);
    }
  }
}

void RankOutput::close(RankState& r, RankStream& s) {
  if (!s.fd) return;
  deliver(r, s, {}, true);
  s.fd.reset();
  settle_tail(r); // the reports read it
}

void RankOutput::deliver(RankState& r, RankStream& s, std::string_view data, bool eof) {
  write_logs(r, s, data, eof);
  take(r, s, data, eof);
}

void RankOutput::take(RankState& r, RankStream& s, std::string_view data, bool eof) {
  // Nothing is built for a console on /dev/null: nobody sees it.
  const bool echo = r.plan->console && r.plan->stream_console[s.index()] && !console_.discards(s.index());
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
    console_.write(s.index(), console_batch_, console_block_, lines);
    if (r.reads_stdin) show_partial(r, s);
  }
}

/// The logs get the rank's bytes unchanged; only the console's view splits
/// an over-long line and ends a last line without a newline. Touches only
/// what is the rank's own (its log files, its chunker, its log_error): a
/// pipe reader calls it without the lock.
void RankOutput::write_logs(RankState& r, RankStream& s, std::string_view data, bool eof) {
  const int stream = s.index();
  const bool log = r.log.has_value() && !r.log->broken();
  std::optional<LineSink>& stream_log = r.stream_logs[stream];
  const bool to_stream_log = stream_log.has_value() && !stream_log->broken();
  if (!log && !to_stream_log) return;
  RankOutcome& o = out_.ranks[r.index];
  // Lines are not counted for a log: a log file drops nothing but on an error, which ends it.
  const auto write = [&](std::string_view held, std::string_view bytes) {
    const std::string_view last = bytes.empty() ? held : bytes;
    if (log) {
      // One file for both streams: bytes of one that follow a line the
      // other left unfinished (its last line, a piece of an over-long one)
      // start on a line of their own, as they would in separate files.
      if (r.log_open_line >= 0 && r.log_open_line != stream) r.log->write("\n", 1);
      r.log->write(held, bytes, LineSink::k_uncounted);
      if (!last.empty()) r.log_open_line = last.back() == '\n' ? -1 : stream;
      if (r.log->broken()) o.log_error = "write " + r.plan->log_file + ": " + std::strerror(r.log->error());
    }
    if (to_stream_log) {
      stream_log->write(held, bytes, LineSink::k_uncounted);
      if (stream_log->broken())
        o.log_error = "write " + r.plan->stream_files[stream] + ": " + std::strerror(stream_log->error());
    }
  };
  if (eof)
    s.log_chunker.finish(write);
  else
    s.log_chunker.feed(data, write);
}

namespace {

/// `line` without torch's "[rankN]: " of this very rank. Inline the test of
/// the first byte: nearly no line starts with '['.
std::string_view own_line(std::string_view line, int rank) {
  return !line.empty() && line.front() == '[' ? without_own_rank_prefix(line, rank) : line;
}

/// Whether some line of `block` needs a terminal's treatment (a progress
/// bar's '\r', an escape sequence): two scans of the whole block rather
/// than two per line.
bool needs_visible_line(std::string_view block) {
  return std::memchr(block.data(), '\r', block.size()) != nullptr ||
         std::memchr(block.data(), '\x1b', block.size()) != nullptr;
}

/// Calls `fn` with each line of `block` (whole lines, each ended by '\n'),
/// without its '\n'.
template <class Fn> void for_each_line(std::string_view block, Fn&& fn) {
  const char* at = block.data();
  const char* const end = at + block.size();
  while (at < end) {
    const auto* newline = static_cast<const char*>(std::memchr(at, '\n', static_cast<std::size_t>(end - at)));
    fn(std::string_view(at, static_cast<std::size_t>(newline - at)));
    at = newline + 1;
  }
}

/// Copies the whole lines of `block` (each ended by '\n') to `out`, each
/// behind `prefix` and without torch's "[rankN]: " of this rank; adds the
/// lines to `counted`; returns the end of what it wrote. (A 16-byte loop
/// that copies and searches at once ran 10 % more instructions than libc's
/// AVX2 memchr and memcpy.)
char* prefix_lines(char* out, std::string_view block, std::string_view prefix, int rank,
                   std::size_t& counted) {
  const char* at = block.data();
  const char* const end = at + block.size();
  while (at < end) {
    const auto* newline = static_cast<const char*>(std::memchr(at, '\n', static_cast<std::size_t>(end - at)));
    const std::string_view own = own_line(std::string_view(at, static_cast<std::size_t>(newline - at)), rank);
    std::memcpy(out, prefix.data(), prefix.size());
    out += prefix.size();
    std::memcpy(out, own.data(), own.size() + 1); // with its '\n'
    out += own.size() + 1;
    ++counted;
    at = newline + 1;
  }
  return out;
}

} // namespace

/// Adds one line, without the rank's own prefix, to the tail kept for the reports.
void RankOutput::add_to_tail(RankOutcome& o, std::string_view own, std::size_t tail_max) {
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

/// Keeps whole raw lines (`lines` of them, each ended by '\n') for the tail,
/// unprocessed: a rank that prints fast sends its last 50 lines again with
/// every read, and only the last read's matter. A run of `tail_max` lines
/// or more replaces everything before it.
void RankOutput::keep_for_tail(RankState& r, std::string_view raw_lines, std::size_t lines) {
  const auto tail_max = static_cast<std::size_t>(std::max(plan_.tail_lines, 0));
  PendingTail& pending = tail_pending_[r.index];
  if (lines >= tail_max) {
    out_.ranks[r.index].tail.clear();
    pending.raw.assign(raw_lines);
    pending.lines = lines;
    return;
  }
  pending.raw.append(raw_lines);
  pending.lines += lines;
  // Bounded: a rank that prints a line at a time settles it now and then.
  if (pending.lines > 2 * tail_max || pending.raw.size() > k_tail_pending_max) settle_tail(r);
}

void RankOutput::settle_tail(RankState& r) {
  PendingTail& pending = tail_pending_[r.index];
  if (pending.lines == 0) return;
  const auto tail_max = static_cast<std::size_t>(std::max(plan_.tail_lines, 0));
  RankOutcome& o = out_.ranks[r.index];
  for_each_line(pending.raw,
                [&](std::string_view raw) { add_to_tail(o, own_line(raw, r.plan->rank), tail_max); });
  pending.raw.clear();
  pending.lines = 0;
}

/// Splits `data` into lines for the filtered logs, the tail and (`echo`)
/// the console (console_batch_, then console_block_); returns how many
/// whole lines came, LineSink::k_uncounted for some not counted.
std::size_t RankOutput::take_lines(RankState& r, RankStream& s, std::string_view data, bool eof, bool echo) {
  const int stream = s.index();
  RankOutcome& o = out_.ranks[r.index];
  const auto tail_max = static_cast<std::size_t>(std::max(plan_.tail_lines, 0));
  console_batch_.clear();
  console_block_ = {};
  std::size_t lines = 0;
  // One stamp for the lines of one read: they arrived together.
  const std::string stamp =
      console_.options().timestamps && echo ? clock_stamp(std::chrono::system_clock::now()) : "";
  const auto& filters = plan_.duplicate_filters[stream];
  std::optional<LineSink>& filtered = filtered_[stream];
  const bool filtering = filtered.has_value() && !filters.empty();
  const std::string& prefix = r.prefix_of(stream);
  filtered_batch_.clear();
  std::size_t filtered_lines = 0;
  // Only the last `tail_max` lines of a read can stay in the tail: the ones
  // before are skipped rather than copied in and dropped again. A line that
  // lies in `data` before its last `tail_max` whole lines has at least that
  // many lines after it (a piece of an over-long line too); a line held over
  // from an earlier read (not in `data`) is always taken.
  const char* const tail_from = start_of_last_lines(data, tail_max);
  const auto data_begin = reinterpret_cast<std::uintptr_t>(data.data());
  const auto tail_begin = reinterpret_cast<std::uintptr_t>(tail_from);
  const auto on_line = [&](std::string_view raw) {
    ++lines;
    const auto at = reinterpret_cast<std::uintptr_t>(raw.data());
    const bool before_tail = at >= data_begin && at < tail_begin;
    // torch's own "[rankN]: " is said once: by air-run's prefix (a rank's
    // log file keeps its bytes; only what is shown and reported changes).
    const std::string_view own = own_line(raw, r.plan->rank);
    // Not when air-run adds none, nor under a prompt already shown whole.
    const std::string_view line = prefix.empty() || s.shown_partial > 0 ? raw : own;
    // torchrun's --duplicate-*-filters: the line, prefixed, also in filtered_*.log.
    if (filtering && std::any_of(filters.begin(), filters.end(),
                                 [&](const std::string& f) { return raw.find(f) != raw.npos; })) {
      filtered_batch_ += r.filter_prefix;
      filtered_batch_ += own;
      filtered_batch_ += '\n';
      ++filtered_lines;
    }
    if (echo) {
      if (s.shown_partial == 0) {
        console_batch_ += stamp;
        console_batch_ += prefix;
      }
      if (s.tty && s.shown_partial == 0)
        append_visible_line(console_batch_, line); // a progress bar's final state, not every '\r' of it
      else
        console_batch_ += line.substr(std::min(s.shown_partial, line.size())); // a prompt already shown
      console_batch_ += '\n';
      s.shown_partial = 0;
    }
    if (tail_max > 0 && !before_tail) {
      if (raw.size() > k_tail_line_max) {
        // A long line (a piece of up to 1 MiB) is not kept raw: the tail keeps 4 KiB of it.
        settle_tail(r);
        add_to_tail(o, own, tail_max);
      } else {
        tail_line_.assign(raw);
        tail_line_ += '\n';
        keep_for_tail(r, tail_line_, 1);
      }
    }
  };
  if (eof) {
    s.splitter.finish(on_line);
  } else {
    // The whole lines of the read that follow a held-over one come back in
    // one piece: nearly always nothing in them needs a line of its own, and
    // they are taken in bulk.
    const std::string_view block = s.splitter.feed_block(data, on_line);
    if (!block.empty()) {
      if (filtering ||
          (echo && (!stamp.empty() || s.shown_partial > 0 || (s.tty && needs_visible_line(block))))) {
        for_each_line(block, on_line);
      } else {
        lines = take_block(r, s, block, echo, tail_from, tail_max, lines);
      }
    }
  }
  if (filtered_lines > 0 && !filtered->broken()) filtered->write(filtered_batch_, filtered_lines);
  return lines;
}

/// The bulk of a read: whole lines that need nothing of their own on the
/// console but the prefix (no stamp, no terminal's '\r', no filter), after
/// the `counted` lines take_lines took one by one. Without a prefix the
/// console writes them as they are, from the read buffer; with one, they
/// are copied behind their prefixes in a tight loop. The tail keeps the
/// lines from `tail_from` on, raw. Returns the lines taken in all, or
/// LineSink::k_uncounted when not counted (some, at least one).
std::size_t RankOutput::take_block(RankState& r, RankStream& s, std::string_view block, bool echo,
                                   const char* tail_from, std::size_t tail_max, std::size_t counted) {
  const std::string& prefix = r.prefix_of(s.index());
  const int rank = r.plan->rank;
  if (echo && !prefix.empty()) {
    // Written through a pointer into a buffer big enough for the worst case
    // (every line empty): no capacity check per line. Pages the common case
    // never reaches are never touched.
    const std::size_t most = block.size() * (prefix.size() + 1);
    if (prefixed_size_ < most) {
      prefixed_.reset(new char[most]);
      prefixed_size_ = most;
    }
    char* const out = prefix_lines(prefixed_.get(), block, prefix, rank, counted);
    console_block_ = std::string_view(prefixed_.get(), static_cast<std::size_t>(out - prefixed_.get()));
  } else if (echo) {
    console_block_ = block; // no prefix: the rank's bytes are the console's
    counted = LineSink::k_uncounted;
  }
  if (tail_max > 0) {
    // After the held-over line, `tail_from` starts the last `tail_max` lines
    // of the read, which all lie in the block; before it, the block has fewer.
    const char* const from = std::max(tail_from, block.data());
    const std::string_view last = block.substr(static_cast<std::size_t>(from - block.data()));
    keep_for_tail(r, last, from == tail_from && from > block.data() ? tail_max : count_newlines(last));
  }
  return counted;
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
