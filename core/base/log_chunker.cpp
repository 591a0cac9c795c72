#include "core/base/log_chunker.hpp"

#include <algorithm>

namespace air {

LogChunker::LogChunker(std::size_t max_piece) : max_piece_(std::max<std::size_t>(max_piece, 1)) {}

void LogChunker::feed(std::string_view data, const ChunkFn& on_chunk) {
  if (data.empty()) return;
  const auto last_newline = data.rfind('\n');
  if (last_newline != std::string_view::npos) {
    on_chunk(held_, data.substr(0, last_newline + 1)); // no copy of the new bytes
    held_.clear();
    data.remove_prefix(last_newline + 1);
  }
  held_.append(data);
  if (held_.size() >= max_piece_) {
    // A line this long would make the log's memory grow without bound: its
    // bytes go out now, and the rest of the line follows them in the file.
    on_chunk({}, held_);
    held_.clear();
  }
}

void LogChunker::finish(const ChunkFn& on_chunk) {
  if (!held_.empty()) on_chunk({}, held_);
  held_.clear();
}

} // namespace air
