#include "core/run/progress.hpp"

#include "core/base/unique_fd.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
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

ProgressFile::ProgressFile(ProgressFile&& other) noexcept : base_(other.base_) { other.base_ = nullptr; }

ProgressFile& ProgressFile::operator=(ProgressFile&& other) noexcept {
  if (this != &other) {
    if (base_) ::munmap(base_, k_progress_file_size);
    base_ = other.base_;
    other.base_ = nullptr;
  }
  return *this;
}

ProgressFile::~ProgressFile() {
  if (base_) ::munmap(base_, k_progress_file_size);
}

std::string ProgressFile::create(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return "open " + path + ": " + std::strerror(errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(k_progress_file_size)) != 0)
    return "truncate " + path + ": " + std::strerror(errno);
  void* base = ::mmap(nullptr, k_progress_file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return "mmap " + path + ": " + std::strerror(errno);
  if (base_) ::munmap(base_, k_progress_file_size);
  base_ = base;
  std::memcpy(base_, k_magic, sizeof k_magic);
  return {};
}

// The rank writes with plain stores from another process; relaxed atomic
// loads keep the compiler from caching or tearing a slot here.
std::uint64_t ProgressFile::load(int slot) const {
  auto* p = static_cast<std::uint64_t*>(base_) + slot;
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

void ProgressFile::store(int slot, std::uint64_t value) {
  auto* p = static_cast<std::uint64_t*>(base_) + slot;
  __atomic_store_n(p, value, __ATOMIC_RELEASE);
}

ProgressReading ProgressFile::read() const {
  ProgressReading r;
  if (!base_) return r;
  namespace S = progress_slot;
  r.attached = load(S::pid) != 0;
  r.steps = load(S::steps);
  r.last_step_ns = static_cast<std::int64_t>(load(S::last_step_ns));
  r.busy_ns = load(S::busy_ns);
  r.busy_steps = load(S::busy_steps);
  r.coll_seq = load(S::coll_seq);
  r.coll_entered_ns = static_cast<std::int64_t>(load(S::coll_entered_ns));
  r.coll_op = load(S::coll_op);
  r.polls_stop = load(S::polls_stop) != 0;
  r.fr_done = load(S::fr_done);
  r.fr_armed = load(S::fr_armed) != 0;
  return r;
}

void ProgressFile::request_stop(std::uint64_t stop_step, std::int64_t deadline_realtime_ns) {
  if (!base_) return;
  namespace S = progress_slot;
  store(S::stop_step, stop_step);
  store(S::stop_deadline_ns, static_cast<std::uint64_t>(deadline_realtime_ns));
  store(S::stop_requested, 1); // last: the rank reads the flag first
}

std::uint64_t ProgressFile::request_flight_recorder() {
  if (!base_) return 0;
  const std::uint64_t next = load(progress_slot::fr_request) + 1;
  store(progress_slot::fr_request, next);
  return next;
}

} // namespace air
