#pragma once

#include "core/os/proc_table.hpp"
#include "core/os/process.hpp"
#include "core/os/run_cgroup.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace air {

/// Keeps every process a run starts inside the run, so that none outlives it:
/// not a wrapper's children (`bash train.sh`, `sh -c 'python ...'`), not
/// DataLoader workers, not a rank's background jobs, not a process that
/// called setsid(). Three layers, each covering what the one before cannot:
///
/// - air-run is a child subreaper while the run lasts: a descendant whose
///   parent ends is re-parented to air-run, not to init, so the process tree
///   below air-run is complete and sweep() finds and ends it at the run's end.
/// - A cgroup v2 directory for the ranks (RunCgroup) where air-run may create
///   one: membership survives setsid() and double forks, and cgroup.kill ends
///   every member at once.
/// - A watchdog process, forked before the ranks and outside their groups,
///   which air-run tells each rank's process group and (without a cgroup) the
///   descendants it has seen. When air-run dies without saying goodbye
///   (`kill -9`, SIGQUIT, a crash) the pipe between them closes and the
///   watchdog ends them all: SIGTERM, the grace period, SIGKILL.
///
/// Sessions and groups: a process that keeps changing its pid (forks, then
/// its parent exits) keeps its session and process group. The scans note the
/// sessions and groups that descendants made (setsid, setpgid; never air-run's
/// own, which is the user's terminal's), and the ends of a run, normal or by
/// the watchdog, end every member of those, repeating until none is left.
///
/// Without a cgroup, what holds after `kill -9` of air-run: every rank's
/// process group, and every descendant, session and group air-run saw in its
/// last scan (once a second) together with whatever descends from those. A
/// process that left its rank's group (setsid, setpgid) less than a second
/// before air-run died and whose ancestors all died with it can escape; a
/// cgroup closes that gap.
class Containment {
public:
  struct Options {
    std::chrono::milliseconds grace{30'000}; ///< the watchdog's SIGTERM-to-SIGKILL wait
    bool cgroup = true;                      ///< try a cgroup (AIR_RUN_CGROUP=off also says no)
    bool watchdog = true;
    /// Processes of air-run's that outlive the run and are none of its
    /// ranks (the warm start's interpreter, core/warm/warm_start.hpp): they
    /// and what they fork are left alone by the scans and the sweep. Ranks
    /// they fork are re-parented to air-run and contained as any rank.
    std::vector<pid_t> spared;
    /// The run's private folder: the watchdog removes it if air-run dies
    /// before it can (empty: none, e.g. a kept log directory).
    std::string private_dir;
  };

  /// Becomes a subreaper, creates the cgroup if it can and forks the
  /// watchdog. Never fails: each layer that cannot be had is left out.
  static std::unique_ptr<Containment> start(const Options& options);

  /// Tells the watchdog the run ended normally, waits for it to leave, stops
  /// being a subreaper and removes the cgroup. Call sweep() first.
  ~Containment();
  Containment(const Containment&) = delete;
  Containment& operator=(const Containment&) = delete;

  /// Where a new rank is to be born (start_process); none without a cgroup.
  CgroupTarget cgroup_target() const {
    if (!cgroup_.active()) return {};
    return {cgroup_.dir_fd(), cgroup_.procs_fd()};
  }
  bool has_cgroup() const { return cgroup_.active(); }
  /// The run's cgroup directory; "" without one.
  const std::string& cgroup_dir() const { return cgroup_.dir(); }
  /// "cgroup /sys/fs/cgroup/.../air-run-42" or "process groups".
  std::string describe() const;

  /// A rank was forked as leader of its own group: the watchdog learns the group.
  void rank_started(pid_t pid);
  /// A rank has exec'd: checks that it did land in the cgroup (delegation
  /// rules can refuse the move) and gives the cgroup up if not. Once per run.
  void rank_confirmed(pid_t pid);

  /// At most once a second: notes the sessions and groups the run's
  /// processes made and, without a cgroup, sends the watchdog every descendant
  /// of air-run it has not heard of yet; tells it of sessions and groups that
  /// have emptied.
  void record_descendants();

  /// Sends `sig` to every live descendant and cgroup member outside the
  /// ranks' own groups (those the caller signals as groups; a second SIGINT
  /// would interrupt a Python rank's cleanup) and not the watchdog.
  void signal_all(int sig);

  /// The end of a run: ends whatever is left below air-run (a successful
  /// rank's background jobs, a setsid daemon): SIGTERM, up to `grace`,
  /// SIGKILL, and reaps the adopted ones. Returns how many were left.
  std::size_t sweep(std::chrono::milliseconds grace);

  /// The processes the last sweep() found, as describe_process names them
  /// ("pid 4711 sleep (sleep 1000)"), at most 10: the report says which.
  const std::vector<std::string>& swept() const { return swept_; }

  /// Whether `pid` is the watchdog; the supervisor's reap loop leaves it to us.
  bool is_watchdog(pid_t pid) const { return pid > 0 && pid == watchdog_; }
  /// The supervisor reaped the watchdog (it died early); forget it.
  void watchdog_gone() { watchdog_ = -1; }

private:
  std::vector<std::string> swept_;
  Containment() = default;
  void send(std::int32_t type, pid_t pid, std::uint64_t start);
  std::vector<ProcEntry> targets() const;
  void reap_adopted();
  void learn(const ProcEntry& e);
  void forget_emptied(const std::vector<ProcEntry>& table);
  /// The subtrees the scans leave out: the watchdog and Options::spared.
  std::vector<pid_t> left_alone() const;

  RunCgroup cgroup_;
  bool subreaper_ = false;
  pid_t watchdog_ = -1;
  std::vector<pid_t> spared_;
  int watch_fd_ = -1;
  bool cgroup_checked_ = false;
  std::set<pid_t> groups_;
  pid_t own_session_ = -1; ///< air-run's session and group: never ended
  pid_t own_group_ = -1;
  std::set<pid_t> sessions_;    ///< sessions the run's processes made
  std::set<pid_t> made_groups_; ///< groups they made, other than the ranks'
  std::set<std::pair<pid_t, std::uint64_t>> told_;
  std::chrono::steady_clock::time_point last_scan_{};
};

} // namespace air
