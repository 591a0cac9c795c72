#pragma once

#include "core/base/error.hpp"

#include <string>
#include <string_view>

namespace air {

/// Replaces the file at `path` with `content` so that a reader sees either the
/// old file or the complete new one, never a half-written file: the bytes go to
/// a temporary file in the same directory (same file system, so `rename` is
/// atomic), which is fsync'ed and then renamed over `path`. The temporary file
/// is removed on every failure path. The new file gets mode 0666 minus umask.
/// Errors (system kind) name the path and the failing call:
/// "cannot write out/summary.json: open: No such file or directory".
/// `durable` false leaves out both fsyncs: the rename still shows readers the
/// old file or the whole new one, but a power loss right after may lose the
/// new one. For what is cheap to draw again (the HTML page, from the summary),
/// where two fsyncs cost more than drawing it (20 ms on a busy disk).
Status write_file_atomically(const std::string& path, std::string_view content, bool durable = true);

} // namespace air
