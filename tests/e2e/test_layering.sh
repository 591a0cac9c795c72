#!/usr/bin/env bash
# The dependency rule of the source tree, checked over every #include line:
#
#   cli -> report -> {cluster, pyenv, preflight, mlflow} -> run -> {warm, hang} -> hw -> spec -> os -> base
#
# A folder includes only itself and folders to its right; cluster, pyenv and
# preflight are peers that do not include each other. The pure files include
# no os/ header and no POSIX or Linux system header, so they stay testable
# without a process, a file or a clock.
set -u
root=${AIR_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 1

rank_of() {
  case $1 in
  base) echo 0 ;; os) echo 1 ;; spec) echo 2 ;; hw) echo 3 ;; warm | hang) echo 4 ;; run) echo 5 ;;
  cluster | pyenv | preflight | mlflow) echo 6 ;; report) echo 7 ;; cli) echo 8 ;;
  *) echo -1 ;;
  esac
}

# Files that must stay pure: no os/ header, no system header.
pure_files() {
  ls core/spec/*.?pp core/report/*.?pp core/run/plan.?pp core/run/outcome.?pp core/run/live_status.?pp core/hang/hang_clock.?pp core/hang/diagnosis.?pp core/hang/job_hang.?pp \
    core/hang/flight_recorder.?pp core/hang/quiet.?pp core/cluster/control_message.?pp \
    core/cluster/control_options.hpp core/cluster/hang_round.?pp core/cluster/stop_round.?pp \
    core/pyenv/python_env.?pp core/pyenv/pip_progress.?pp core/preflight/health.?pp core/base/text.?pp core/base/duration.?pp \
    core/hw/health_reading.hpp 2>/dev/null | grep -v '^core/report/collect\.'
}
# POSIX and Linux headers: what "touches the OS" looks like in an include line.
system_header='^#include <(unistd|fcntl|poll|signal|dirent|dlfcn|pthread|spawn|netdb|termios)\.h>|^#include <(sys|netinet|arpa|linux)/'

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

folder_of() {
  case $1 in
  core/*/*) echo "$1" | cut -d/ -f2 ;;
  cli/*) echo cli ;;
  *) echo "" ;;
  esac
}

while IFS= read -r file; do
  from=$(folder_of "$file")
  [ -n "$from" ] || continue
  from_rank=$(rank_of "$from")
  if [ "$from_rank" -lt 0 ]; then
    fail "$file: folder '$from' has no place in the dependency rule (tests/e2e/test_layering.sh)"
    continue
  fi
  while IFS= read -r line; do
    header=$(echo "$line" | sed -E 's/^#include "([^"]+)".*/\1/')
    to=$(folder_of "$header")
    [ -n "$to" ] || continue
    to_rank=$(rank_of "$to")
    if [ "$to" != "$from" ] && { [ "$to_rank" -gt "$from_rank" ] || [ "$to_rank" -eq "$from_rank" ]; }; then
      fail "$file includes $header: $from may include only folders to its right"
    fi
  done < <(grep -E '^#include "(core|cli)/' "$file")
done < <(git ls-files 'core/*.cpp' 'core/*.hpp' 'cli/*.cpp' 'cli/*.hpp' | grep -v '^cli/nccl_check/')

# The ranks' Python (core/*/python/*.py) follows the same rule: a module
# imports, for pyflakes and pytest, only modules of its own folder or of folders
# to its right (air_run_slots.py is generated for run/ from
# core/run/progress_slots.def). With pyflakes (tests/e2e/test_python_lint.sh)
# this keeps run/'s shim from naming MLflow's part, which the caller hands in.
py_folder_of() {
  local found
  if [ "$1" = air_run_slots ]; then
    echo run
    return
  fi
  found=$(git ls-files "core/*/python/$1.py" | head -1)
  [ -n "$found" ] && folder_of "$found"
}
while IFS= read -r file; do
  from=$(folder_of "$file")
  from_rank=$(rank_of "$from")
  if [ "$from_rank" -lt 0 ]; then
    fail "$file: folder '$from' has no place in the dependency rule (tests/e2e/test_layering.sh)"
    continue
  fi
  while IFS= read -r module; do
    to=$(py_folder_of "$module")
    [ -n "$to" ] || continue
    to_rank=$(rank_of "$to")
    if [ "$to" != "$from" ] && [ "$to_rank" -ge "$from_rank" ]; then
      fail "$file imports $module ($to): $from may import only folders to its right"
    fi
  done < <(sed -nE 's/^(from|import) (air_run_[A-Za-z0-9_]+).*/\2/p' "$file")
done < <(git ls-files 'core/*.py')

# No loose files directly under core/: every file belongs to a subsystem.
for file in $(git ls-files 'core/*.cpp' 'core/*.hpp'); do
  case $file in core/*/*) ;; *) fail "$file: not in a subsystem folder of core/" ;; esac
done

for file in $(pure_files); do
  if grep -qE '^#include "core/os/' "$file"; then fail "$file is pure but includes an os/ header"; fi
  if grep -qE "$system_header" "$file"; then fail "$file is pure but includes a system header: $(grep -E "$system_header" "$file" | head -1)"; fi
done

# The check itself must be able to fail: a planted base -> run include is found.
if [ -z "${AIR_LAYERING_SELF_TEST:-}" ]; then
  planted=$(mktemp -d)
  trap 'rm -rf "$planted"' EXIT
  mkdir -p "$planted/core/base"
  printf '#include "core/run/plan.hpp"\n' >"$planted/core/base/x.hpp"
  if (cd "$planted" && git init -q && git add -A &&
    AIR_SOURCE_DIR="$planted" AIR_LAYERING_SELF_TEST=1 bash "$root/tests/e2e/test_layering.sh" >/dev/null 2>&1); then
    fail "a planted base -> run include was not reported"
  fi
  # And a planted run -> mlflow import of the ranks' Python.
  rm -rf "$planted/core/base" "$planted/.git"
  mkdir -p "$planted/core/run/python" "$planted/core/mlflow/python"
  printf 'from air_run_mlflow_wait import _air_run_mlflow_run\n' >"$planted/core/run/python/air_run_x.py"
  printf 'def _air_run_mlflow_run():\n    pass\n' >"$planted/core/mlflow/python/air_run_mlflow_wait.py"
  if (cd "$planted" && git init -q && git add -A &&
    AIR_SOURCE_DIR="$planted" AIR_LAYERING_SELF_TEST=1 bash "$root/tests/e2e/test_layering.sh" >/dev/null 2>&1); then
    fail "a planted run -> mlflow import of Python was not reported"
  fi
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures layering violation(s)"
  exit 1
fi
[ -n "${AIR_LAYERING_SELF_TEST:-}" ] || echo "layering: every include follows cli -> report -> {cluster, pyenv, preflight, mlflow} -> run -> {warm, hang} -> hw -> spec -> os -> base"
