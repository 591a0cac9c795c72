// --list-envs and --prune-envs: the cached Python environments of environment.dependencies.
#include "cli/commands.hpp"
#include "core/os/host.hpp"
#include "core/pyenv/cache.hpp"
#include "core/spec/spec.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <ctime>

namespace air::cli {

namespace {

/// The cache directory comes from the same sources as a run's (flag, variable, -f spec).
Expected<std::string> cache_dir_from(const CliOptions& options, const Environment& env) {
  auto resolved = resolve_cli_spec(options, env);
  if (!resolved) return resolved.error();
  return env_cache_dir(resolved->spec, env);
}

/// "30d" in addition to the spec durations ("12h", "90m", "1h30m").
Expected<std::time_t> parse_age(const std::string& text) {
  if (text.size() > 1 && text.size() <= 7 && text.back() == 'd' &&
      text.find_first_not_of("0123456789") == text.size() - 1) {
    return static_cast<std::time_t>(std::stoll(text.substr(0, text.size() - 1)) * 86400);
  }
  auto d = parse_duration(text, "--older-than");
  if (!d) return d.error();
  return static_cast<std::time_t>(d->count() / 1000);
}

std::string human_size(std::uintmax_t bytes) {
  if (bytes >= (1u << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1u << 30));
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1u << 20));
  return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
}

std::string local_time(std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string describe(const CachedEnv& e) {
  std::string reqs;
  for (const auto& r : e.requirements) reqs += (reqs.empty() ? "" : " ") + r;
  return fmt::format("{}  {}  {:>10}  {}{}  python {}  {}", e.key.substr(0, 12), local_time(e.last_used),
                     human_size(e.size_bytes), e.in_use ? "in use  " : "", e.path, e.python, reqs);
}

} // namespace

Expected<int> envs_command(const CliOptions& options) {
  const Environment env = current_environment();
  auto dir = cache_dir_from(options, env);
  if (!dir) return dir.error();
  if (options.list_envs) {
    auto envs = list_envs(*dir);
    if (!envs) return envs.error();
    std::fputs(fmt::format("{} in {}\n",
                           envs->size() == 1 ? "1 environment" : fmt::format("{} environments", envs->size()),
                           *dir)
                   .c_str(),
               stdout);
    for (const auto& e : *envs) std::fputs((describe(e) + "\n").c_str(), stdout);
    if (!options.prune_envs) return 0;
  }
  std::optional<std::time_t> older_than;
  if (!options.older_than.empty()) {
    auto age = parse_age(options.older_than);
    if (!age) return age.error();
    older_than = *age;
  }
  auto report = prune_envs(*dir, older_than, std::time(nullptr));
  if (!report) return report.error();
  for (const auto& e : report->removed) std::fputs(fmt::format("removed {}\n", describe(e)).c_str(), stdout);
  for (const auto& e : report->in_use)
    std::fputs(fmt::format("kept (in use) {}\n", describe(e)).c_str(), stdout);
  std::fputs(fmt::format("pruned {} environment(s) from {}\n", report->removed.size(), *dir).c_str(), stdout);
  return 0;
}

} // namespace air::cli
