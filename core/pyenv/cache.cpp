// The environment cache: locking, building with venv + pip, publishing,
// listing and pruning. See env_cache.hpp for the directory layout.
#include "core/pyenv/cache.hpp"

#include "core/base/duration.hpp"
#include "core/base/line_splitter.hpp"
#include "core/base/redact.hpp"
#include "core/base/sha256.hpp"
#include "core/base/speaker.hpp"
#include "core/os/atomic_file.hpp"
#include "core/os/capture.hpp"
#include "core/os/file_read.hpp"
#include "core/os/host.hpp"
#include "core/os/log_sink.hpp"
#include "core/os/trusted_path.hpp"
#include "core/pyenv/build_view.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>

namespace air {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char k_marker[] = "air-run-env.json";
constexpr const char k_log[] = "air-run-build.log";
constexpr std::size_t k_tail_lines = 20;

bool is_hex_key(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

bool pid_alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

/// The whole of a small file this cache wrote itself, "" when it cannot be read.
std::string read_own_file(const std::string& path) {
  FileRead read = read_small_file(path, 1 << 20);
  return read.state == FileRead::State::ok ? std::move(read.text) : std::string();
}

bool starts_with_shebang(const std::string& path) {
  char head[2] = {};
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fd.get() >= 0 && read(fd.get(), head, 2) == 2 && head[0] == '#' && head[1] == '!';
}

std::string plural(std::size_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// ---- children ---------------------------------------------------------------

/// How a helper (venv, pip, the interpreter probe) ended.
struct ChildResult {
  int exit_code = -1;     ///< exit status, or 128+N when killed by signal N
  int interrupted_by = 0; ///< a signal to air-run stopped it
  std::deque<std::string> tail;
  std::string output; ///< stdout and stderr as they came, when asked to keep it
};

/// Where a helper's output goes while it runs.
struct OutputSinks {
  int log_fd = -1;                               ///< every byte, -1 for none
  std::function<void(std::string_view)> on_line; ///< each whole line as it arrives (the build's display)
  std::function<void()> on_tick;                 ///< about once a second while the helper runs
  bool keep_output = false; ///< every byte into ChildResult::output (the interpreter probe)
};

/// Runs a helper through the one child runner (os/capture), splitting its
/// output into lines for the tail and the display. When `signal_fd` >= 0 and
/// reports a signal, the helper's group is stopped and `interrupted_by` set.
Expected<ChildResult> run_child(const std::vector<std::string>& argv, const Environment& env,
                                const OutputSinks& sinks, int signal_fd) {
  ChildResult result;
  LineSplitter lines[2]; // stdout, stderr: a line is never a mix of both
  const auto take_line = [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (sinks.on_line) sinks.on_line(line);
    result.tail.emplace_back(line);
    if (result.tail.size() > k_tail_lines) result.tail.pop_front();
  };
  CaptureOptions options;
  options.max_bytes = 0; // everything goes through on_output
  options.stop_fd = signal_fd;
  options.on_tick = sinks.on_tick;
  options.on_output = [&](std::string_view chunk, bool from_stderr) {
    if (sinks.log_fd >= 0) (void)write_all(sinks.log_fd, chunk);
    if (sinks.keep_output) result.output.append(chunk);
    lines[from_stderr ? 1 : 0].feed(chunk, take_line);
  };
  auto run = run_captured(argv, env, options);
  if (!run) return run.error();
  for (auto& splitter : lines) splitter.finish(take_line);
  if (run->stopped) {
    signalfd_siginfo info{};
    result.interrupted_by = read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)
                                ? static_cast<int>(info.ssi_signo)
                                : SIGTERM;
    return result;
  }
  result.exit_code = run->status.shell_code();
  return result;
}

// ---- interpreter identity ---------------------------------------------------

/// Identifies the interpreter. Running Python costs tens of milliseconds, so
/// the answer is remembered under a hash of the file's identity (device,
/// inode, size, times) and PYTHONHOME; a script (a pyenv shim picks its
/// version at run time) is always asked.
Expected<InterpreterIdentity> identify_interpreter(const std::string& resolved, const Environment& env,
                                                   const std::string& cache_dir, bool remember) {
  char real[PATH_MAX];
  if (realpath(resolved.c_str(), real) == nullptr) return sys_error("realpath " + resolved, errno);
  const std::string realpath_text = real;
  struct stat st {};
  if (stat(real, &st) != 0) return sys_error("stat " + realpath_text, errno);
  const bool script = starts_with_shebang(realpath_text);
  std::string memo;
  if (!script) {
    const std::string id = fmt::format("{}\n{}:{}:{}:{}.{}:{}.{}\nPYTHONHOME={}\n", realpath_text, st.st_dev,
                                       st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                                       st.st_ctim.tv_sec, st.st_ctim.tv_nsec, env_or(env, "PYTHONHOME"));
    memo = cache_dir + "/.interpreters/" + sha256_hex(id).substr(0, 32);
    // A memo another user could have written is not believed (asked afresh instead).
    const bool trusted = check_trusted_contents(cache_dir + "/.interpreters", "interpreter memo").ok();
    if (trusted) {
      if (auto known = parse_probe_output(read_own_file(memo), realpath_text)) return known;
    }
  }
  OutputSinks sinks;
  sinks.keep_output = true;
  auto run = run_child(interpreter_probe_argv(resolved), env, sinks, -1);
  if (!run) return run.error();
  if (run->exit_code != 0) {
    return usage_error(
        fmt::format("environment.python {}: exited with code {} when asked for its version: {}", resolved,
                    run->exit_code, run->tail.empty() ? "" : run->tail.back()));
  }
  auto identity = parse_probe_output(run->output, realpath_text);
  if (!identity) return identity.error();
  if (!memo.empty() && remember && make_directories(cache_dir + "/.interpreters")) {
    (void)write_file_atomically(memo, run->output); // only a speed-up: failures do not matter
  }
  return identity;
}

// ---- cache layout -------------------------------------------------------------

std::string key_path(const std::string& cache, const std::string& key) { return cache + "/" + key; }
std::string store_dir(const std::string& cache) { return cache + "/.store"; }

/// The physical directory `<cache>/<key>` points to, "" when it is not published.
std::string published_prefix(const std::string& cache, const std::string& key) {
  char target[PATH_MAX];
  const ssize_t n = readlink(key_path(cache, key).c_str(), target, sizeof target - 1);
  if (n <= 0) return "";
  const std::string prefix = cache + "/" + std::string(target, static_cast<std::size_t>(n));
  struct stat st {};
  if (stat((prefix + "/" + k_marker).c_str(), &st) != 0) return "";
  return prefix;
}

/// Refuses a cached environment another user could have written: its
/// publish link and every file and directory of its tree must be ours (or
/// root's) and not writable by others.
Status check_cached_env(const std::string& link, const std::string& prefix) {
  AIR_TRY(check_trusted_contents(link, "cached environment link"));
  return check_trusted_contents(prefix, "cached environment");
}

std::string link_target_name(const std::string& cache, const std::string& key) {
  char target[PATH_MAX];
  const ssize_t n = readlink(key_path(cache, key).c_str(), target, sizeof target - 1);
  return n <= 0 ? "" : std::string(target, static_cast<std::size_t>(n));
}

bool lock_is_free(const std::string& cache, const std::string& key) {
  UniqueFd fd(open((key_path(cache, key) + ".lock").c_str(), O_RDWR | O_CLOEXEC));
  return fd.get() < 0 || flock(fd.get(), LOCK_EX | LOCK_NB) == 0; // closing the fd releases it
}

/// Removes build directories and publish links whose air-run is gone (kill -9
/// during a build). With `key` (its lock held exclusively), every unpublished
/// directory of that key is removed, whoever made it.
void remove_leftovers(const std::string& cache, const std::string& key = "") {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(store_dir(cache), ec)) {
    const std::string name = entry.path().filename().string();
    const std::size_t dash = name.rfind('-');
    if (dash != 64 || !is_hex_key(name.substr(0, 64))) continue;
    const std::string entry_key = name.substr(0, 64);
    if (link_target_name(cache, entry_key) == ".store/" + name) continue;
    const pid_t pid = static_cast<pid_t>(std::atoll(name.c_str() + 65));
    // A dead pid alone is not proof (another PID namespace may share the
    // cache): the key's lock must be free too.
    if (entry_key == key || (!pid_alive(pid) && lock_is_free(cache, entry_key)))
      remove_tree(entry.path().string());
  }
  for (const auto& entry : fs::directory_iterator(cache, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-", 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::atoll(name.c_str() + name.rfind('-') + 1));
    if (!pid_alive(pid)) unlink(entry.path().c_str());
  }
}

Expected<UniqueFd> open_lock(const std::string& cache, const std::string& key) {
  const std::string path = key_path(cache, key) + ".lock";
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) return sys_error("open " + path, errno);
  return fd;
}

Status lock(int fd, int how, const std::string& what) {
  while (flock(fd, how) != 0) {
    if (errno != EINTR) return sys_error("flock " + what, errno);
  }
  return ok_status();
}

bool try_lock(int fd, int how) { return flock(fd, how | LOCK_NB) == 0; }

// ---- building -----------------------------------------------------------------

/// Blocks SIGINT/SIGTERM/SIGHUP for the length of a build and reports them
/// through a signalfd, so an interruption is handled between two reads, never
/// in the middle of a rename. Restores the mask on destruction.
class BuildSignals {
public:
  BuildSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    sigprocmask(SIG_BLOCK, &set_, &old_);
    fd_.reset(signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK));
  }
  BuildSignals(const BuildSignals&) = delete;
  BuildSignals& operator=(const BuildSignals&) = delete;
  ~BuildSignals() {
    fd_.reset();
    sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  int fd() const { return fd_.get(); }

private:
  sigset_t set_{};
  sigset_t old_{};
  UniqueFd fd_;
};

std::string tail_text(const std::deque<std::string>& tail) {
  std::string out;
  for (const auto& line : tail) out += "\n  " + line;
  return out;
}

std::string marker_json(const EnvRequest& request, const std::string& key, double seconds) {
  nlohmann::json j;
  j["air_run_env"] = 1;
  j["key"] = key;
  j["python"] = request.interpreter.path;
  j["prefix"] = request.interpreter.prefix;
  j["version"] = request.interpreter.version;
  j["requirements"] = request.requirements;
  j["index_url"] = redact_urls(request.sources.index_url); // the marker is readable by others
  j["find_links"] = nlohmann::json::array();
  for (const auto& link : request.sources.find_links) j["find_links"].push_back(redact_urls(link));
  j["no_index"] = request.sources.no_index;
  j["system_site_packages"] = request.system_site_packages;
  j["created"] = format_utc(std::time(nullptr));
  j["build_seconds"] = seconds;
  j["air_run_version"] = AIR_VERSION;
  return j.dump(2) + "\n";
}

/// Builds the environment into `<cache>/.store/<key>-<pid>` and publishes it.
/// The caller holds the key's lock exclusively. Returns the prefix, or 0/N in
/// `interrupted_by`.
Expected<std::string> build_env(const EnvRequest& request, const std::string& key, const std::string& python,
                                const std::string& cache, const Environment& env, bool quiet,
                                int* interrupted_by, double* build_seconds) {
  remove_leftovers(cache, key);
  AIR_TRY(make_directories(store_dir(cache)));
  const std::string name = fmt::format("{}-{}", key, getpid());
  const std::string prefix = store_dir(cache) + "/" + name;
  const auto started = Clock::now();
  const std::string k12 = short_key(key);
  BuildView view(env, isatty(STDERR_FILENO) != 0, quiet, k12,
                 plural(request.requirements.size(), "requirement"), prefix);

  BuildSignals signals; // from here on an interruption removes `prefix`
  const auto fail = [&](Error error) -> Expected<std::string> {
    remove_tree(prefix);
    view.failed();
    return error;
  };
  const auto interrupted = [&](int sig) -> Expected<std::string> {
    remove_tree(prefix);
    view.interrupted(sig);
    *interrupted_by = sig;
    return std::string();
  };
  if (mkdir(prefix.c_str(), 0755) != 0) return sys_error("mkdir " + prefix, errno);
  view.started();

  // venv and pip write absolute paths into scripts, so the environment is made
  // in `prefix` itself; it stays invisible until the symlink below.
  const EnvBuildPlan plan = plan_env_build(request, python, prefix);
  const std::string log_path = prefix + "/" + k_log;
  Environment child_env = env;
  child_env["PYTHONUNBUFFERED"] = "1";
  child_env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1";
  child_env.erase("VIRTUAL_ENV");

  OutputSinks sinks;
  sinks.on_line = [&view](std::string_view line) { view.line(line); };
  sinks.on_tick = [&view] { view.tick(); };
  UniqueFd log(open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (log.get() < 0) return fail(sys_error("open " + log_path, errno));
  sinks.log_fd = log.get();

  struct Step {
    const std::vector<std::string>* argv;
    const char* what;
  };
  for (const Step& step :
       {Step{&plan.create, "creating the virtual environment"}, Step{&plan.install, "pip install"}}) {
    if (step.argv == &plan.install) {
      if (auto w = write_file_atomically(plan.requirements_file, plan.requirements_text); !w)
        return fail(w.error());
      view.step("starting pip");
    } else {
      view.step(step.what);
    }
    write_all(log.get(), "$");
    for (const auto& arg : *step.argv) write_all(log.get(), " " + arg);
    write_all(log.get(), "\n");
    // spawn_process gives pip an empty mask, whatever air-run has blocked.
    auto run = run_child(*step.argv, child_env, sinks, signals.fd());
    if (!run) return fail(run.error());
    if (run->interrupted_by != 0) return interrupted(run->interrupted_by);
    if (run->exit_code != 0) {
      return fail(usage_error(fmt::format(
          "environment.dependencies: {} failed (exit code {}); nothing was kept in the cache. Last lines:{}",
          step.what, run->exit_code, tail_text(run->tail))));
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (auto w = write_file_atomically(prefix + "/" + k_marker, marker_json(request, key, seconds)); !w)
    return fail(w.error());

  // Publish: a new symlink renamed over <key> in one step.
  const std::string old_target = link_target_name(cache, key);
  const std::string tmp_link = fmt::format("{}/.tmp-{}-{}", cache, key, getpid());
  unlink(tmp_link.c_str());
  if (symlink((".store/" + name).c_str(), tmp_link.c_str()) != 0)
    return fail(sys_error("symlink " + tmp_link, errno));
  if (rename(tmp_link.c_str(), key_path(cache, key).c_str()) != 0) {
    const int err = errno;
    unlink(tmp_link.c_str());
    return fail(sys_error("rename " + tmp_link, err));
  }
  if (!old_target.empty() && old_target != ".store/" + name) remove_tree(cache + "/" + old_target);

  view.succeeded(seconds, log_path);
  *build_seconds = seconds;
  return prefix;
}

std::string current_dir() {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  return ec ? "/" : cwd.string();
}

/// The directory a path is relative to: a path written in the spec file is
/// relative to that file (as its command is), others to the working directory.
std::string base_dir(const Origin& origin, const LaunchSpec& spec) {
  const std::string cwd = current_dir();
  if (origin.kind != Origin::Kind::file || spec.spec_path.empty()) return cwd;
  const std::string dir = fs::path(spec.spec_path).parent_path().string();
  return dir.empty() ? cwd : absolute_link(dir, cwd);
}

Expected<std::vector<std::string>> requirements_of(const LaunchSpec& spec) {
  if (!spec.requirements_file.value.empty()) {
    std::string path = spec.requirements_file.value;
    if (path.front() != '/' && spec.requirements_file.origin.kind == Origin::Kind::file) {
      path = absolute_link(path, base_dir(spec.requirements_file.origin, spec));
    }
    auto text = read_text_file(path, "requirements file");
    if (!text) return text.error();
    return parse_requirements_text(*text, spec.requirements_file.value);
  }
  return normalise_requirements(spec.dependencies.value, "environment.dependencies");
}

void fill_rank_view(PreparedEnv& out, const LaunchSpec& spec, const Environment& env) {
  out.python = out.prefix + "/bin/python";
  const auto spec_path = spec.env.value.find("PATH");
  const std::string parent_path = spec_path != spec.env.value.end() ? spec_path->second : env_or(env, "PATH");
  out.vars["VIRTUAL_ENV"] = out.prefix;
  out.vars["PATH"] = out.prefix + "/bin" + (parent_path.empty() ? "" : ":" + parent_path);
}

} // namespace

Expected<std::string> env_cache_dir(const LaunchSpec& spec, const Environment& env) {
  std::string dir = spec.env_cache_dir.value;
  if (dir.empty()) {
    const std::string xdg = env_or(env, "XDG_CACHE_HOME");
    const std::string home = env_or(env, "HOME");
    if (!xdg.empty() && xdg.front() == '/') {
      dir = xdg + "/air-run/envs";
    } else if (!home.empty()) {
      dir = home + "/.cache/air-run/envs";
    } else {
      return usage_error(
          "env_cache_dir: no cache directory: set HOME or XDG_CACHE_HOME, or give --env-cache-dir");
    }
  }
  return absolute_link(dir, spec.env_cache_dir.value.empty() ? current_dir()
                                                             : base_dir(spec.env_cache_dir.origin, spec));
}

Expected<PreparedEnv> prepare_python_env(const LaunchSpec& spec, const Environment& env, bool dry_run) {
  PreparedEnv out;
  EnvRequest request;
  auto requirements = requirements_of(spec);
  if (!requirements) return requirements.error();
  if (requirements->empty()) return out;
  request.requirements = std::move(*requirements);
  out.requirements = request.requirements.size();

  auto cache = env_cache_dir(spec, env);
  if (!cache) return cache.error();
  // Like ssh with its files: nothing in a cache another user could have
  // written is used, since its python would then run as us.
  std::error_code exists_ec;
  if (fs::exists(*cache, exists_ec)) AIR_TRY(check_trusted_tree_root(*cache, "environment cache directory"));
  auto resolved = check_executable(spec.python.value, env);
  if (!resolved) {
    return Error{resolved.error().kind,
                 fmt::format("Python interpreter {} (environment.python)", resolved.error().message)};
  }
  auto interpreter = identify_interpreter(*resolved, env, *cache, !dry_run);
  if (!interpreter) return interpreter.error();
  request.interpreter = std::move(*interpreter);
  const std::string links_dir = base_dir(spec.find_links.origin, spec);
  for (const auto& link : spec.find_links.value)
    request.sources.find_links.push_back(absolute_link(link, links_dir));
  request.sources.index_url = spec.index_url.value;
  request.sources.no_index = spec.no_index.value;
  request.system_site_packages = spec.system_site_packages.value;

  out.active = true;
  out.key = env_key(request);
  out.path = key_path(*cache, out.key);
  const std::string k12 = short_key(out.key);
  const bool rebuild = spec.rebuild_env.value;

  if (dry_run) {
    const std::string prefix = published_prefix(*cache, out.key);
    if (!prefix.empty()) AIR_TRY(check_cached_env(out.path, prefix));
    out.existed = !prefix.empty();
    out.prefix = out.existed ? prefix : out.path;
    fill_rank_view(out, spec, env);
    out.status = fmt::format(
        "environment {} ({}) at {}: {}", k12, plural(out.requirements, "requirement"), out.path,
        out.existed ? (rebuild ? "exists, would be rebuilt (--rebuild-env)" : "exists, would be reused")
                    : "does not exist, would be built");
    return out;
  }

  AIR_TRY(make_directories(*cache));
  AIR_TRY(check_trusted_tree_root(*cache, "environment cache directory"));
  remove_leftovers(*cache);
  auto lock_fd = open_lock(*cache, out.key);
  if (!lock_fd) return lock_fd.error();
  const int fd = lock_fd->get();
  const std::string lock_name = out.path + ".lock";
  if (!try_lock(fd, LOCK_SH)) {
    say_on_stderr(fmt::format("air-run: waiting for another air-run building environment {}\n", k12));
    AIR_TRY(lock(fd, LOCK_SH, lock_name));
  }
  std::string prefix = rebuild ? "" : published_prefix(*cache, out.key);
  if (prefix.empty()) {
    flock(fd, LOCK_UN);
    if (!try_lock(fd, LOCK_EX)) {
      say_on_stderr(fmt::format(
          "air-run: waiting for other air-run processes using or building environment {}\n", k12));
      AIR_TRY(lock(fd, LOCK_EX, lock_name));
    }
    prefix = rebuild ? "" : published_prefix(*cache, out.key); // built while we waited?
    if (prefix.empty()) {
      int interrupted_by = 0;
      auto built = build_env(request, out.key, *resolved, *cache, env, spec.quiet.value, &interrupted_by,
                             &out.build_seconds);
      if (!built) return built.error();
      if (interrupted_by != 0) {
        out.interrupted_by = interrupted_by;
        return out;
      }
      prefix = *built;
    } else {
      out.existed = true;
    }
    AIR_TRY(lock(fd, LOCK_SH, lock_name)); // downgrade: others may use it, nobody may remove it
  } else {
    out.existed = true;
  }
  if (out.existed) AIR_TRY(check_cached_env(out.path, prefix));
  if (out.existed && !spec.quiet.value) {
    say_on_stderr(fmt::format("air-run: using cached environment {} ({})\n", k12, out.path));
  }
  // Last use is the marker's mtime, read by --prune-envs --older-than.
  utimensat(AT_FDCWD, (prefix + "/" + k_marker).c_str(), nullptr, 0);
  // The shared lock lives as long as this process: the ranks run in this
  // environment, so prune and rebuild must wait for them (O_CLOEXEC keeps it
  // out of the ranks; it is released when air-run exits).
  lock_fd->release();
  out.prefix = prefix;
  out.build_log = prefix + "/" + k_log;
  out.status = fmt::format("environment {} at {} ({})", k12, out.path, out.existed ? "cached" : "built now");
  fill_rank_view(out, spec, env);
  return out;
}

Expected<std::vector<CachedEnv>> list_envs(const std::string& cache_dir) {
  std::vector<CachedEnv> envs;
  std::error_code ec;
  if (!fs::exists(cache_dir, ec)) return envs;
  remove_leftovers(cache_dir);
  for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
    const std::string key = entry.path().filename().string();
    if (!is_hex_key(key)) continue;
    const std::string prefix = published_prefix(cache_dir, key);
    if (prefix.empty()) continue;
    CachedEnv e;
    e.key = key;
    e.path = entry.path().string();
    e.prefix = prefix;
    const std::string marker = prefix + "/" + k_marker;
    const auto j = nlohmann::json::parse(read_own_file(marker), nullptr, false);
    if (j.is_object()) {
      e.python = j.value("python", "");
      e.version = j.value("version", "");
      e.created = j.value("created", "");
      if (j.contains("requirements") && j["requirements"].is_array()) {
        for (const auto& r : j["requirements"]) {
          if (r.is_string()) e.requirements.push_back(r.get<std::string>());
        }
      }
    }
    struct stat st {};
    if (stat(marker.c_str(), &st) == 0) e.last_used = st.st_mtim.tv_sec;
    for (auto it = fs::recursive_directory_iterator(prefix, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code size_ec;
      if (it->is_regular_file(size_ec) && !it->is_symlink(size_ec)) e.size_bytes += it->file_size(size_ec);
    }
    ec.clear();
    if (auto fd = open_lock(cache_dir, key)) {
      e.in_use = !try_lock(fd->get(), LOCK_EX);
    }
    envs.push_back(std::move(e));
  }
  std::sort(envs.begin(), envs.end(), [](const CachedEnv& a, const CachedEnv& b) {
    return a.last_used != b.last_used ? a.last_used > b.last_used : a.key < b.key;
  });
  return envs;
}

Expected<PruneReport> prune_envs(const std::string& cache_dir, std::optional<std::time_t> older_than_seconds,
                                 std::time_t now) {
  PruneReport report;
  auto envs = list_envs(cache_dir);
  if (!envs) return envs.error();
  for (auto& e : *envs) {
    if (older_than_seconds && e.last_used > now - *older_than_seconds) continue;
    auto fd = open_lock(cache_dir, e.key);
    if (!fd) return fd.error();
    if (!try_lock(fd->get(), LOCK_EX)) {
      report.in_use.push_back(std::move(e));
      continue;
    }
    // Unpublish first: from here on nobody starts using it.
    if (unlink(e.path.c_str()) != 0) return sys_error("unlink " + e.path, errno);
    remove_tree(e.prefix);
    report.removed.push_back(std::move(e));
  }
  return report;
}

std::string describe_interpreter(const std::string& python, const Environment& env) {
  auto resolved = check_executable(python, env);
  if (!resolved) return python;
  auto run = run_captured(interpreter_probe_argv(*resolved), env, std::chrono::seconds(5), 4096);
  if (!run || run->timed_out || !run->status.success()) return *resolved;
  auto identity = parse_probe_output(run->out, *resolved);
  if (!identity) return *resolved;
  // sys.version's first word: "3.11.7 (main, ...)" -> "3.11.7".
  return *resolved + ", Python " + identity->version.substr(0, identity->version.find(' '));
}

} // namespace air
