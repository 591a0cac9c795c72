// Stack dumps: asking the armed Python ranks for their stacks and reading them.
#include "core/run/stack_dumps.hpp"

#include "core/base/text.hpp"
#include "core/base/unique_fd.hpp"
#include "core/os/proc_table.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

namespace air {

namespace {

/// How long to wait for the armed Python ranks to write their stacks
/// before a timeout's teardown goes on without them, and how often to look
/// at the files meanwhile.
constexpr auto k_stack_wait = std::chrono::seconds(2);
constexpr auto k_stack_check_interval = std::chrono::milliseconds(50);
/// For a hang's diagnosis, also the ranks' Flight Recorder dumps: a thread
/// of the rank answers within half a second, then torch serialises the trace.
constexpr auto k_hang_dump_wait = std::chrono::seconds(5);
/// How long a dump that does not end with the main thread's outermost frame
/// must stay the same size to be taken as whole: faulthandler writes a dump in
/// many small writes, and on a loaded machine the rank can be off the CPU
/// between two of them for longer than one check.
constexpr auto k_stack_settle = std::chrono::milliseconds(300);
/// How many of a dump's last bytes tell whether it is whole.
constexpr long long k_stack_tail = 1024;
/// At most this much of one rank's stack dump is kept.
constexpr std::size_t k_stack_max = 256 * 1024;

/// The size of `path`, or -1 when it does not exist.
long long file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<long long>(st.st_size);
}

/// The bytes of `path` from `offset` on (at most `limit`).
std::string read_from(const std::string& path, long long offset, std::size_t limit = k_stack_max) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd || offset < 0 || ::lseek(fd.get(), offset, SEEK_SET) < 0) return {};
  std::string out;
  char buf[8192];
  while (out.size() < limit) {
    const ssize_t n = ::read(fd.get(), buf, std::min(sizeof(buf), limit - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

/// `stack` as console lines, each after "[rankN stack]: ".
void add_stack_lines(ConsoleBatch& batch, int rank, std::string stack) {
  if (stack.empty()) stack = "(no stack written)\n";
  if (stack.back() != '\n') stack += '\n';
  std::size_t begin = 0;
  while (begin < stack.size()) {
    const std::size_t end = stack.find('\n', begin);
    batch.text += "[rank" + std::to_string(rank) + " stack]: ";
    batch.text.append(stack, begin, end - begin + 1);
    ++batch.lines;
    begin = end + 1;
  }
}

} // namespace

bool stack_dump_ends_main_thread(std::string_view tail) {
  if (!tail.ends_with('\n')) return false;
  tail.remove_suffix(1);
  const std::size_t start = tail.rfind('\n') + 1; // npos + 1 == 0: the tail is one line
  const std::string_view line = tail.substr(start);
  return line.starts_with("  File \"") &&
         (line.ends_with(" in <module>") || line.ends_with(" in _run_module_as_main"));
}

bool StackDumps::request(StackPurpose purpose, Clock::time_point now) {
  if (signal_ <= 0) return false;
  bool asked = false;
  for (auto& r : ranks_) {
    Ask& ask = asks_[r.index];
    ask.offset = -1;
    if (!r.running() || r.plan->stack_file.empty()) continue;
    const long long size = file_size(r.plan->stack_file);
    if (size < 0) continue; // not armed (yet)
    // The handler itself must be installed now: a rank that exec'd another
    // program (or has yet to arm, its file left from an earlier attempt) has
    // the signal's default action, and a real-time signal's is death.
    if (!catches_signal(r.pid, signal_)) continue;
    if (::kill(r.pid, signal_) != 0) continue;
    ask.offset = size;
    ask.seen = size;
    ask.seen_since = now;
    asked = true;
  }
  if (!asked) return false;
  purpose_ = purpose;
  deadline_ = now + (purpose == StackPurpose::hang ? k_hang_dump_wait : k_stack_wait);
  return true;
}

void StackDumps::clear_files() const {
  for (const auto& r : ranks_)
    if (!r.plan->stack_file.empty()) ::unlink(r.plan->stack_file.c_str());
}

std::optional<StackDumps::Clock::time_point> StackDumps::next_deadline(Clock::time_point now) const {
  if (!deadline_) return std::nullopt;
  return std::min(*deadline_, now + k_stack_check_interval);
}

bool StackDumps::due(Clock::time_point now, bool flight_recorder_answered) {
  if (!deadline_) return false;
  if (now >= *deadline_) return true;
  return arrived(now) && (purpose_ != StackPurpose::hang || flight_recorder_answered);
}

/// Whether every asked rank's dump has arrived: its file grew, and it ends
/// with the main thread's outermost frame, or it ends a line and has not grown
/// for k_stack_settle.
bool StackDumps::arrived(Clock::time_point now) {
  bool ready = true;
  for (auto& r : ranks_) {
    Ask& ask = asks_[r.index];
    if (ask.offset < 0 || r.reaped) continue;
    const long long size = file_size(r.plan->stack_file);
    if (size != ask.seen) {
      ask.seen = size;
      ask.seen_since = now;
    }
    if (size <= ask.offset) {
      ready = false;
      continue;
    }
    const long long from = std::max(ask.offset, size - k_stack_tail);
    const std::string tail = read_from(r.plan->stack_file, from, static_cast<std::size_t>(size - from));
    const bool settled = now - ask.seen_since >= k_stack_settle && !tail.empty() && tail.back() == '\n';
    if (!stack_dump_ends_main_thread(tail) && !settled) ready = false;
  }
  return ready;
}

ConsoleBatch StackDumps::collect(RunOutcome& out, Clock::time_point now) {
  deadline_.reset();
  ConsoleBatch batch;
  for (auto& r : ranks_) {
    Ask& ask = asks_[r.index];
    if (ask.offset < 0) continue;
    // A stack names the rank's files and functions; shown by air-run, it holds no escape sequence.
    std::string stack = strip_control_characters(read_from(r.plan->stack_file, ask.offset), LineBreaks::keep);
    ask.offset = -1;
    RankOutcome& o = out.ranks[r.index];
    if (purpose_ == StackPurpose::show) {
      add_stack_lines(batch, r.plan->rank, std::move(stack));
      continue;
    }
    o.stack = std::move(stack);
    if (purpose_ == StackPurpose::timeout && o.last_output_at)
      o.last_output_age_s = std::chrono::duration<double>(now - *o.last_output_at).count();
  }
  return batch;
}

} // namespace air
