#pragma once

#include <cstdint>
#include <string>

namespace air {

/// The outcome of reading a small data file a rank left behind (result or
/// error file). Reading such files is never fatal to air-run, so every
/// problem becomes a state rather than an `Error`.
struct FileRead {
  enum class State {
    missing,    ///< no such file (ENOENT)
    ok,         ///< `text` holds the whole file
    too_large,  ///< bigger than the limit; `text` is empty, `size` is at least limit + 1
    unreadable, ///< open/read failed or not a regular file; `error` says why
  };
  State state = State::missing;
  std::string text;
  std::uint64_t size = 0;
  std::string error; ///< "cannot read /x/error.json: Permission denied"
};

/// Reads `path` whole when it holds at most `max_bytes`. Opens with
/// O_NONBLOCK so a FIFO at the path cannot block; only regular files are read.
/// The size is checked with fstat before reading and enforced while reading
/// (the file may still be growing).
FileRead read_small_file(const std::string& path, std::uint64_t max_bytes);

} // namespace air
