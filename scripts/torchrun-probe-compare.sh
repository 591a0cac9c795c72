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
# code 1 when any line differs beyond those. Every run has a 120 s limit; lines
# run side by side (COMPARE_JOBS). A c10d line for N nodes runs as N launchers
# joining on this host; a line whose rendezvous host is a name (worker-0) needs
# that name in /etc/hosts.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
air_run=$(readlink -f "${1:-$here/build/cli/air-run}")
torchrun=${2:-torchrun}
[[ $torchrun == */* ]] && torchrun=$(readlink -f "$torchrun")
source "$here/tests/e2e/torchrun_lines.sh"
lines_py=$here/tests/e2e/torchrun_lines.py
work=$(mktemp -d "${TMPDIR:-/tmp}/torchrun-compare-XXXXXX")
trap 'rm -rf "$work"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# launch N WHO LAUNCHER TARGET NODES: one run of the line in LINE_ARGS, as
# NODES copies side by side (the nodes of a c10d line, joined on this host);
# the probe's records land in $work/N/WHO/probe. Prints the worst exit status.
launch() {
  local n=$1 who=$2 launcher=$3 target=$4 nodes=$5 d=$work/$1/$2 cwd node pids=() rc worst=0
  mkdir -p "$d/probe"
  cwd=$(torchrun_line_workdir "$d" "$target")
  for ((node = 0; node < nodes; node++)); do
    (cd "$cwd" && PROBE_OUT=$d/probe TMPDIR=$d timeout 120 $launcher "${LINE_ARGS[@]}" >"$d/stdout.$node" 2>"$d/stderr.$node") &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid"
    rc=$?
    ((rc > worst)) && worst=$rc
  done
  echo $worst
}

echo "| # | source | torchrun | air-run | differences |"
echo "|---|---|---|---|---|"

# compare_line N KIND REPO PATH TARGET LINE: one Markdown row into $work/rows/N
# (and to stderr, as progress); exit status 1 when the line differs.
compare_line() {
  local n=$1 kind=$2 repo=$3 path=$4 target=$5 line=$6 rc_t rc_a diffs="" port nodes
  # One free port per line, for both runs (they run one after the other, so it
  # is free again): the line's variables ($MASTER_PORT, $port_number) and, as
  # PET_MASTER_PORT, the default of both launchers where the line names no
  # port, so that lines running side by side never meet on 29500.
  port=$(free_port)
  torchrun_line_vars "$port"
  torchrun_line_args "$line"
  # A c10d line for N nodes (not a range) runs as N launchers on this host.
  nodes=1
  if [[ $kind == c10d && $line =~ --nnodes[=\ ]([0-9]+)( |$) ]]; then nodes=${BASH_REMATCH[1]}; fi
  rc_t=$(PET_MASTER_PORT=$port launch "$n" torchrun "$torchrun" "$target" "$nodes")
  rc_a=$(PET_MASTER_PORT=$port launch "$n" air-run "$air_run" "$target" "$nodes")
  if [[ $rc_t == 0 && $rc_a == 0 ]]; then
    local loose=()
    # Under a c10d rendezvous (--standalone is one) each launcher picks a free
    # port of its own for the ranks' store, apart from the rendezvous port.
    [[ $line == *--standalone* || $line == *c10d* ]] && loose=(--port-may-differ)
    # Under --numa-binding air-run's OMP_NUM_THREADS is the cores a rank owns.
    [[ $line == *--numa[-_]binding* ]] && loose+=(--omp-may-differ)
    diffs=$(python3 "$lines_py" compare "${loose[@]}" "$work/$n/torchrun/probe" "$work/$n/air-run/probe" |
      paste -sd ';' -)
  elif [[ $rc_t == 0 || $rc_a == 0 ]]; then
    diffs="only one launched: $(tail -1 "$work/$n/air-run/stderr.0") / $(tail -1 "$work/$n/torchrun/stderr.0")"
  else
    diffs="neither launched: $(tail -1 "$work/$n/air-run/stderr.0") / $(tail -1 "$work/$n/torchrun/stderr.0")"
  fi
  echo "| $n | $repo \`$path\` | exit $rc_t | exit $rc_a | ${diffs:-none} |" | tee "$work/rows/$n" >&2
  [[ -z $diffs ]]
}

# Lines run side by side, COMPARE_JOBS at a time (default: a quarter of the CPUs).
jobs=${COMPARE_JOBS:-$(($(nproc) / 4 + 1))}
mkdir -p "$work/rows"
status=0
n=0
running=0
while IFS=$'\t' read -r kind repo path target line; do
  [[ -z $kind || $kind == \#* ]] && continue
  n=$((n + 1))
  [[ $kind == dry ]] && continue # needs a second node
  if ((running >= jobs)); then
    wait -n || status=1
    running=$((running - 1))
  fi
  compare_line "$n" "$kind" "$repo" "$path" "$target" "$line" </dev/null &
  running=$((running + 1))
done <"$TORCHRUN_LINES_FILE"
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
for row in $(ls "$work/rows" | sort -n); do cat "$work/rows/$row"; done
exit $status
