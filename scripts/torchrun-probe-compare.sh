#!/usr/bin/env bash
# Runs every single-node line of tests/data/torchrun_lines.txt under real
# torchrun and under air-run, with the training script replaced by the probe
# (tests/e2e/torchrun_probe.py), and diffs what each rank recorded (argv and
# torchrun's worker variables). For the GPU machine, where torch 2.x's
# torchrun is installed:
#
#   scripts/torchrun-probe-compare.sh [AIR_RUN] [TORCHRUN] > compare.md
#
# AIR_RUN defaults to build/cli/air-run, TORCHRUN to `torchrun` on PATH. The
# probe runs under `python3` on PATH for both (air-run's default interpreter;
# torchrun runs its own sys.executable, so put torch's python first on PATH).
# Prints one Markdown row per line: source, result, differences. Variables that
# differ on purpose (docs/torchrun.md) are compared for presence only. Exit
# code 1 when any line differs beyond those. Every run has a 120 s limit.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
air_run=$(readlink -f "${1:-$here/build/cli/air-run}")
torchrun=${2:-torchrun}
source "$here/tests/e2e/torchrun_lines.sh"
lines_py=$here/tests/e2e/torchrun_lines.py
work=$(mktemp -d "${TMPDIR:-/tmp}/torchrun-compare-XXXXXX")
trap 'rm -rf "$work"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# launch N WHO LAUNCHER TARGET LINE: one run; the probe's records land in $work/N/WHO/probe.
launch() {
  local n=$1 who=$2 launcher=$3 target=$4 line=$5 d=$work/$1/$2 cwd
  mkdir -p "$d/probe"
  cwd=$(torchrun_line_workdir "$d" "$target")
  (cd "$cwd" && PROBE_OUT=$d/probe TMPDIR=$d timeout 120 $launcher "${LINE_ARGS[@]}" >"$d/stdout" 2>"$d/stderr")
  echo $?
}

echo "| # | source | torchrun | air-run | differences |"
echo "|---|---|---|---|---|"
n=0
status=0
while IFS=$'\t' read -r kind repo path target line; do
  [[ -z $kind || $kind == \#* ]] && continue
  n=$((n + 1))
  [[ $kind == dry ]] && continue # needs a second node
  # Same port for both runs; runs are sequential, so it is free again.
  torchrun_line_vars "$(free_port)"
  torchrun_line_args "$line"
  rc_t=$(launch "$n" torchrun "$torchrun" "$target" "$line")
  rc_a=$(launch "$n" air-run "$air_run" "$target" "$line")
  diffs=""
  if [[ $rc_t == 0 && $rc_a == 0 ]]; then
    diffs=$(python3 "$lines_py" compare "$work/$n/torchrun/probe" "$work/$n/air-run/probe" | paste -sd ';' -)
  elif [[ $rc_t == 0 || $rc_a == 0 ]]; then
    diffs="only one launched: $(tail -1 "$work/$n/air-run/stderr") / $(tail -1 "$work/$n/torchrun/stderr")"
  fi
  [[ -z $diffs ]] || status=1
  echo "| $n | $repo \`$path\` | exit $rc_t | exit $rc_a | ${diffs:-none} |"
done <"$TORCHRUN_LINES_FILE"
exit $status
