#include "cli/commands.hpp"
#include "core/hw/hardware.hpp"
#include "core/os/host.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace air::cli {

Expected<int> list_gpus_command(const CliOptions& options) {
  const Environment env = current_environment();
  const Hardware hw = detect_hardware(env);
  bool json = false;
  for (const auto& [key, text, spelling] : options.flag_values()) {
    if (key == "json") json = text == "true";
  }
  if (!json) json = env_or(env, "AIR_RUN_JSON") == "true" || env_or(env, "AIR_RUN_JSON") == "1";
  std::fputs((json ? hardware_json(hw) + "\n" : describe_hardware(hw)).c_str(), stdout);
  return 0;
}

Expected<int> torch_distributor_command(const CliOptions& options) {
  if (options.command.empty())
    return usage_error("--torch-distributor needs a script: air-run --torch-distributor script.py [ARGS...]");
  Environment env = current_environment();
  std::string python = "python3";
  for (const auto& [key, text, spelling] : options.flag_values()) {
    if (key == "environment.python") python = text;
  }
  if (const auto from_env = env_or(env, "AIR_RUN_PYTHON"); !from_env.empty()) python = from_env;
  AIR_TRY(check_readable_file(options.command.front(), "script"));
  auto exe = check_executable(python, env);
  if (!exe) return exe.error();

  // The script's own TorchDistributor.run() launches the ranks through air-run;
  // this process only makes `pyspark.ml.torch.distributor` importable and runs it.
  const std::string package_dir = find_python_package_dir(env);
  if (!package_dir.empty()) {
    const std::string old = env_or(env, "PYTHONPATH");
    env["PYTHONPATH"] = old.empty() ? package_dir : package_dir + ":" + old;
  }
  env["AIR_RUN_BINARY"] = env_or(env, "AIR_RUN_BINARY", self_exe_dir() + "/air-run");
  std::vector<std::string> args = {*exe, "-u", "-m", "air.torch_distributor"};
  args.insert(args.end(), options.command.begin(), options.command.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto envp_strings = to_envp_strings(env);
  std::vector<char*> envp;
  for (auto& e : envp_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::fflush(stdout);
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr); // run_main blocked signals; the script must get them
  execve(exe->c_str(), argv.data(), envp.data());
  return sys_error("execve " + *exe, errno);
}

} // namespace air::cli
