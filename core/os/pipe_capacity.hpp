#pragma once

#include <cstddef>

namespace air {

/// The kernel's limits on pipe buffers: `max_bytes` is the most one pipe
/// may hold (fs.pipe-max-size), `user_soft_bytes` how much one user's pipes
/// may hold in all before the kernel makes that user's new pipes small
/// (fs.pipe-user-pages-soft, in bytes; 0: no such limit).
struct PipeLimits {
  std::size_t max_bytes = 0;
  std::size_t user_soft_bytes = 0;
};

/// How big to make each of `pipes` output pipes of a node's ranks: large
/// enough that a rank writing in bulk does not wake air-run every 64 KiB
/// (each wakeup crosses CPUs; in a virtual machine that is an
/// inter-processor interrupt, and 256 MB through a 64 KiB pipe took 0.35 s
/// where 1 MiB took 0.09 s), yet all of them together at most a quarter of
/// the user's soft limit, so the rank's own pipes (data loader workers,
/// multiprocessing) keep their full size. A power of two up to 1 MiB and
/// `limits.max_bytes`; 0 when no more than the kernel's default (64 KiB)
/// fits: the pipes are left as they are.
std::size_t output_pipe_size(std::size_t pipes, const PipeLimits& limits);

/// The limits of this machine (/proc/sys/fs), read once; a file that cannot
/// be read gives the kernel's defaults (1 MiB, 64 MiB).
const PipeLimits& pipe_limits();

/// Asks for `bytes` of buffer on the pipe `fd` (F_SETPIPE_SZ). A refusal
/// (the user's limit, not a pipe) leaves it as it was: a smaller pipe is
/// slower, never wrong.
void set_pipe_size(int fd, std::size_t bytes);

} // namespace air
