#include "cli/app.hpp"

#include "cli/commands.hpp"
#include "cli/docs.hpp"
#include "cli/options.hpp"
#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/base/phase_clock.hpp"
#include "core/base/speaker.hpp"
#include "core/base/suggest.hpp"
#include "core/os/signals.hpp"
#include "core/os/std_streams.hpp"
#include "core/spec/spec.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdio>

namespace air::cli {

/// The one table from error kinds to exit codes (docs/supervision.md lists them).
int exit_code_for(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::usage:
    return 2;
  case ErrorKind::hardware:
    return 2;
  case ErrorKind::system:
    return 125;
  case ErrorKind::not_executable:
    return 126;
  case ErrorKind::not_found:
    return 127;
  }
  return 125;
}

namespace {

constexpr const char* k_footer = R"(
Examples:
  air-run -n 8 train.py --lr 1e-3          8 ranks, each gets RANK, LOCAL_RANK, WORLD_SIZE, ...
  air-run -f job.yaml                      the same from a YAML spec
  air-run --accelerator-type GPU_8xH100 train.py
  air-run --no-python -n 2 ./my_binary
  air-run --check [--json]                 preflight: GPU health and NCCL all-reduce bandwidth
  air-run --html run.html train.py         also draw the run as one HTML page (docs/html.md)
  air-run report run.json [node1.json...] --html run.html   the same page later, from summaries
Precedence: flags > AIR_RUN_* environment (the manual lists them) > spec file > defaults.
Exit codes: 0 ok, 2 bad flags/spec or hardware mismatch (nothing launched), a failing rank's
code (128+N for signal N), 124 timeout, 125 air-run could not launch or write a requested
report, 126/127 target not executable/not found, 128+N air-run interrupted by signal N.
--check: 0 all checks passed (warnings allowed), 1 a check failed (without GPUs: torch does not
import), 2 bad usage.)";

/// Reports an option air-run does not know, with the closest known spelling.
int unknown_option(const std::vector<KnownFlag>& flags, const std::string& given) {
  const std::string name = given.substr(0, given.find('='));
  std::vector<std::string> known;
  for (const auto& flag : flags) known.push_back("--" + flag.name);
  const std::string hint = closest_name(name, known);
  std::fputs(fmt::format("air-run: error: unknown option '{}'{}\nRun `air-run --help` for the options; "
                         "use `--` before a TARGET that starts with '-'.\n",
                         name, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint))
                 .c_str(),
             stderr);
  return 2;
}

/// The command line, once the phase clock runs (run_main).
int run_command_line(int argc, char** argv) {
  // Before anything opens a file: a closed fd 0, 1 or 2 would otherwise be
  // reused for one of air-run's own files, and output meant for the terminal
  // would land in it (a pid on stderr moving a process into the run's cgroup).
  if (auto opened = open_standard_streams(); !opened) {
    std::fputs(fmt::format("air-run: error: {}\n", opened.error().message).c_str(), stderr);
    return exit_code_for(opened.error().kind);
  }
  // Block the supervised signals before anything can start a thread: NVML and
  // the CUDA driver start threads at detection, and a thread with SIGCHLD or
  // SIGINT unblocked would take those signals away from the supervisor's
  // signalfd (seen on the H200 machines: a finished rank was never noticed).
  // Threads inherit this mask; every child gets an empty one before exec.
  const sigset_t supervised = supervised_signals();
  pthread_sigmask(SIG_BLOCK, &supervised, nullptr);
  CLI::App app{"air-run: launch a distributed training job, one process per accelerator", "air-run"};
  app.prefix_command(); // everything from TARGET on belongs to the ranks
  app.footer(k_footer);
  CliOptions options;
  // torchrun's spellings, prefixes and PET_* variables, for every flag.
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  const std::vector<KnownFlag> known = known_flags();
  auto normalized = normalize_launcher_args(args, known, current_environment());
  if (!normalized) {
    std::fputs(
        fmt::format("air-run: error: {}\nRun `air-run --help` for the options.\n", normalized.error().message)
            .c_str(),
        stderr);
    return 2;
  }
  for (const auto& note : normalized->notes) std::fputs((note + "\n").c_str(), stderr);
  register_options(app, options, used_options(normalized->args));
  const std::string_view program = argc > 0 ? std::string_view(argv[0]) : std::string_view();
  options.program = std::string(program);
  try {
    // CLI11 takes a vector in reverse order.
    std::vector<std::string> reversed(normalized->args.rbegin(), normalized->args.rend());
    app.parse(reversed);
    if (auto both = options.conflict()) throw CLI::ExcludesError(both->first, both->second);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fputs(fmt::format("air-run: error: {}\nRun `air-run --help` for the options.\n", e.what()).c_str(),
               stderr);
    return 2;
  }
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  } else if (!options.command.empty() && options.command.front().size() > 1 &&
             options.command.front()[0] == '-') {
    // prefix_command() hands an unknown option over as the TARGET; catch the typo here.
    return unknown_option(known, options.command.front());
  }

  phases::mark("options");
  Expected<int> code = 0;
  if (options.version) {
    std::fputs("air-run " AIR_VERSION "\n", stdout);
    return 0;
  }
  if (auto shell = check_completion_shell(options.print_completion); !shell) {
    std::fputs(fmt::format("air-run: error: {}\n", shell.error().message).c_str(), stderr);
    return 2;
  }
  if (const std::string document = generated_document(app, options); !document.empty()) {
    std::fputs(document.c_str(), stdout);
    return 0;
  }
  if (options.check) {
    code = check_command(options);
  } else if (options.min_busbw >= 0) {
    code = usage_error("--min-busbw applies only to --check");
  } else if (options.list_gpus) {
    code = list_gpus_command(options);
  } else if (options.list_envs || options.prune_envs) {
    code = envs_command(options);
  } else if (is_report_command(options)) {
    code = report_command(options);
  } else if (options.torch_distributor) {
    code = torch_distributor_command(options);
  } else {
    code = run_command(options);
  }
  if (!code) {
    std::fflush(stdout);
    say_on_stderr(fmt::format("air-run: error: {}\n", code.error().message));
    return exit_code_for(code.error().kind);
  }
  return *code;
}

} // namespace

int run_main(int argc, char** argv) {
  phases::start_from_environment();
  const int code = run_command_line(argc, argv);
  if (phases::enabled()) say_on_stderr(phases::report());
  return code;
}

} // namespace air::cli
