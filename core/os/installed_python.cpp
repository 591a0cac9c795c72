#include "core/os/installed_python.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace air {

namespace {

namespace fs = std::filesystem;

bool is_executable_file(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

/// Whether `dir` is the root of a Python environment: a venv or a conda
/// environment. pipx's are not: pipx gives air-run a venv of its own, without
/// the user's packages.
bool is_environment_root(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "pipx_metadata.json", ec)) return false;
  return fs::is_regular_file(dir / "pyvenv.cfg", ec) || fs::is_directory(dir / "conda-meta", ec);
}

/// Whether the user activated another environment than `root`: then the
/// `python3` first on PATH is that one's, and stays the choice.
bool other_environment_active(const fs::path& root, const Environment& env) {
  std::error_code ec;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const std::string active = env_or(env, var);
    if (!active.empty() && !fs::equivalent(fs::path(active), root, ec)) return true;
  }
  return false;
}

/// The interpreter in `bin` when `bin` is an environment's bin folder.
std::optional<InstalledPython> python_in(const fs::path& bin, const std::string& preferred = "") {
  if (bin.empty() || bin.filename() != "bin" || !is_environment_root(bin.parent_path())) return std::nullopt;
  for (const std::string& name : {preferred, std::string("python3"), std::string("python")}) {
    if (name.empty() || !is_executable_file(bin / name)) continue;
    return InstalledPython{(bin / name).string(), "the Python environment air-run is installed in (" +
                                                      bin.parent_path().string() + ")"};
  }
  return std::nullopt;
}

/// The folder `program` (argv[0]) was started from, without following links.
fs::path started_from(const std::string& program, const Environment& env) {
  if (program.empty()) return {};
  std::error_code ec;
  if (program.find('/') != std::string::npos) return fs::absolute(fs::path(program), ec).parent_path();
  const std::string path_var = env_or(env, "PATH");
  std::size_t start = 0;
  while (start <= path_var.size()) {
    const std::size_t colon = std::min(path_var.find(':', start), path_var.size());
    const fs::path dir = path_var.substr(start, colon - start);
    if (!dir.empty() && is_executable_file(dir / program)) return fs::absolute(dir, ec);
    start = colon + 1;
  }
  return {};
}

/// installed_python without the activation check.
std::optional<InstalledPython> find_installed(const std::string& program, const Environment& env) {
  const fs::path from = started_from(program, env).lexically_normal();
  if (auto found = python_in(from)) return found;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path exe_dir = exe.parent_path();
  if (auto found = python_in(exe_dir)) return found;
  // The wheel: <env>/lib/pythonX.Y/site-packages/air/bin/air-run.
  const fs::path site = exe_dir.parent_path().parent_path();
  const fs::path version = site.parent_path();
  const bool wheel_layout = exe_dir.filename() == "bin" && exe_dir.parent_path().filename() == "air" &&
                            site.filename() == "site-packages" &&
                            version.filename().string().starts_with("python");
  if (!wheel_layout) return std::nullopt;
  return python_in(version.parent_path().parent_path() / "bin", version.filename().string());
}

} // namespace

std::optional<InstalledPython> installed_python(const std::string& program, const Environment& env) {
  auto found = find_installed(program, env);
  if (found && other_environment_active(fs::path(found->path).parent_path().parent_path(), env))
    return std::nullopt;
  return found;
}

} // namespace air
