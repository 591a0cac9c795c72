#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/base/rank_environment.hpp"
#include "core/base/unique_fd.hpp"
#include "core/os/process.hpp"

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The warm start (--preload): restarts that do not wait on `import torch`.
// Most of the time between a failure and every rank back in its training
// loop is each new interpreter starting and importing torch again (seconds,
// and more when eight ranks import at once on few cores). With --preload,
// air-run starts one interpreter per run that imports the named modules
// once, and every rank of every attempt is forked from it, with the rank's
// environment, argv, working directory, CPUs and streams applied in the
// child before any of the rank's code runs.
//
// What makes the fork safe: the interpreter forks before any CUDA call (it
// refuses to serve if importing the modules initialised CUDA or started a
// thread), and each rank is re-parented to air-run (a double fork under
// air-run's child subreaper), so air-run reaps it, signals its process group,
// moves it into the run's cgroup and sees its exit status exactly as for a
// rank it started itself. What a fresh interpreter would have done
// differently is listed in docs/restarts.md ("Warm restarts").

namespace air {

/// The Python source of the interpreter (written to the run folder).
/// Pure: the template with the set-up error codes of
/// core/os/spawn_request.hpp filled in.
std::string warm_start_program();

/// The raw template of warm_start_program, placeholders included: the
/// embedded core/warm/python/air_run_warm.py.
std::string_view warm_start_source();

/// What the warm start reads of a rank's command line.
struct WarmTarget {
  bool unbuffered = false; ///< -u
  std::string name;        ///< the script or module: what its errors are named by
};

/// `argv` as a rank the warm start can fork: `python [-u] SCRIPT ...` or
/// `python [-u] -m MODULE ...` under the interpreter `python`; nullopt for
/// anything else (other interpreter options, -c, an executable), which
/// starts fresh. Pure.
std::optional<WarmTarget> warm_target(const std::vector<std::string>& argv, const std::string& python);

/// Whether the warm start can fork `argv` (warm_target has it). Pure.
inline bool warm_start_accepts(const std::vector<std::string>& argv, const std::string& python) {
  return warm_target(argv, python).has_value();
}

/// The variables every rank has with the same value: the environment the
/// interpreter starts with (what Python reads at start-up, such as
/// PYTHONPATH, is the same for all ranks). Pure.
Environment common_environment(const std::vector<const Environment*>& ranks);

/// The same for ranks kept as RankEnvironment: where they all share one
/// map, that map less what any rank's own variables change, without
/// merging each rank's whole environment first. Pure.
Environment common_environment(const std::vector<const RankEnvironment*>& ranks);

/// What a rank's environment changes of the one the interpreter started
/// with: the new value of each variable it adds or changes, nullopt for each
/// it lacks. A fork request carries only these, never the whole environment:
/// with 100,000 variables, sending and applying all of them was most of a
/// warm rank's start.
using EnvironmentChanges = std::map<std::string, std::optional<std::string>>;

/// The changes that make `base` into `env`. Pure; linear in both sizes.
EnvironmentChanges environment_changes(const Environment& base, const Environment& env);

/// The changes that make `base` into `env`, from `shared`: the changes that
/// make `base` into env's shared part (environment_changes of it, computed
/// once for every rank that shares it). Pure; linear in env's own
/// variables and in `shared`, not in the environment's size.
EnvironmentChanges environment_changes(const Environment& base, const RankEnvironment& env,
                                       const EnvironmentChanges& shared);

/// The request for one rank, as the interpreter parses it: NUL-terminated
/// fields after a version tag (parent pid, cwd, -u, memory node, CPUs, argc,
/// argv, the number of variables set, each as NAME=VALUE, then the names
/// unset). `env`: what the rank changes of the interpreter's start
/// environment. Pure.
std::string warm_start_request(pid_t parent, const std::string& cwd, bool unbuffered, int memory_node,
                               const std::vector<int>& cpus, const std::vector<std::string>& argv,
                               const EnvironmentChanges& env);

/// One warm interpreter, alive from start() until destroyed, across every
/// attempt of a run. Not a rank: it lives in its own process group outside
/// the attempts' containment (Containment::Options::spared), dies with
/// air-run (PR_SET_PDEATHSIG) and exits when air-run closes its socket.
class WarmStart {
public:
  /// Writes the program to `dir`/air_run_warm.py and starts `python` on it
  /// with `env` (what each rank's request is then a change of), importing
  /// `modules`. Returns at once; the imports go on
  /// while air-run prepares the first attempt. Errors: system (the spawn).
  static Expected<std::unique_ptr<WarmStart>> start(const std::string& python, bool unbuffered,
                                                    Environment env, const std::vector<std::string>& modules,
                                                    const std::string& dir);

  /// Closes the socket (the interpreter exits on EOF) and reaps it, killing
  /// it after a short wait.
  ~WarmStart();
  WarmStart(const WarmStart&) = delete;
  WarmStart& operator=(const WarmStart&) = delete;

  using Clock = std::chrono::steady_clock;

  /// Waits until the imports are done (first call). False when the
  /// interpreter failed or refused: `failure()` says why, and every rank
  /// then starts fresh. The wait is bounded: by `deadline` (the run's
  /// --timeout), by a SIGINT, SIGTERM or SIGHUP pending for air-run (left
  /// pending: the supervisor reads it next and ends the run), and by
  /// k_import_limit after start(). Past any of them the interpreter is
  /// abandoned: killed with its process group and reaped. `meanwhile`, when
  /// given, runs at least every k_meanwhile_period while the imports go on
  /// (the control connection's heartbeats: an agent that waits seconds for
  /// `import torch` must not look dead to the other nodes).
  bool ready(std::optional<Clock::time_point> deadline = std::nullopt,
             const std::function<void()>& meanwhile = nullptr);
  static constexpr std::chrono::milliseconds k_meanwhile_period{200};
  const std::string& failure() const { return failure_; }
  pid_t pid() const { return pid_; }
  const std::string& python() const { return python_; }

  /// One rank to fork: its command, environment and spawn options.
  struct Rank {
    const std::vector<std::string>* argv = nullptr;
    const RankEnvironment* env = nullptr;
    SpawnOptions options;
  };

  /// Forks `ranks`, as start_process starts one: each result's `exec` is
  /// the rank's set-up (EOF once it is about to run its code, or the errno
  /// of a step that failed: the working directory, the CPU binding).
  /// `cgroup`: where the ranks move themselves. Every request goes out
  /// before the first reply is read, so the interpreter's forks overlap.
  /// Errors, per rank: system, when the interpreter is gone or answers
  /// with an error (the caller starts that rank fresh, unless in_doubt).
  struct Forked {
    Expected<StartedProcess> process;
    /// Its request went out but no answer came (the interpreter died or
    /// hung mid-fork): a copy may run already, so starting it fresh could
    /// make two processes of one rank. The caller fails the rank instead;
    /// any copy is air-run's descendant and ends with the attempt.
    bool in_doubt = false;
  };
  std::vector<Forked> start_ranks(const std::vector<Rank>& ranks, CgroupTarget cgroup);

private:
  WarmStart() = default;
  /// How read_line's wait ended.
  enum class Wait { line, gone, timed_out, stopped };
  Wait read_line(std::string& line, Clock::time_point until, int stop_fd = -1,
                 const std::function<void()>& meanwhile = nullptr);
  void broken(std::string why);
  void abandon(std::string why);

  pid_t pid_ = -1;
  UniqueFd socket_;
  UniqueFd stderr_; ///< the interpreter's stderr until it is ready: its import errors
  UniqueFd stdout_;
  std::string printed_; ///< the end of what it wrote to stderr before it was ready
  std::string python_;
  std::string buffer_; ///< reply bytes read past the last line
  std::string failure_;
  /// The environment the interpreter started with: each request carries
  /// only what a rank changes of it.
  Environment base_;
  /// environment_changes of the last shared part seen (kept alive here, so
  /// that the pointer names it): every rank of a node, every attempt, shares
  /// one, and its changes are worked out once, not once a rank.
  std::shared_ptr<const Environment> changes_of_;
  EnvironmentChanges shared_changes_;
  bool have_shared_changes_ = false;
  Clock::time_point started_;
  bool ready_ = false;
};

} // namespace air
