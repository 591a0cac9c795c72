#pragma once

// The OS part of `environment.dependencies`: a cache directory of virtual
// environments, one per `env_key`, built once under a file lock and shared by
// every rank and every later run.
//
// Layout of the cache directory:
//   <key>                    symlink to .store/<key>-<pid>: the published environment
//   <key>.lock               flock: exclusive while building/removing, shared while in use
//   .store/<key>-<pid>/      the environment itself (venv + air-run-env.json marker)
//   .interpreters/<hash>     remembered interpreter identities (see prepare_python_env)
// An environment is built in its final physical directory (venv scripts carry
// absolute paths, so a built venv cannot be moved) and published by renaming a
// symlink over `<key>`: until that rename nothing else sees it, and a failed or
// interrupted build only leaves an unpublished directory, removed at once or,
// after a kill -9, by the next air-run that finds its builder dead.

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/pyenv/python_env.hpp"
#include "core/spec/spec.hpp"

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// The Python environment the ranks run in (or, in a dry run, would run in).
struct PreparedEnv {
  bool active = false; ///< false: no dependencies; ranks use environment.python as is
  std::string key;     ///< full cache key (64 hex)
  std::string path;    ///< <cache>/<key>, the name users see
  std::string prefix;  ///< the physical directory, VIRTUAL_ENV for the ranks
  std::string python;  ///< <prefix>/bin/python, the interpreter for the ranks
  Environment vars;    ///< VIRTUAL_ENV and PATH (<prefix>/bin first) for every rank
  std::size_t requirements = 0;
  bool existed = false;     ///< reused without installing anything
  double build_seconds = 0; ///< how long this run's build took; 0 when it reused a cached one
  std::string build_log;    ///< the build's log (pip's output), kept inside the environment
  std::string status;       ///< one line saying which environment and whether it exists
  int interrupted_by = 0;   ///< a signal stopped the build; all was cleaned up: exit 128+N
};

/// `--env-cache-dir`, else $XDG_CACHE_HOME/air-run/envs (when absolute), else
/// ~/.cache/air-run/envs; made absolute against the working directory.
/// Errors (usage) when neither HOME nor XDG_CACHE_HOME is set.
Expected<std::string> env_cache_dir(const LaunchSpec& spec, const Environment& env);

/// Makes the spec's environment ready. With no dependencies returns an
/// inactive `PreparedEnv` at once. Otherwise resolves and identifies the
/// interpreter (running it once; remembered by the file's identity unless it
/// is a script such as a pyenv shim), computes the key and:
///  - dry run: reports whether the environment exists, changes nothing;
///  - cached (and no rebuild_env): prints "air-run: using cached environment
///    <key12> (<path>)", marks it used, and keeps a shared lock on it until
///    this process exits, so prune and rebuild wait for the run;
///  - otherwise builds it under the exclusive lock (python -m venv, then pip
///    install), shown as BuildView says: one live line on a terminal, pip's
///    output in a collapsible group in CI, one line otherwise. SIGINT/SIGTERM/SIGHUP during the build stop
///    pip's process group, remove the partial environment and return with
///    `interrupted_by` set.
/// Errors (usage, exit 2): unreadable requirements file, bad requirement
/// syntax, interpreter not found, and a failed venv or pip step, whose message
/// ends with the last lines of its output. Nothing is left in the cache then.
Expected<PreparedEnv> prepare_python_env(const LaunchSpec& spec, const Environment& env, bool dry_run);

/// One published environment, as `--list-envs` shows it.
struct CachedEnv {
  std::string key;
  std::string path;   ///< <cache>/<key>
  std::string prefix; ///< physical directory
  std::string python; ///< base interpreter realpath
  std::string version;
  std::vector<std::string> requirements;
  std::string created;       ///< ISO 8601 UTC from the marker
  std::time_t last_used = 0; ///< the marker's modification time, touched on each use
  std::uintmax_t size_bytes = 0;
  bool in_use = false; ///< another air-run holds its lock
};

/// The published environments in `cache_dir`, most recently used first. A
/// missing directory gives an empty list. Also removes leftovers of builds
/// whose air-run process is gone.
Expected<std::vector<CachedEnv>> list_envs(const std::string& cache_dir);

/// What `prune_envs` did.
struct PruneReport {
  std::vector<CachedEnv> removed;
  std::vector<CachedEnv> in_use; ///< old enough but used by a running air-run: kept
};

/// Removes the environments last used before `now - older_than` (every one
/// when `older_than` is nullopt), skipping those in use.
Expected<PruneReport> prune_envs(const std::string& cache_dir, std::optional<std::time_t> older_than_seconds,
                                 std::time_t now);

/// "/root/.pyenv/shims/python3, Python 3.11.7": where the interpreter program
/// `python` resolves along PATH and the version it reports, for messages that
/// must say which Python ran (a failed import's hint, `--check`). Runs it
/// once, for at most a few seconds; what cannot be learnt is left out (the
/// name alone when it is not found).
std::string describe_interpreter(const std::string& python, const Environment& env);

} // namespace air
