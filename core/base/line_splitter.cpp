#include "core/base/line_splitter.hpp"

#include <algorithm>

namespace air {

LineSplitter::LineSplitter(std::size_t max_line) : max_line_(std::max<std::size_t>(max_line, 1)) {}

void LineSplitter::feed(std::string_view data, const LineFn& on_line) {
  while (!data.empty()) {
    const auto newline = data.find('\n');
    if (newline == std::string_view::npos) {
      append_segment(data, on_line);
      return;
    }
    const std::string_view segment = data.substr(0, newline);
    if (pending_.empty() && !split_line_ && segment.size() <= max_line_) {
      on_line(segment); // common case: a whole line inside one read, no copy
    } else {
      append_segment(segment, on_line);
      // A line that ended exactly on a piece boundary was already delivered.
      if (!pending_.empty() || !split_line_) on_line(pending_);
      pending_.clear();
    }
    split_line_ = false;
    data.remove_prefix(newline + 1);
  }
}

std::string_view LineSplitter::feed_block(std::string_view data, const LineFn& on_line) {
  // A line in the block could be longer than the cap only if `data` is: then
  // line by line, as feed() does (pieces are the cap's business).
  if (data.size() > max_line_) {
    feed(data, on_line);
    return {};
  }
  const auto first = data.find('\n');
  if (first == std::string_view::npos) {
    append_segment(data, on_line);
    return {};
  }
  std::size_t begin = 0;
  if (!pending_.empty() || split_line_) {
    feed(data.substr(0, first + 1), on_line); // the held-over line, ended here
    begin = first + 1;
  }
  const auto last = data.rfind('\n');
  const std::string_view block = data.substr(begin, last + 1 - begin);
  append_segment(data.substr(last + 1), on_line);
  return block;
}

void LineSplitter::finish(const LineFn& on_line) {
  if (!pending_.empty()) on_line(pending_);
  pending_.clear();
  split_line_ = false;
}

void LineSplitter::append_segment(std::string_view segment, const LineFn& on_line) {
  while (!segment.empty()) {
    if (pending_.empty() && segment.size() >= max_line_) {
      on_line(segment.substr(0, max_line_));
      split_line_ = true;
      segment.remove_prefix(max_line_);
      continue;
    }
    const std::size_t take = std::min(max_line_ - pending_.size(), segment.size());
    pending_.append(segment.substr(0, take));
    segment.remove_prefix(take);
    if (pending_.size() == max_line_) {
      on_line(pending_);
      pending_.clear();
      split_line_ = true;
    }
  }
}

} // namespace air
