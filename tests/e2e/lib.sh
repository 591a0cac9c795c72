# Shared helpers for the end-to-end tests (ccache test/suites style).
# Each test_*.sh sources this, defines test functions and calls run_tests.
# AIR_RUN (the binary) and AIR_FIXTURE_DIR come from ctest; defaults suit a manual run.
set -uo pipefail

: "${AIR_SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${AIR_RUN:=$AIR_SOURCE_DIR/build/cli/air-run}"
: "${AIR_FIXTURE_DIR:=$AIR_SOURCE_DIR/build/fixtures}"
# has_module PY MODULE: whether PY finds MODULE (found, not imported: torch's import takes seconds).
has_module() { "$1" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)' "$2" >/dev/null 2>&1; }
# The interpreter with torch: Debian's (python3-torch), else the python3 on
# PATH where that one has it (a GPU machine's, whose /usr/bin/python3 has none).
if [[ -z ${TORCH_PYTHON:-} ]]; then
  TORCH_PYTHON=/usr/bin/python3
  if ! has_module /usr/bin/python3 torch && has_module python3 torch; then TORCH_PYTHON=$(command -v python3); fi
fi
export TORCH_PYTHON
F=$AIR_FIXTURE_DIR
unset AIR_RUN_FAKE_GPUS CUDA_VISIBLE_DEVICES RANK LOCAL_RANK WORLD_SIZE MASTER_PORT
# The tests set the CI system they mean themselves: running the suite inside
# GitHub Actions or GitLab CI must not change what air-run prints.
unset GITHUB_ACTIONS GITHUB_STEP_SUMMARY GITHUB_WORKSPACE GITLAB_CI
for v in $(env | sed -n 's/^\(AIR_RUN_[A-Z_]*\)=.*/\1/p'); do [[ $v == AIR_RUN_BINARY ]] || unset "$v"; done
# The suite is written for a machine without GPUs (CI's): `--cpu-ranks N`
# runs N ranks only where none is found, and what air-run prints names none.
# On a machine with NVIDIA GPUs it is shown none (an empty AIR_RUN_FAKE_GPUS
# is "no GPU"), so that the same cases hold there. The scripts written for
# GPUs as well set AIR_E2E_GPUS=real before sourcing this: they see the real ones.
if [[ ${AIR_E2E_GPUS:-} != real ]] && { [[ -e /dev/nvidiactl || -e /dev/nvidia0 ]] || command -v nvidia-smi >/dev/null; }; then
  export AIR_RUN_FAKE_GPUS=
fi
# The sanitizer runtime reports leaks of the parent only; children are not instrumented.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"

failures=0
current=""
TESTDIR=""

fail() {
  echo "FAIL [$current]: $*" >&2
  echo "  test data left in $TESTDIR" >&2
  echo "$*" >>"$TESTDIR/.failed"
  return 1
}

# run_air ARGS...: runs air-run capturing stdout, stderr and the exit code in $out, $err, $rc.
# AIR_BOUND=SECONDS: each run is ended (timeout, then SIGKILL 10 s later) after
# that long, for suites whose ranks could otherwise wait for ever (real torch).
run_air() {
  ${AIR_BOUND:+timeout -k 10 "$AIR_BOUND"} "$AIR_RUN" "$@" >"$TESTDIR/stdout" 2>"$TESTDIR/stderr"
  rc=$?
  out=$(cat "$TESTDIR/stdout")
  err=$(cat "$TESTDIR/stderr")
}

expect_rc() {
  [[ $rc == "$1" ]] || fail "expected exit code $1, got $rc; stderr: $(tail -5 "$TESTDIR/stderr")"
}
expect_contains() { # expect_contains HAYSTACK NEEDLE
  [[ $1 == *"$2"* ]] || fail "expected to find '$2' in: $(echo "$1" | tail -20)"
}
expect_not_contains() {
  [[ $1 != *"$2"* ]] || fail "did not expect '$2' in: $(echo "$1" | tail -20)"
}
expect_eq() {
  [[ $1 == "$2" ]] || fail "expected '$2', got '$1'"
}

# pid_alive PID: true while PID exists and is not a zombie.
pid_alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $state != Z* ]]
}

# wait_for COND_CMD SECONDS: polls a command until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $2))
  # Checked at least once: `wait_for COND 0` asks "true right now?".
  while true; do
    if eval "$1"; then return 0; fi
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# expect_two_nodes_of_two_ranks_env RANK ENV: the rank variables of global
# rank RANK in a 2-node job with 2 ranks per node, as printed by `env` (ENV).
expect_two_nodes_of_two_ranks_env() {
  local r=$1 e=$2
  expect_contains "$e" "RANK=$r"
  expect_contains "$e" "LOCAL_RANK=$((r % 2))"
  expect_contains "$e" "WORLD_SIZE=4"
  expect_contains "$e" "LOCAL_WORLD_SIZE=2"
  expect_contains "$e" "GROUP_RANK=$((r / 2))"
  expect_contains "$e" "NODE_RANK=$((r / 2))"
  expect_contains "$e" "GROUP_WORLD_SIZE=2"
  expect_contains "$e" "NUM_NODES=2"
}

# start_training RANKS [AIR-RUN OPTIONS...]: the product page's DDP example
# with endless epochs, under air-run in the background (SIGINT restored, as a
# terminal would: a non-interactive shell starts background jobs with it
# ignored). Returns once RANKS ranks have trained an epoch; sets $air (air-run's
# pid) and $rank_pids.
start_training() {
  local ranks=$1
  shift
  rm -f stdout stderr # a previous run's lines are not this one's (the job truncates them late)
  env --default-signal=INT "$AIR_RUN" --python "$TORCH_PYTHON" --summary summary.json "$@" \
    "$AIR_SOURCE_DIR/configs/examples/simple_mlp_ddp.py" --epochs 1000000 >stdout 2>stderr &
  air=$!
  if ! wait_for "[[ \$(grep -c 'epoch 1:' stdout) -ge $ranks ]]" 120; then
    kill -KILL "$air"
    fail "training did not start: $(tail -5 stderr)"
    return 1
  fi
  rank_pids=$(pgrep -P "$air" | tr '\n' ' ')
}

# finish_air SECONDS: waits for the background air-run ($air), at most SECONDS;
# then saves its process tree and each thread's signal masks to hang.txt (what
# a missed SIGCHLD looks like), kills it and fails. Sets $rc.
finish_air() {
  if ! wait_for "! pid_alive $air" "$1"; then
    {
      ps -eo pid,ppid,pgid,stat,wchan:24,etime,args --forest
      grep -H -E '^(Name|State|SigPnd|ShdPnd|SigBlk|SigIgn)' /proc/"$air"/task/*/status
    } >hang.txt 2>&1
    kill -KILL "$air"
    fail "air-run still running after $1 s: killed; see hang.txt"
  fi
  wait "$air" 2>/dev/null # no "Killed" job notice in the test output
  rc=$?
}

# expect_ranks_gone: no rank of $rank_pids outlived air-run (5 s to die).
expect_ranks_gone() {
  local pid
  [[ -n $rank_pids ]] || fail "no rank pid recorded"
  for pid in $rank_pids; do
    wait_for "! pid_alive $pid" 5 || fail "rank pid $pid outlived air-run"
  done
  return 0
}

run_tests() {
  local fn
  for fn in $(declare -F | awk '{print $3}' | grep '^test_'); do
    # E2E_ONLY=substring runs only the matching tests (a short GPU lease, a rerun)
    [[ -z ${E2E_ONLY:-} || $fn == *"$E2E_ONLY"* ]] || continue
    current=$fn
    TESTDIR=$(mktemp -d "${TMPDIR:-/tmp}/air-e2e-$fn-XXXXXX")
    local before=$failures start=$EPOCHREALTIME
    (cd "$TESTDIR" && $fn) || true
    # The seconds each test took, so that a slow one shows in CI's log.
    local took
    took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }')
    # the subshell cannot update the counter: it records failures in a file
    if [[ -s "$TESTDIR/.failed" ]]; then failures=$((failures + 1)); fi
    if ((failures == before)); then
      echo "ok   $fn ($took)"
      rm -rf "$TESTDIR"
    else
      echo "FAIL $fn ($took, data in $TESTDIR)"
    fi
  done
  ((failures == 0)) || { echo "$failures test(s) failed" >&2; exit 1; }
}

# free_port_pair: a port P with P and P+1 free (master port and control port),
# for tests that start several agents on loopback.
free_port_pair() {
  /usr/bin/python3 - <<'PY'
import socket
for _ in range(200):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1))
    except OSError:
        continue
    finally:
        a.close(); b.close()
    if p + 1 < 65536:
        print(p); break
PY
}

# json_get FILE EXPRESSION: prints EXPRESSION evaluated with the JSON document
# of FILE as `d` (several comma-separated values print space-separated).
# free_port: a TCP port free on 127.0.0.1 right now.
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_listening() { # port_listening PORT: something accepts connections on 127.0.0.1:PORT
  /usr/bin/python3 -c 'import socket,sys; s=socket.socket(); s.settimeout(0.2); sys.exit(s.connect_ex(("127.0.0.1", int(sys.argv[1]))))' "$1"
}

json_get() { python3 -c "import json, os, sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# One of two local agents on loopback (static rendezvous at $PORT).
start_node() { # start_node RANK ARGS...: one agent in the background, node$RANK.{out,err,rc}
  local rank=$1
  shift
  ("$AIR_RUN" --nnodes 2 --node-rank "$rank" --master-addr 127.0.0.1 --master-port "$PORT" "$@" \
    >"node$rank.out" 2>"node$rank.err"
  echo $? >"node$rank.rc") 2>/dev/null &
  eval "node${rank}_pid=$!"
}

# start_agent NAME ARGS...: one c10d agent joining at 127.0.0.1:$PORT, in a
# process group of its own (so that it can be killed with everything it
# started); NAME.pid is its pid, output in NAME.{out,err}, code in NAME.rc.
start_agent() {
  local name=$1
  shift
  (setsid sh -c 'echo $$ >"$0.pid"; exec "$@"' "$name" "$AIR_RUN" --rdzv-backend c10d \
    --rdzv-endpoint "127.0.0.1:$PORT" --env "AGENT=$name" --summary "$name.json" "$@" \
    >"$name.out" 2>"$name.err"
  echo $? >"$name.rc") 2>/dev/null &
}

# connections_to PORT: how many established TCP connections go to 127.0.0.1:PORT
# (agents that have reached node 0's join point).
connections_to() {
  python3 -c '
import sys
port = "%04X" % int(sys.argv[1])
n = 0
for line in open("/proc/net/tcp").readlines()[1:]:
    f = line.split()
    if f[2].endswith(":" + port) and f[3] == "01":
        n += 1
print(n)' "$1"
}
