#include "core/warm/warm_choice.hpp"

#include "core/base/text.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace air {

namespace {

/// Top-level packages whose import imports torch: a script that imports one
/// of them spends its start in `import torch` as much as one that names it.
constexpr std::array<std::string_view, 16> k_torch_packages{
    "torch",      "torchvision", "torchaudio", "torchtext", "transformers", "lightning", "pytorch_lightning",
    "accelerate", "deepspeed",   "composer",   "timm",      "peft",         "trl",       "diffusers",
    "torchtune",  "fairscale"};

bool is_torch_package(std::string_view dotted) {
  const std::string_view top = dotted.substr(0, dotted.find('.'));
  return std::find(k_torch_packages.begin(), k_torch_packages.end(), top) != k_torch_packages.end();
}

/// The first torch package of a comma-separated list of names, each maybe
/// followed by more words (`os, torch.distributed as dist`): "torch.distributed".
std::optional<std::string_view> first_torch_package(std::string_view names) {
  while (!names.empty()) {
    const std::size_t comma = names.find(',');
    const std::string_view item = trim(names.substr(0, comma));
    const std::string_view name = item.substr(0, item.find_first_of(" \t"));
    if (!name.empty() && is_torch_package(name)) return name;
    if (comma == std::string_view::npos) break;
    names.remove_prefix(comma + 1);
  }
  return std::nullopt;
}

/// Whether one statement (`import a, b as c` or `from a.b import c`) imports a torch package.
bool imports_torch(std::string_view statement) {
  if (statement.starts_with("from ") || statement.starts_with("from\t")) {
    const std::string_view rest = trim(statement.substr(5));
    return is_torch_package(rest.substr(0, rest.find_first_of(" \t(")));
  }
  if (!statement.starts_with("import ") && !statement.starts_with("import\t")) return false;
  return first_torch_package(statement.substr(7)).has_value();
}

/// Prefixes of the variables read when torch is imported: OpenMP's (libgomp
/// and Intel's read theirs when the library loads), MKL's and OpenBLAS's
/// thread settings, and torch's own flags (TORCH_SHOW_CPP_STACKTRACES,
/// TORCH_CPP_LOG_LEVEL, PYTORCH_CUDA_ALLOC_CONF where a version reads it
/// early). CUDA_* and NCCL_* are not: CUDA and NCCL start in the rank, after
/// the fork, and read them then.
constexpr std::array<std::string_view, 7> k_import_time_prefixes{"OMP_",      "KMP_",     "GOMP_", "MKL_",
                                                                 "OPENBLAS_", "PYTORCH_", "TORCH_"};

/// Whether `line` holds a string literal that starts with one of k_import_time_prefixes.
bool names_import_time_variable(std::string_view line) {
  for (std::size_t at = line.find_first_of("\"'"); at != std::string_view::npos;
       at = line.find_first_of("\"'", at + 1)) {
    const std::string_view rest = line.substr(at + 1);
    for (const auto prefix : k_import_time_prefixes)
      if (rest.starts_with(prefix)) return true;
  }
  return false;
}

/// Reads at most the first MiB of `path` (a script's imports are at its top).
/// A regular file only, opened without blocking: a FIFO as the script (or as
/// `-m`'s module) blocked air-run in open(2) for good, its signals blocked.
std::optional<std::string> read_head(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    text.emplace(1 << 20, '\0');
    std::size_t got = 0;
    while (got < text->size()) {
      const ssize_t n = ::read(fd, text->data() + got, text->size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    text->resize(got);
  }
  ::close(fd);
  return text;
}

/// `-m a.b`'s file: a/b.py or a/b/__main__.py under the working directory
/// or an entry of PYTHONPATH, as Python finds it before site-packages.
std::optional<std::string> module_file(const std::string& module, const Environment& env) {
  std::string relative = module;
  std::replace(relative.begin(), relative.end(), '.', '/');
  std::vector<std::string> roots{"."};
  if (const auto it = env.find("PYTHONPATH"); it != env.end()) {
    std::stringstream entries(it->second);
    for (std::string entry; std::getline(entries, entry, ':');)
      if (!entry.empty()) roots.push_back(entry);
  }
  for (const auto& root : roots) {
    for (const std::string& candidate :
         {root + "/" + relative + ".py", root + "/" + relative + "/__main__.py"})
      if (::access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return std::nullopt;
}

} // namespace

std::optional<std::string> torch_import_in(std::string_view source) {
  int number = 0;
  while (!source.empty()) {
    ++number;
    const std::size_t end = source.find('\n');
    std::string_view line = source.substr(0, end);
    source = end == std::string_view::npos ? std::string_view{} : source.substr(end + 1);
    // `import os; import torch`: each statement of the line on its own.
    while (!line.empty()) {
      const std::size_t semicolon = line.find(';');
      const std::string_view statement = trim(line.substr(0, semicolon));
      if (statement.starts_with("#")) break;
      if (imports_torch(statement)) return fmt::format("line {}: {}", number, statement);
      if (semicolon == std::string_view::npos) break;
      line.remove_prefix(semicolon + 1);
    }
  }
  return std::nullopt;
}

std::optional<std::string> import_time_setting_in(std::string_view source) {
  // Only the lines before torch's import: a setting after it is ignored by
  // a fresh interpreter too.
  int until = 0;
  if (const auto found = torch_import_in(source)) until = std::atoi(found->c_str() + 5); // "line N: ..."
  bool touches_environment = false;
  std::optional<std::string> first;
  int number = 0;
  while (!source.empty() && (until == 0 || number + 1 < until)) {
    ++number;
    const std::size_t end = source.find('\n');
    const std::string_view line = trim(source.substr(0, end));
    source = end == std::string_view::npos ? std::string_view{} : source.substr(end + 1);
    if (line.starts_with("#")) continue;
    if (line.find("environ") != std::string_view::npos || line.find("putenv") != std::string_view::npos)
      touches_environment = true;
    if (!first && names_import_time_variable(line)) first = fmt::format("line {}: {}", number, line);
    if (first && touches_environment) return first;
  }
  return std::nullopt;
}

std::optional<std::string> find_import_time_setting(const LaunchSpec& spec, const Environment& env) {
  const auto& command = spec.command.value;
  if (command.empty() || spec.no_python.value) return std::nullopt;
  const auto path = spec.module.value ? module_file(command.front(), env) : std::optional{command.front()};
  const auto text = path ? read_head(*path) : std::nullopt;
  const auto found = text ? import_time_setting_in(*text) : std::nullopt;
  if (!found) return std::nullopt;
  return command.front() + " " + *found;
}

std::optional<std::string> torch_in_target_modules(const Environment& env) {
  const auto it = env.find("AIR_RUN_TARGET_MODULES");
  if (it == env.end()) return std::nullopt;
  const auto name = first_torch_package(it->second);
  if (!name) return std::nullopt;
  return fmt::format("uses {} (AIR_RUN_TARGET_MODULES)", *name);
}

std::optional<std::string> find_torch_import(const LaunchSpec& spec, const Environment& env) {
  const auto& command = spec.command.value;
  if (command.empty() || spec.no_python.value) return std::nullopt;
  const auto path = spec.module.value ? module_file(command.front(), env) : std::optional{command.front()};
  const auto text = path ? read_head(*path) : std::nullopt;
  if (auto in_file = text ? torch_import_in(*text) : std::nullopt) return in_file;
  return torch_in_target_modules(env);
}

bool runs_python_target(const LaunchSpec& spec) {
  const auto& command = spec.command.value;
  // As core/run/plan.cpp builds a rank's argv: `-m`, a `.py` under the
  // interpreter, or a command that already names the interpreter.
  return !spec.no_python.value && !command.empty() &&
         (spec.module.value || command.front().ends_with(".py") ||
          (command.front() == spec.python.value && command.size() > 1));
}

bool preload_is_auto(const LaunchSpec& spec) {
  return spec.preload.value == std::vector<std::string>{"auto"};
}

int usable_cpu_count() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  return std::max(1, CPU_COUNT(&allowed));
}

WarmChoice choose_warm_start(const LaunchSpec& spec, int ranks_on_node, int cpus,
                             const std::optional<std::string>& torch_import,
                             const std::optional<std::string>& import_time_setting) {
  WarmChoice choice;
  const auto& setting = spec.preload.value;
  const std::string origin = spec.preload.origin.describe();
  if (setting.empty()) {
    choice.why = "warm start: off (" + origin + ")";
    return choice;
  }
  if (!runs_python_target(spec)) {
    choice.why = "warm start: off: the ranks are not Python programs run by " + spec.python.value;
    return choice;
  }
  if (import_time_setting) {
    // The user's list or air-run's choice alike: what the script computes
    // comes first (docs/restarts.md, "What a warm rank observes").
    choice.fresh_reason = "it sets a variable torch reads at import before importing torch (" +
                          *import_time_setting + "): a rank forked with torch imported would not honour it";
    choice.why = "warm start: off: " + spec.command.value.front() + " " + choice.fresh_reason.substr(3) +
                 "; every rank starts fresh";
    return choice;
  }
  if (!preload_is_auto(spec)) {
    choice.modules = setting;
    choice.first_attempt = true;
    choice.why = fmt::format("warm start: every attempt's ranks fork from one {} that imported {} ({})",
                             spec.python.value, join(setting, ", "), origin);
    return choice;
  }
  const std::string target = spec.command.value.front();
  if (!torch_import) {
    choice.why = fmt::format("warm start: off (auto: found no import of torch in {})", target);
    return choice;
  }
  const std::string load = fmt::format("{} rank(s) on {} CPU(s)", ranks_on_node, cpus);
  const bool first = ranks_on_node >= cpus;
  if (!first && spec.max_restarts.value == 0) {
    choice.why = fmt::format("warm start: off (auto: no restarts, and {} import torch side by side)", load);
    return choice;
  }
  choice.modules = {"torch"};
  choice.first_attempt = first;
  choice.why =
      fmt::format("warm start (auto: {} {}): {}", target, *torch_import,
                  first ? load + ": every attempt's ranks fork from one interpreter that imported torch"
                        : load + ": the first attempt starts fresh while one interpreter imports torch "
                                 "beside it; restarts fork from it");
  return choice;
}

} // namespace air
