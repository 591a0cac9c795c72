#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace air {

/// Passes one stream of a rank's output on to its log byte for byte, in
/// pieces that end at a newline whenever one comes: a log that gets two
/// streams (stdout and stderr) then never mixes them inside a line. Unlike
/// LineSplitter (the console's view), it adds nothing: a line longer than
/// `max_piece` is passed on in pieces without a newline between them, and a
/// last line without a newline stays without one. Pure: no I/O.
class LogChunker {
public:
  /// Receives bytes to write as they are, in two pieces that go out one
  /// after the other as one write: what was held from earlier calls (often
  /// nothing) and what followed it. Two pieces rather than one joined copy:
  /// a read nearly always ends inside a line, and joining would copy every
  /// byte once more.
  using ChunkFn = std::function<void(std::string_view held, std::string_view bytes)>;

  static constexpr std::size_t k_default_max_piece = std::size_t{1} << 20; // 1 MiB

  explicit LogChunker(std::size_t max_piece = k_default_max_piece);

  /// Consumes `data`: passes on everything up to its last newline (with what
  /// was held before it), holds the rest, unless that is `max_piece` or more.
  void feed(std::string_view data, const ChunkFn& on_chunk);

  /// End of stream: passes on what is held, if anything.
  void finish(const ChunkFn& on_chunk);

private:
  std::size_t max_piece_;
  std::string held_;
};

} // namespace air
