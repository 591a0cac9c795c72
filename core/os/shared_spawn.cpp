#include "core/os/shared_spawn.hpp"

#include "core/os/raw_syscall.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

// The shared-memory spawn needs raw system calls that leave errno alone and
// a child that runs no sanitizer runtime (whose state it would share).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define AIR_SHARED_SPAWN 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define AIR_SHARED_SPAWN 0
#endif
#endif
#ifndef AIR_SHARED_SPAWN
#if defined(__x86_64__)
#define AIR_SHARED_SPAWN 1
#else
#define AIR_SHARED_SPAWN 0
#endif
#endif

#ifndef SYS_clone3
#define SYS_clone3 435 // the same number on every architecture (Linux 5.3)
#endif

#if AIR_SHARED_SPAWN
static_assert(air::k_raw_syscall_keeps_errno);
// clone3 for a child on a stack of its own. The child starts on the new stack
// with no return address to go back to, so it cannot return from a C++
// function: here it calls fn(arg) straight away (fn never returns; if it did,
// exit_group(127)). The parent (or an error, -errno) returns as from any call.
// fn and arg travel in r8 and r9, which the kernel copies to the child.
extern "C" long air_clone3_on_stack(void* args, unsigned long size, void (*fn)(void*), void* arg);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl air_clone3_on_stack\n"
        ".hidden air_clone3_on_stack\n"
        ".type air_clone3_on_stack,@function\n"
        "air_clone3_on_stack:\n"
        "  .cfi_startproc\n"
        "  movq %rdx, %r8\n"
        "  movq %rcx, %r9\n"
        "  movl $435, %eax\n"
        "  syscall\n"
        "  testq %rax, %rax\n"
        "  jz 1f\n"
        "  ret\n"
        "1:\n"
        "  .cfi_undefined %rip\n"
        "  xorl %ebp, %ebp\n"
        "  movq %r9, %rdi\n"
        "  callq *%r8\n"
        "  movl $127, %edi\n"
        "  movl $231, %eax\n"
        "  syscall\n"
        "  hlt\n"
        "  .cfi_endproc\n"
        "  .size air_clone3_on_stack, .-air_clone3_on_stack\n"
        ".popsection\n");
#endif

namespace air {

namespace {

/// clone3's arguments up to `cgroup` (CLONE_ARGS_SIZE_VER2), spelled out here
/// because glibc 2.36 has no wrapper and older kernel headers lack the field.
struct CloneArgs {
  std::uint64_t flags = 0;
  std::uint64_t pidfd = 0;
  std::uint64_t child_tid = 0;
  std::uint64_t parent_tid = 0;
  std::uint64_t exit_signal = 0;
  std::uint64_t stack = 0;
  std::uint64_t stack_size = 0;
  std::uint64_t tls = 0;
  std::uint64_t set_tid = 0;
  std::uint64_t set_tid_size = 0;
  std::uint64_t cgroup = 0;
};
constexpr std::uint64_t k_clone_into_cgroup = 0x200000000ULL;

/// Cleared once the kernel refuses clone3 with CLONE_INTO_CGROUP for good
/// (old kernel, seccomp); the child then moves itself in through cgroup.procs.
bool g_clone_into_cgroup = true;
/// Cleared once clone3 itself is refused (Linux before 5.3, or a seccomp
/// profile that answers ENOSYS to make libc fall back): libc's clone() then.
bool g_clone3 = true;

constexpr std::size_t k_stack_size = 32 * 1024; // the child needs a few hundred bytes
constexpr std::size_t k_guard_size = 4096;
constexpr std::size_t k_slot_size = k_guard_size + k_stack_size;
constexpr std::size_t k_slots_per_map = 16; ///< stacks mapped at once, when the pool is empty

/// The stacks of children that have exec'd or been reaped, for the next
/// ones. Grown k_slots_per_map at a time (one mapping, one guard page per
/// stack) and never unmapped: it holds as many stacks as there were
/// children between birth and exec at once, ever (128 ranks: 4.6 MB of
/// address space, a page or two of memory each).
class StackPool {
public:
  /// A stack's usable low end, or null (errno set).
  void* take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty() && !grow()) return nullptr;
    void* low = free_.back();
    free_.pop_back();
    return low;
  }
  void give_back(void* low) {
    const std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(low);
  }

private:
  bool grow() {
    const std::size_t size = k_slot_size * k_slots_per_map;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return false;
    char* slot = static_cast<char*>(p);
    for (std::size_t i = 0; i < k_slots_per_map; ++i, slot += k_slot_size) {
      // A slot whose guard cannot be set is never handed out.
      if (::mprotect(slot, k_guard_size, PROT_NONE) == 0) free_.push_back(slot + k_guard_size);
    }
    return !free_.empty();
  }

  std::mutex mutex_;
  std::vector<void*> free_;
};

/// Whether a SpawnWave of this thread has every signal blocked.
thread_local bool t_in_wave = false;

/// Never destroyed: a PendingExec may give its stack back during exit.
StackPool& stack_pool() {
  static StackPool* const pool = new StackPool;
  return *pool;
}

#if AIR_SHARED_SPAWN
/// Whether an error of clone3 says "not this way, ever" rather than "not now".
bool refused_for_good(long err) { return err != -EAGAIN && err != -ENOMEM && err != -EINTR; }

void child_entry(void* request) { exec_prepared(*static_cast<const SpawnRequest*>(request)); }

int child_entry_for_libc(void* request) { exec_prepared(*static_cast<const SpawnRequest*>(request)); }

long start_shared(SpawnRequest& request, CgroupTarget cgroup, ChildStack& stack) {
  if (!stack.allocate()) return -errno;
  CloneArgs args;
  args.flags = CLONE_VM;
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uintptr_t>(stack.low());
  args.stack_size = stack.usable();
  if (g_clone3 && cgroup.dir_fd >= 0 && g_clone_into_cgroup) {
    CloneArgs into = args;
    into.flags |= k_clone_into_cgroup;
    into.cgroup = static_cast<std::uint64_t>(cgroup.dir_fd);
    request.cgroup_procs_fd = -1;
    const long pid = air_clone3_on_stack(&into, sizeof(into), child_entry, &request);
    if (pid >= 0 || !refused_for_good(pid)) return pid;
    g_clone_into_cgroup = false; // E2BIG, EINVAL, EPERM, ENOSYS...: the fallback from now on
  }
  request.cgroup_procs_fd = cgroup.procs_fd;
  if (g_clone3) {
    const long pid = air_clone3_on_stack(&args, sizeof(args), child_entry, &request);
    if (pid >= 0 || !refused_for_good(pid)) return pid;
    g_clone3 = false;
  }
  char* top = static_cast<char*>(stack.low()) + stack.usable();
  const int pid = ::clone(child_entry_for_libc, top, CLONE_VM | SIGCHLD, &request);
  return pid >= 0 ? pid : -errno;
}
#endif

/// fork(), or with a cgroup directory, a fork born in that cgroup (clone3
/// without a stack of its own: the child returns from it as from fork).
long start_forked(SpawnRequest& request, CgroupTarget cgroup) {
  long pid = -1;
  bool born_in = false;
  if (g_clone3 && cgroup.dir_fd >= 0 && g_clone_into_cgroup) {
    CloneArgs args;
    args.flags = k_clone_into_cgroup;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(cgroup.dir_fd);
    pid = ::syscall(SYS_clone3, &args, sizeof(args));
    if (pid < 0) {
      if (errno == EAGAIN || errno == ENOMEM) return -errno;
      g_clone_into_cgroup = false;
    } else {
      born_in = true;
    }
  }
  if (!born_in) pid = ::fork();
  if (pid < 0) return -errno;
  if (pid == 0) {
    request.cgroup_procs_fd = born_in ? -1 : cgroup.procs_fd; // the child's own copy
    exec_prepared(request);
  }
  return pid;
}

} // namespace

SpawnMethod spawn_method() {
  static const SpawnMethod method = [] {
    if (!AIR_SHARED_SPAWN) return SpawnMethod::fork;
    const char* asked = std::getenv("AIR_RUN_SPAWN");
    return asked != nullptr && std::strcmp(asked, "fork") == 0 ? SpawnMethod::fork : SpawnMethod::shared;
  }();
  return method;
}

ChildStack::~ChildStack() {
  if (low_ != nullptr) stack_pool().give_back(low_);
}

ChildStack& ChildStack::operator=(ChildStack&& other) noexcept {
  if (this != &other) {
    if (low_ != nullptr) stack_pool().give_back(low_);
    low_ = std::exchange(other.low_, nullptr);
  }
  return *this;
}

bool ChildStack::allocate() {
  if (low_ == nullptr) low_ = stack_pool().take();
  return low_ != nullptr;
}

std::size_t ChildStack::usable() const { return k_stack_size; }

SpawnWave::SpawnWave() : outer_(!t_in_wave) {
  if (!outer_) return;
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_);
  t_in_wave = true;
}

SpawnWave::~SpawnWave() {
  if (!outer_) return;
  t_in_wave = false;
  ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

long start_child(SpawnRequest& request, SpawnMethod method, CgroupTarget cgroup, ChildStack& stack) {
  // Born with every signal blocked: a handler of air-run's must not run in
  // the child before exec_prepared has set the actions back to default (with
  // `shared` it would run on air-run's memory). libc keeps its own two.
  const SpawnWave blocked; // nothing to do inside a wave
  long pid;
#if AIR_SHARED_SPAWN
  pid = method == SpawnMethod::shared ? start_shared(request, cgroup, stack) : start_forked(request, cgroup);
#else
  (void)method;
  (void)stack;
  pid = start_forked(request, cgroup);
#endif
  return pid;
}

} // namespace air
