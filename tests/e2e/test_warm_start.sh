#!/usr/bin/env bash
# --preload: ranks forked from one warm interpreter that imported torch,
# compared with ranks started fresh, through the built air-run and real
# PyTorch (gloo on CPU). Uses Debian's /usr/bin/python3, the interpreter that
# has torch on this machine ($TORCH_PYTHON).
source "$(dirname "$0")/lib.sh"

if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch"
  exit 0
fi

# Every air-run here is bounded: a warm start that hangs (issue 33) fails its
# test instead of the suite.
run_air() {
  # shellcheck disable=SC2086 # AIR_WRAP: a command before air-run (taskset), split into words
  timeout -k 10 "${AIR_BOUND:-300}" ${AIR_WRAP:-} "$AIR_RUN" "$@" >"$TESTDIR/stdout" 2>"$TESTDIR/stderr"
  rc=$?
  out=$(cat "$TESTDIR/stdout")
  err=$(cat "$TESTDIR/stderr")
}

# What a rank sees of its own process, as JSON in view.RANK.json.
write_view() {
  cat >view.py <<'PY'
import json, os, sys
warm = "torch" in sys.modules
import random
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)


def descriptors():
    """What the rank holds open: its standard streams by number and kind,
    and how many descriptors of each kind there are in all. What torch opens
    as it is imported (a pipe, on torch 2.6) gets another number when the
    import ran before the rank's streams were set up (warm) than after
    (fresh), and gloo's sockets come and go while its mesh settles, so past
    the standard streams descriptors are counted, not numbered, and sockets
    are left out."""
    low, kinds = [], {}
    for f in os.listdir("/proc/self/fd"):
        try:
            t = os.readlink("/proc/self/fd/" + f)
        except OSError:  # listdir's own, closed by now
            continue
        if t.startswith("socket:"):
            continue
        kind = t if t.startswith("anon_inode:") else "file" if t.startswith("/") else t.split(":")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
        if int(f) < 3:
            low.append((int(f), kind))
    return [sorted(low), sorted(kinds.items())]


view = {
    "argv": sys.argv, "file": __file__, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
    "leader": os.getpgid(0) == os.getpid(), "parent": open("/proc/%d/comm" % os.getppid()).read().strip(),
    "fds": descriptors(),
    "stdin": os.readlink("/proc/self/fd/0"),
    "world": dist.get_world_size(), "sum": t.item(), "timed": getattr(dist.all_reduce, "_air_run_timed", False),
    "random": random.random(), "hashseed_env": os.environ.get("PYTHONHASHSEED"),
}
with open("view.%s.json" % os.environ["RANK"], "w") as f:
    json.dump({"warm": warm, "view": view}, f)
PY
}

test_warm_ranks_see_what_fresh_ranks_see() {
  write_view
  mkdir fresh warm
  cd fresh || return 1
  run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --no-preload --summary ../fresh.json ../view.py a b
  expect_rc 0
  cd ../warm || return 1
  run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --preload torch --summary ../warm.json ../view.py a b
  expect_rc 0
  cd .. || return 1
  expect_eq "$(json_get fresh.json '[r["warm"] for r in d["ranks"]]')" "[False, False, False]"
  expect_eq "$(json_get warm.json '[r["warm"] for r in d["ranks"]]')" "[True, True, True]"
  # The warm ranks had torch before their first line; the fresh ones did not.
  expect_eq "$(json_get warm/view.0.json 'd["warm"]')" "True"
  expect_eq "$(json_get fresh/view.0.json 'd["warm"]')" "False"
  local r
  for r in 0 1 2; do
    /usr/bin/python3 - "fresh/view.$r.json" "warm/view.$r.json" <<'PY' || fail "rank $r sees another process warm than fresh (above)"
import json, sys
fresh, warm = (json.load(open(p))["view"] for p in sys.argv[1:])
bad = 0
for key in fresh:
    a, b = fresh[key], warm[key]
    if key in ("cwd", "file", "path0"):  # the runs ran in two folders
        a, b = a.replace("/fresh", "/X"), b.replace("/warm", "/X")
    if key == "random":
        continue
    if a != b:
        print("%s: fresh %r, warm %r" % (key, a, b))
        bad += 1
sys.exit(1 if bad else 0)
PY
  done
  expect_eq "$(json_get warm/view.0.json 'd["view"]["parent"], d["view"]["leader"], d["view"]["timed"]')" \
    "air-run True True"
  expect_eq "$(json_get warm/view.1.json 'd["view"]["argv"], d["view"]["stdin"]')" "['../view.py', 'a', 'b'] /dev/null"
  # Python's random reseeds in a forked child: no two ranks draw alike.
  expect_eq "$(/usr/bin/python3 -c 'import glob, json
print(len({json.load(open(p))["view"]["random"] for p in glob.glob("warm/view.*.json")}))')" "3"
}

test_restart_forks_again_and_counts_steps() {
  cat >train.py <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    optimizer.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    optimizer.step()
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and dist.get_rank() == 1:
    raise SystemExit(7)
print("rank %d attempt %s done" % (dist.get_rank(), os.environ["TORCHELASTIC_RESTART_COUNT"]), flush=True)
PY
  run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --preload torch --max-restarts 1 --summary summary.json train.py
  expect_rc 0
  expect_contains "$out" "rank 1 attempt 1 done"
  expect_eq "$(json_get summary.json 'len(d["outcome"]["attempts"]), d["outcome"]["attempts"][0]["exit_code"]')" "2 7"
  expect_eq "$(json_get summary.json '[(r["warm"], r["steps"]) for r in d["ranks"]]')" "[(True, 5), (True, 5)]"
  expect_eq "$(pgrep -f "$TESTDIR.*air_run_warm|air_run_warm.*$TESTDIR" | wc -l)" "0"
}

# The default (preload: auto): torch preloaded for a target that imports it;
# the first attempt forks only when the node has no CPU to spare per rank
# (taskset sets what air-run may use), restarts always; --no-preload: never.
test_auto_warm_start_forks_where_it_cannot_slow_the_launch() {
  (($(nproc) >= 2)) || { echo "skip: needs 2 CPUs"; return 0; }
  cat >train.py <<'PY'
import os, sys
warm = "torch" in sys.modules
import torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
rank, attempt = dist.get_rank(), os.environ["TORCHELASTIC_RESTART_COUNT"]
print("rank %d attempt %s warm %s" % (rank, attempt, warm), flush=True)
if attempt == "0" and rank == dist.get_world_size() - 1:
    raise SystemExit(7)
PY
  AIR_WRAP="taskset -c 0" run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --max-restarts 1 --dry-run train.py
  expect_contains "$out" "warm start (auto: train.py line 3: import torch, torch.distributed as dist): 2 rank(s) on \
1 CPU(s): every attempt's ranks fork"
  AIR_WRAP="taskset -c 0" run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --max-restarts 1 train.py
  expect_rc 0
  expect_contains "$out" "rank 0 attempt 0 warm True"
  expect_contains "$out" "rank 1 attempt 1 warm True"
  # A CPU to spare per rank: the first attempt fresh, the restart forked.
  AIR_WRAP="taskset -c 0,1" run_air --cpu-ranks 1 --python "$TORCH_PYTHON" --max-restarts 1 \
    --summary summary.json train.py
  expect_rc 0
  expect_contains "$out" "rank 0 attempt 0 warm False"
  expect_contains "$out" "rank 0 attempt 1 warm True"
  expect_eq "$(json_get summary.json '[r["warm"] for r in d["ranks"]]')" "[True]"
  # Off: fresh in every attempt, no interpreter.
  AIR_WRAP="taskset -c 0" run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --max-restarts 1 --no-preload train.py
  expect_rc 0
  expect_contains "$out" "rank 0 attempt 0 warm False"
  expect_contains "$out" "rank 1 attempt 1 warm False"
  run_air --no-preload --preload torch --dry-run train.py
  expect_rc 2
  expect_contains "$err" "--preload excludes --no-preload"
  # A script that imports no torch: no warm start.
  printf 'print("plain")\n' >plain.py
  AIR_WRAP="taskset -c 0" run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --max-restarts 1 --dry-run plain.py
  expect_contains "$out" "warm start: off (auto: found no import of torch in plain.py)"
}

test_exits_and_tracebacks_are_a_fresh_interpreters() {
  printf 'import sys\nprint("out")\nsys.exit(3)\n' >three.py
  run_air --python "$TORCH_PYTHON" --preload torch three.py
  expect_rc 3
  expect_eq "$out" "out"
  printf 'def inner():\n    raise ValueError("bad value")\n\ninner()\n' >raise.py
  run_air --python "$TORCH_PYTHON" --preload torch raise.py
  expect_rc 1
  expect_contains "$err" "Traceback (most recent call last):
  File \"$TESTDIR/raise.py\", line 4, in <module>"
  expect_contains "$err" "ValueError: bad value"
  expect_not_contains "$err" "air_run_warm"
  # python -m under the warm start, with its argv[0] as python sets it
  mkdir pkg
  printf 'import sys\nprint(sys.argv[0].endswith("pkg/tool.py"), sys.argv[1:])\n' >pkg/tool.py
  touch pkg/__init__.py
  run_air --python "$TORCH_PYTHON" --preload torch -m pkg.tool x --flag
  expect_rc 0
  expect_eq "$out" "True ['x', '--flag']"
}

# The --stdin rank forked warm reads air-run's stdin as a fresh one does; the
# others read /dev/null.
test_the_stdin_rank_forked_warm_reads_air_runs_stdin() {
  printf 'import os, sys\nif os.environ["RANK"] == "1":\n    print("hello", input())\nelse:\n    print("rank 0 read", repr(sys.stdin.read()))\n' >ask.py
  echo piped >in.txt
  run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --preload torch --stdin 1 --summary summary.json ask.py <in.txt
  expect_rc 0
  expect_eq "$(json_get summary.json '[r["warm"] for r in d["ranks"]]')" "[True, True]"
  expect_contains "$out" "hello piped"
  expect_contains "$out" "rank 0 read ''"
}

test_a_module_that_does_not_import_leaves_ranks_fresh() {
  printf 'import sys\nprint("torch" in sys.modules)\n' >plain.py
  run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --preload no_such_module_here --summary summary.json plain.py
  expect_rc 0
  expect_contains "$err" "--preload: rank 0 starts a fresh interpreter: importing no_such_module_here: \
ModuleNotFoundError: No module named 'no_such_module_here'"
  expect_eq "$(json_get summary.json '[r["warm"] for r in d["ranks"]]')" "[False, False]"
  expect_eq "$(grep -c False stdout)" "2"
}

test_kill_9_of_air_run_leaves_no_rank_and_no_interpreter() {
  printf 'import time, torch\nprint("up", flush=True)\ntime.sleep(300)\n' >sleeper.py
  "$AIR_RUN" --cpu-ranks 2 --python "$TORCH_PYTHON" --preload torch sleeper.py >stdout 2>stderr &
  air=$!
  if ! wait_for "[[ \$(grep -c up stdout) -ge 2 ]]" 120; then
    kill -KILL "$air"
    fail "ranks did not start: $(tail -5 stderr)"
    return 1
  fi
  # Forked, not exec'd: the ranks carry the warm interpreter's command line.
  # It is the oldest of them (started before the ranks).
  local forked warm_pid
  forked=$(pgrep -P "$air" -f air_run_warm | sort -n)
  warm_pid=$(echo "$forked" | head -1)
  rank_pids=$(echo "$forked" | tail -n +2 | tr '\n' ' ')
  [[ -n $warm_pid ]] || fail "no warm interpreter under air-run: $(ps -o pid,args --ppid "$air")"
  expect_eq "$(echo $rank_pids | wc -w)" "2"
  kill -KILL "$air"
  wait "$air" 2>/dev/null
  expect_ranks_gone
  wait_for "! pid_alive $warm_pid" 5 || fail "the warm interpreter $warm_pid outlived air-run"
}

test_a_warm_rank_that_hangs_is_named() {
  cat >stuck.py <<'PY'
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()


def stuck_here():
    time.sleep(3600)


t = torch.ones(1)
dist.all_reduce(t)
print("rank %d in the loop" % rank, flush=True)
if rank == 1:
    stuck_here()
dist.all_reduce(t)
PY
  run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --preload torch --hang-timeout 4s --on-hang stop \
    --grace-period 5s --summary summary.json stuck.py
  expect_rc 124
  expect_contains "$err" "rank 1 is in stuck_here at stuck.py:7; ranks 0 and 2 wait in all_reduce #2"
  expect_eq "$(json_get summary.json 'd["outcome"]["hang"]["laggards"], [r["warm"] for r in d["ranks"]]')" \
    "[1] [True, True, True]"
}

test_bad_preload_is_refused_before_anything_runs() {
  printf 'print("ran")\n' >ok.py
  run_air --python "$TORCH_PYTHON" --preload 'torch;rm' ok.py
  expect_rc 2
  expect_contains "$err" "preload: 'torch;rm' is not a Python module name"
  expect_not_contains "$out" "ran"
  printf 'command: [ok.py]\npreload:\n  - torch\n  - 2fast\n' >job.yaml
  run_air -f job.yaml --python "$TORCH_PYTHON"
  expect_rc 2
  expect_contains "$err" "job.yaml:2"
  expect_contains "$err" "'2fast' is not a Python module name"
  # A shell target has no interpreter to warm: said, and run as usual.
  printf '#!/bin/sh\necho shell\n' >s.sh
  chmod +x s.sh
  run_air --no-python --preload torch ./s.sh
  expect_rc 0
  expect_contains "$err" "preload is left unused: the ranks are not Python programs"
}

test_an_import_that_blocks_ends_with_the_timeout_and_stop_signals() {
  printf 'import time\ntime.sleep(3600)\n' >hang_e2e_mod.py
  printf 'import time\ntime.sleep(60)\n' >slow.py
  local t0=$SECONDS
  AIR_BOUND=60 PYTHONPATH=$TESTDIR run_air --python "$TORCH_PYTHON" --preload hang_e2e_mod --timeout 5s slow.py
  expect_rc 124
  ((SECONDS - t0 < 40)) || fail "--timeout 5s took $((SECONDS - t0)) s"
  expect_contains "$err" "the run's --timeout came while the interpreter was importing"
  local sig code
  for sig in TERM HUP; do
    PYTHONPATH=$TESTDIR timeout -k 10 60 "$AIR_RUN" --python "$TORCH_PYTHON" --preload hang_e2e_mod slow.py \
      >stdout 2>stderr &
    local air=$!
    sleep 3
    kill -"$sig" "$air"
    wait "$air"
    code=$?
    expect_eq "$sig $code" "$sig $((128 + $(kill -l "$sig")))"
  done
  wait_for "[[ -z \$(pgrep -f air_run_warm.*hang_e2e_mod) ]]" 5 ||
    fail "a warm interpreter outlived air-run: $(pgrep -af air_run_warm.*hang_e2e_mod)"
}

test_an_import_that_prints_much_does_not_block_the_ranks() {
  printf 'import sys\nsys.stdout.write("o" * (1 << 20))\nsys.stderr.write("e" * (1 << 20))\n' >loud_e2e_mod.py
  printf 'print("ran")\n' >ok.py
  AIR_BOUND=60 PYTHONPATH=$TESTDIR run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --preload loud_e2e_mod \
    --summary summary.json ok.py
  expect_rc 0
  expect_eq "$(grep -c ran stdout)" "2"
  expect_eq "$(json_get summary.json '[r["warm"] for r in d["ranks"]]')" "[True, True]"
}

test_processes_an_import_started_are_ended_and_the_ranks_start_fresh() {
  printf 'import subprocess\nsubprocess.Popen(["sleep", "988"])\n' >popen_e2e_mod.py
  cat >daemon_e2e_mod.py <<'PY'
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "989"])
    os._exit(0)
PY
  printf 'print("ran")\n' >ok.py
  AIR_BOUND=60 PYTHONPATH=$TESTDIR run_air --cpu-ranks 2 --python "$TORCH_PYTHON" \
    --preload popen_e2e_mod,daemon_e2e_mod --summary summary.json ok.py
  expect_rc 0
  expect_contains "$err" "--preload: rank 0 starts a fresh interpreter: importing popen_e2e_mod, daemon_e2e_mod \
started"
  expect_eq "$(json_get summary.json '[r["warm"] for r in d["ranks"]]')" "[False, False]"
  local left
  left=$(pgrep -f "sleep 98[89]")
  [[ -z $left ]] || fail "left after the run: $(pgrep -af "sleep 98[89]")"
  [[ -z $left ]] || kill -KILL $left
}

test_a_thread_pool_started_at_import_is_capped_and_given_back() {
  # A stand-in for torch 2.x, which starts OpenMP's pool at import, one thread
  # per CPU, where OMP_NUM_THREADS is unset (one rank per node): a process
  # with threads cannot be forked. The warm interpreter imports it with one
  # OpenMP thread, a fresh interpreter beside it says the thread count torch
  # picks without the cap, and each forked rank gets that count back.
  mkdir -p pool/torch
  cat >pool/torch/__init__.py <<'PY'
import os, threading, time
_threads = int(os.environ.get("OMP_NUM_THREADS") or 7)
if _threads > 1:  # the pool: idle threads, as OpenMP's after its first parallel region
    for _ in range(_threads - 1):
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
def get_num_threads():
    return _threads
def set_num_threads(n):
    global _threads
    _threads = n
PY
  printf 'import os, torch\nprint("threads", torch.get_num_threads(), "omp", os.environ.get("OMP_NUM_THREADS"))\n' >count.py
  local mode
  for mode in --no-preload "--preload torch"; do
    # shellcheck disable=SC2086 # two words for the warm launch
    AIR_BOUND=60 PYTHONPATH=$TESTDIR/pool run_air --accelerator-type CPU -n 1 --python "$TORCH_PYTHON" $mode \
      --summary summary.json count.py
    expect_rc 0
    expect_eq "$out" "threads 7 omp None" # as fresh: the pool's size, no OMP_NUM_THREADS
    expect_not_contains "$err" "started"
  done
  expect_eq "$(json_get summary.json '[r["warm"] for r in d["ranks"]]')" "[True]"
  # The rank's own OMP_NUM_THREADS is what it gets, as torch reads it.
  AIR_BOUND=60 PYTHONPATH=$TESTDIR/pool OMP_NUM_THREADS=3 run_air --accelerator-type CPU -n 1 \
    --python "$TORCH_PYTHON" --preload torch count.py
  expect_rc 0
  expect_eq "$out" "threads 3 omp 3"
}

test_an_interpreter_that_dies_mid_fork_fails_the_rank_once() {
  printf 'import os, time\nopen("pids.%%s" %% os.environ["RANK"], "a").write("%%d\\n" %% os.getpid())\ntime.sleep(60)\n' \
    >pidrank.py
  AIR_RUN_WARM_TEST_DIE_AFTER_FORK=1 AIR_BOUND=60 run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --preload json \
    --timeout 30s pidrank.py
  expect_rc 125
  # Rank 1, or rank 0 when its answer had not gone out yet: every unanswered rank is in doubt.
  expect_contains "$err" ": the warm interpreter ended or stuck while forking it (not started again"
  # One rank, one process: the forked copy ran (or was ended first), none started fresh.
  # (The copy may be ended before it wrote its line: at most one line, never two.)
  [[ ! -e pids.1 ]] || (($(wc -l <pids.1) <= 1)) || fail "rank 1 ran as $(wc -l <pids.1) processes"
  local pid
  for pid in $(cat pids.* 2>/dev/null); do
    wait_for "! pid_alive $pid" 5 || fail "rank pid $pid outlived air-run"
  done
}

run_tests
