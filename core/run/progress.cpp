#include "core/run/progress.hpp"

#include "core/base/unique_fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace air {
namespace {

constexpr char k_magic[8] = {'A', 'I', 'R', 'P', 'R', 'G', '0', '1'};

} // namespace

std::string_view collective_name(std::uint64_t op) {
  if (op == 0 || op > k_collective_names.size()) return "a collective";
  return k_collective_names[op - 1];
}

std::string ProgressFile::create(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return "open " + path + ": " + std::strerror(errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(k_progress_file_size)) != 0)
    return "truncate " + path + ": " + std::strerror(errno);
  if (::pwrite(fd.get(), k_magic, sizeof k_magic, 0) != static_cast<ssize_t>(sizeof k_magic))
    return "write " + path + ": " + std::strerror(errno);
  fd_ = std::move(fd);
  return {};
}

namespace {

/// The slots air-run reads: every one up to the highest it uses.
constexpr std::size_t k_read_slots = progress_slot::fr_armed + 1;
static_assert(k_read_slots * 8 <= k_progress_file_size);

/// A step count no training reaches (2^48: a step a microsecond for 8 years):
/// a page that holds more was scribbled over, and its counts mean nothing.
constexpr std::uint64_t k_max_steps = std::uint64_t{1} << 48;

} // namespace

// The page is read with pread, never mapped: a rank owns the file's path and
// may truncate it, which makes a mapping fault (SIGBUS) on the next load. A
// read of a file that shrank is short instead, and says so. The rank writes
// while air-run reads, so a slot may be caught half-written: two reads that
// agree are taken.
ProgressReading ProgressFile::read() const {
  ProgressReading r;
  if (!fd_) return r;
  std::uint64_t page[k_read_slots];
  std::uint64_t again[k_read_slots];
  constexpr auto size = static_cast<ssize_t>(sizeof page);
  for (int tries = 0;; ++tries) {
    const ssize_t got = ::pread(fd_.get(), page, sizeof page, 0);
    if (got != size) {
      r.lost = got < 0 ? std::string("reading its progress file failed: ") + std::strerror(errno)
                       : "its progress file was truncated";
      return r;
    }
    if (tries == 3 ||
        (::pread(fd_.get(), again, sizeof again, 0) == size && std::memcmp(page, again, sizeof page) == 0))
      break;
  }
  if (std::memcmp(page, k_magic, sizeof k_magic) != 0) {
    r.lost = "its progress file was overwritten";
    return r;
  }
  namespace S = progress_slot;
  r.attached = page[S::pid] != 0;
  r.steps = page[S::steps];
  r.last_step_ns = static_cast<std::int64_t>(page[S::last_step_ns]);
  r.busy_ns = page[S::busy_ns];
  r.busy_steps = page[S::busy_steps];
  r.coll_seq = page[S::coll_seq];
  r.coll_entered_ns = static_cast<std::int64_t>(page[S::coll_entered_ns]);
  r.coll_op = page[S::coll_op];
  r.polls_stop = page[S::polls_stop] != 0;
  r.fr_done = page[S::fr_done];
  r.fr_armed = page[S::fr_armed] != 0;
  if (r.steps > k_max_steps || r.busy_steps > r.steps || r.coll_seq > k_max_steps) {
    ProgressReading lost;
    lost.lost = "its progress file holds impossible counts (" + std::to_string(r.steps) + " steps)";
    return lost;
  }
  return r;
}

void ProgressFile::store(int slot, std::uint64_t value) {
  // One 8-byte write at the slot's offset; a rank that truncated the file
  // makes it sparse again, which harms nothing.
  [[maybe_unused]] const ssize_t n =
      ::pwrite(fd_.get(), &value, sizeof value, static_cast<off_t>(slot) * static_cast<off_t>(sizeof value));
}

std::uint64_t ProgressFile::load(int slot) const {
  std::uint64_t value = 0;
  if (::pread(fd_.get(), &value, sizeof value, static_cast<off_t>(slot) * static_cast<off_t>(sizeof value)) !=
      static_cast<ssize_t>(sizeof value))
    return 0;
  return value;
}

void ProgressFile::request_stop(std::uint64_t stop_step, std::int64_t deadline_realtime_ns) {
  if (!fd_) return;
  namespace S = progress_slot;
  store(S::stop_step, stop_step);
  store(S::stop_deadline_ns, static_cast<std::uint64_t>(deadline_realtime_ns));
  store(S::stop_requested, 1); // last: the rank reads the flag first
}

void ProgressFile::mark_tearing_down() {
  if (fd_) store(progress_slot::tearing_down, 1);
}

std::uint64_t ProgressFile::request_flight_recorder() {
  if (!fd_) return 0;
  const std::uint64_t next = load(progress_slot::fr_request) + 1;
  store(progress_slot::fr_request, next);
  return next;
}

} // namespace air
