#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace air {

/// Turns a byte stream that arrives in arbitrary chunks into lines. A line
/// may span several reads; a final line without '\n' is delivered by
/// `finish()`; a line longer than `max_line` bytes is delivered in pieces of
/// `max_line` bytes so one runaway rank cannot make air-run buffer without
/// bound. Lines are passed without their '\n'. Pure: no I/O.
class LineSplitter {
public:
  /// Receives one line (or one piece of an over-long line). The view is valid
  /// only during the call.
  using LineFn = std::function<void(std::string_view)>;

  static constexpr std::size_t k_default_max_line = std::size_t{1} << 20; // 1 MiB

  explicit LineSplitter(std::size_t max_line = k_default_max_line);

  /// Consumes `data`, calling `on_line` for every line it completes.
  void feed(std::string_view data, const LineFn& on_line);

  /// Consumes `data` like feed(), for a caller that takes whole lines in
  /// bulk: `on_line` gets only what needs the splitter's own buffer (the line
  /// that a held-over piece starts, pieces of an over-long line); the whole
  /// lines that lie in `data` after it come back as one view, each ended by
  /// its '\n' (empty when there are none). They follow the lines given to
  /// `on_line`, and come before what is held for the next call. Per line,
  /// the same lines as feed() in the same order; one indirect call per read
  /// instead of one per line.
  std::string_view feed_block(std::string_view data, const LineFn& on_line);

  /// End of stream: delivers a pending partial line, if any.
  void finish(const LineFn& on_line);

  /// Whether bytes of an unfinished line are buffered.
  bool has_partial() const { return !pending_.empty(); }
  /// The bytes of the unfinished line buffered so far (a prompt such as "(Pdb) ").
  std::string_view partial() const { return pending_; }

private:
  void append_segment(std::string_view segment, const LineFn& on_line);

  std::size_t max_line_;
  std::string pending_;
  /// The last delivery was a forced piece of an over-long line, so the '\n'
  /// that ends it must not produce an extra empty line.
  bool split_line_ = false;
};

} // namespace air
