#!/usr/bin/env bash
# Hangs, stragglers, step counting and preemption with real PyTorch ranks
# (gloo on CPU), through the built air-run. Uses Debian's /usr/bin/python3,
# the interpreter that has torch on this machine ($TORCH_PYTHON).
source "$(dirname "$0")/lib.sh"

if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch"
  exit 0
fi

# Rank 1 (or $STUCK_RANK) stops in stuck_here() before the all_reduce the others enter.
write_stuck() {
  cat >stuck.py <<'PY'
import os, threading, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()


def stuck_here():  # STUCK_HOW=lock: a callback blocked for ever on a lock
    threading.Event().wait() if os.environ.get("STUCK_HOW") == "lock" else time.sleep(3600)


t = torch.ones(1)
for step in range(3):
    dist.all_reduce(t)
print("rank %d entered the loop" % rank, flush=True)
if rank == int(os.environ.get("STUCK_RANK", "1")):
    stuck_here()
dist.all_reduce(t)
print("rank %d done" % rank, flush=True)
PY
}

test_hang_stop_names_the_laggard_and_exits_124() {
  write_stuck
  local start=$SECONDS
  run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --hang-timeout 4s --on-hang stop --grace-period 5s \
    --summary summary.json stuck.py
  expect_rc 124
  ((SECONDS - start < 60)) || fail "took $((SECONDS - start))s"
  expect_contains "$err" "rank 1 is in stuck_here at stuck.py:7"
  expect_contains "$err" "ranks 0 and 2 wait in all_reduce #4 at <module> at stuck.py:16"
  expect_named_in_time 4
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["hang"]["laggards"]')" "hung [1]"
  expect_eq "$(json_get summary.json 'd["outcome"]["hang"]["ranks"][1]["place"]')" "stuck_here at stuck.py:7"
  expect_eq "$(json_get summary.json 'd["outcome"]["hang"]["ranks"][0]["collective"]')" "all_reduce"
}

# expect_named_in_time TIMEOUT_S: the diagnosis in $err came at most 5 s after
# the hang timeout ("no progress for 4.9s").
expect_named_in_time() {
  local quiet
  quiet=$(echo "$err" | sed -nE 's/.*no progress for ([0-9.]+)(m?s).*/\1 \2/p' | head -1)
  [[ -n $quiet ]] || fail "no diagnosis with its quiet time in: $(echo "$err" | tail -3)"
  echo "  named after $quiet (hang timeout ${1}s)"
  awk -v q="${quiet% *}" -v u="${quiet#* }" -v t="$1" 'BEGIN { if (u == "ms") q /= 1000; exit !(q <= t + 5) }' ||
    fail "named after $quiet, more than ${1}s + 5 s"
}

test_a_callback_blocked_on_a_lock_is_a_hang() {
  write_stuck
  STUCK_HOW=lock run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --hang-timeout 3s --on-hang stop --grace-period 2s \
    stuck.py
  expect_rc 124
  expect_contains "$err" "rank 1 is in stuck_here at stuck.py:7"
  expect_contains "$err" "rank 0 waits in all_reduce #4"
  expect_named_in_time 3
}

test_a_gloo_deadlock_is_a_hang() {
  # Both ranks receive from the other, neither sends: each waits for ever.
  cat >deadlock.py <<'PY'
import torch, torch.distributed as dist
dist.init_process_group("gloo")
print("ready", flush=True)
dist.recv(torch.zeros(1), src=1 - dist.get_rank())
PY
  run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --hang-timeout 3s --on-hang stop --grace-period 2s deadlock.py
  expect_rc 124
  expect_contains "$err" "rank 0 waits in recv #1 at <module> at deadlock.py:4"
  expect_named_in_time 3
}

test_hang_across_nodes_is_named_by_node_0_and_stops_every_node() {
  # Two local agents of two ranks each; global rank 3, on node 1, is stuck:
  # node 0's ranks only wait, so only the job's picture can name it.
  write_stuck
  PORT=$(free_port_pair)
  [[ -n $PORT ]] || fail "no free port pair"
  export STUCK_RANK=3
  local start=$SECONDS node
  for node in 0 1; do
    start_node "$node" --cpu-ranks 2 --python "$TORCH_PYTHON" --hang-timeout 4s --on-hang stop \
      --grace-period 5s --summary "summary$node.json" stuck.py
  done
  wait
  ((SECONDS - start < 90)) || fail "took $((SECONDS - start))s"
  expect_eq "$(cat node0.rc) $(cat node1.rc)" "124 124"
  local err0 err1
  err0=$(cat node0.err) err1=$(cat node1.err)
  expect_contains "$err0" "the job, across the nodes: no progress for"
  expect_contains "$err0" "rank 3 (node 1) is in stuck_here at stuck.py:7; ranks 0, 1 and 2 wait in all_reduce #4 at <module> at stuck.py:16"
  expect_contains "$err0" "the others wait for rank 3; stopping the run (--on-hang stop)"
  err=$err0 expect_named_in_time 4
  expect_eq "$(json_get summary0.json 'd["outcome"]["status"], d["outcome"]["hang"]["laggards"]')" "hung [3]"
  expect_eq "$(json_get summary0.json '[(r["rank"], r["node"]) for r in d["outcome"]["hang"]["ranks"]]')" \
    "[(0, 0), (1, 0), (2, 1), (3, 1)]"
  expect_eq "$(json_get summary0.json 'd["outcome"]["hang"]["ranks"][3]["place"]')" "stuck_here at stuck.py:7"
  expect_contains "$(json_get summary0.json 'd["outcome"]["hang"]["diagnosis"]')" "stuck_here"
  # Node 1 keeps its own ranks' picture, and ends as hung on node 0's word.
  expect_contains "$err1" "found the job hung"
  expect_eq "$(json_get summary1.json 'd["outcome"]["status"], [r["rank"] for r in d["outcome"]["hang"]["ranks"]]')" \
    "hung [2, 3]"
  expect_eq "$(json_get summary1.json 'd["outcome"]["remote_failure"]["node_rank"]')" "0"
}

test_hang_report_goes_on_and_reports_in_junit() {
  write_stuck
  env --default-signal=INT "$AIR_RUN" --cpu-ranks 3 --python "$TORCH_PYTHON" --hang-timeout 3s \
    --summary summary.json --junit junit.xml stuck.py >stdout 2>stderr &
  air=$!
  wait_for "grep -q 'the run goes on' stderr" 90 || fail "no diagnosis while running: $(tail -5 stderr)"
  pid_alive "$air" || fail "air-run ended after a diagnosis in report mode"
  expect_contains "$(cat stderr)" "the others wait for rank 1"
  kill -INT "$air"
  finish_air 60
  expect_rc 130
  expect_eq "$(json_get summary.json 'd["outcome"]["hang"]["laggards"]')" "[1]"
  expect_contains "$(cat junit.xml)" 'name="hang" value="rank 1 is in stuck_here'
}

test_steady_steps_are_no_hang() {
  cat >steady.py <<'PY'
import time, torch
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    optimizer.zero_grad()
    model(torch.ones(2)).sum().backward()
    optimizer.step()
    time.sleep(1.5)
PY
  run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --hang-timeout 3s --on-hang stop --summary summary.json steady.py
  expect_rc 0
  expect_not_contains "$err" "no progress"
  expect_eq "$(json_get summary.json 'd["outcome"]["hang"], [r["steps"] for r in d["ranks"]]')" "None [5, 5]"
}

test_optimizer_steps_are_counted_once_each() {
  # 25 steps of an optimizer subclass that calls super().step(), plus a
  # second optimizer stepping alongside: still 25 steps per rank.
  cat >count.py <<'PY'
import torch
import air


class MySGD(torch.optim.SGD):
    def step(self, closure=None):
        return super().step(closure)


a, b = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
opt_a = MySGD(a.parameters(), lr=0.1)
opt_b = torch.optim.Adam(b.parameters())
for _ in range(25):
    (a(torch.ones(2)).sum() + b(torch.ones(2)).sum()).backward()
    opt_a.step()
    opt_b.step()
print("counted", air.steps())
PY
  PYTHONPATH=$AIR_SOURCE_DIR/python run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --summary summary.json count.py
  expect_rc 0
  expect_contains "$out" "[rank2]: counted 25"
  expect_eq "$(json_get summary.json '[r["steps"] for r in d["ranks"]]')" "[25, 25, 25]"
}

# Ranks sleep BASE ms a step, rank 1 EXTRA ms more, then all_reduce: 40 steps.
write_paced() {
  cat >paced.py <<'PY'
import sys, time, torch, torch.distributed as dist
import air
dist.init_process_group("gloo")
extra = float(sys.argv[1]) if dist.get_rank() == 1 else 0.0
t = torch.ones(1)
for step in range(40):
    time.sleep((20 + extra) / 1000)
    dist.all_reduce(t)
    air.step()
PY
}

test_a_slow_rank_is_the_only_straggler() {
  write_paced
  PYTHONPATH=$AIR_SOURCE_DIR/python run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --summary summary.json \
    paced.py 80
  expect_rc 0
  expect_eq "$(json_get summary.json '[s["rank"] for s in d["stragglers"]]')" "[1]"
  expect_eq "$(json_get summary.json '60 < d["stragglers"][0]["slower_ms_per_step"] < 200')" "True"
  expect_contains "$err" "rank 1 is a straggler"
}

test_even_ranks_have_no_straggler() {
  write_paced
  PYTHONPATH=$AIR_SOURCE_DIR/python run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --summary summary.json \
    paced.py 0
  expect_rc 0
  expect_eq "$(json_get summary.json 'd["stragglers"], [r["steps"] for r in d["ranks"]]')" "[] [40, 40, 40]"
  expect_not_contains "$err" "straggler"
}

# DDP over gloo: ranks sleep 20 ms a step, rank 1 EXTRA ms more, before a
# forward and backward of a DistributedDataParallel model: 40 steps. DDP's
# all-reduce runs in PyTorch's C++ reducer, never through torch.distributed's
# Python functions; with STUCK set, rank 1 stops in load_batch at step 3.
write_ddp_paced() {
  cat >ddp_paced.py <<'PY'
import os, sys, time, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
extra = float(sys.argv[1]) if rank == 1 else 0.0
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)


def load_batch(step):
    if step == 3 and rank == 1 and os.environ.get("STUCK"):
        time.sleep(3600)
    time.sleep((20 + extra) / 1000)
    return torch.randn(32, 64)


for step in range(40):
    x = load_batch(step)
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
PY
}

test_a_slow_ddp_rank_is_the_only_straggler() {
  write_ddp_paced
  run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --summary summary.json ddp_paced.py 80
  expect_rc 0
  expect_eq "$(json_get summary.json '[s["rank"] for s in d["stragglers"]]')" "[1]"
  expect_eq "$(json_get summary.json '60 < d["stragglers"][0]["slower_ms_per_step"] < 200')" "True"
  expect_contains "$err" "rank 1 is a straggler"
}

test_even_ddp_ranks_have_no_straggler() {
  write_ddp_paced
  run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --summary summary.json ddp_paced.py 0
  expect_rc 0
  expect_eq "$(json_get summary.json 'd["stragglers"], [r["steps"] for r in d["ranks"]]')" "[] [40, 40, 40]"
}

test_ddp_hang_names_the_rank_that_never_reached_backward() {
  write_ddp_paced
  STUCK=1 run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --hang-timeout 4s --on-hang stop --grace-period 5s \
    --summary summary.json ddp_paced.py 0
  expect_rc 124
  expect_contains "$err" "rank 1 is in load_batch at ddp_paced.py:13"
  expect_contains "$err" "ranks 0 and 2 wait in ddp_all_reduce #4 at <module> at ddp_paced.py:21"
  expect_named_in_time 4
  expect_eq "$(json_get summary.json 'd["outcome"]["hang"]["laggards"], d["outcome"]["hang"]["ranks"][2]["collective"]')" \
    "[1] ddp_all_reduce"
}

# The old `if rank == 0: torch.save(...)` habit with air.data.save, which is
# collective: rank 0 waits in its broadcast_object_list, ranks 1 and 2 in the
# barrier after it. The diagnosis names the mismatch, and places rank 0 at the
# user's line that called save, not inside air.data.
test_save_on_rank_0_only_is_named_as_mismatched_collectives() {
  # Distributed Checkpoint is imported before the collectives (air.data.save
  # would import it on first use): on a loaded machine that import alone can
  # outlast the hang timeout, and rank 0 is then rightly named for it. The
  # ranks print nothing, so until their first collective the start-up
  # allowance applies: 15 s covers the imports without waiting out the
  # default minute.
  cat >save_one.py <<'PY'
import torch, torch.distributed as dist
import air.data, air.data._dcp; air.data._dcp.import_dcp()
dist.init_process_group("gloo")
model = torch.nn.Linear(2, 2)


def save_model():
    air.data.save({"model": model.state_dict()})


dist.all_reduce(torch.ones(1))
if dist.get_rank() == 0:
    save_model()
dist.barrier()
PY
  PYTHONPATH=$AIR_SOURCE_DIR/python run_air --cpu-ranks 3 --python "$TORCH_PYTHON" --hang-timeout 4s \
    --hang-startup 15s --on-hang stop --grace-period 5s --checkpoint-dir ckpt --summary summary.json save_one.py
  expect_rc 124
  expect_contains "$err" "ranks wait in different collectives: rank 0 in broadcast_object_list #2 at save_model at save_one.py:8"
  expect_contains "$err" "ranks 1 and 2 in barrier #2 at <module> at save_one.py:14"
  expect_named_in_time 4
  expect_eq "$(json_get summary.json 'd["outcome"]["hang"]["laggards"], d["outcome"]["hang"]["ranks"][0]["place"]')" \
    "[] save_model at save_one.py:8"
}

# Three ranks at different speeds, each asking air.should_stop() every step;
# each writes the step it stopped at.
write_preemptible() {
  cat >preempt.py <<'PY'
import os, sys, time
import air
rank = int(os.environ["RANK"])
step = 0
print("rank %d started" % rank, flush=True)
while True:
    time.sleep(0.02 * (rank + 1))
    step += 1
    air.step()
    if air.should_stop():
        left = air.stop_deadline()
        with open("stopped%d" % rank, "w") as f:
            f.write("%d %d" % (step, left is not None and 0 < left <= 30))
        sys.exit(0)
PY
}

test_sigterm_stops_every_rank_at_one_step() {
  write_preemptible
  PYTHONPATH=$AIR_SOURCE_DIR/python "$AIR_RUN" --cpu-ranks 3 --python "$TORCH_PYTHON" --summary summary.json \
    preempt.py >stdout 2>stderr &
  air=$!
  wait_for "[[ \$(grep -c started stdout) -ge 3 ]]" 60 || fail "ranks did not start"
  sleep 1.5
  kill -TERM "$air"
  finish_air 60
  expect_rc 143
  local s0 s1 s2
  s0=$(cat stopped0) s1=$(cat stopped1) s2=$(cat stopped2)
  [[ $s0 == "$s1" && $s1 == "$s2" ]] || fail "ranks stopped at different steps: $s0 / $s1 / $s2"
  expect_eq "${s0#* }" "1" # a deadline within the grace period
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["preemption"]["stop_step"] == int(open("stopped0").read().split()[0])')" "preempted True"
  expect_eq "$(json_get summary.json 'd["outcome"]["preemption"]["asked_ranks"]')" "[0, 1, 2]"
}

test_ranks_that_never_ask_get_sigterm_at_once() {
  cat >plain.py <<'PY'
import signal, sys, time
def bye(*_):
    print("got SIGTERM", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print("started", flush=True)
time.sleep(600)
PY
  "$AIR_RUN" --cpu-ranks 2 --python "$TORCH_PYTHON" --summary summary.json plain.py >stdout 2>stderr &
  air=$!
  wait_for "[[ \$(grep -c started stdout) -ge 2 ]]" 60 || fail "ranks did not start"
  kill -TERM "$air"
  finish_air 20
  expect_rc 143
  expect_eq "$(grep -c 'got SIGTERM' stdout)" "2"
  expect_eq "$(json_get summary.json 'd["outcome"]["status"]')" "interrupted"
}

# descendants PID...: every process below each PID (children by pgrep -P, recursively).
descendants() {
  local pid child
  for pid in "$@"; do
    for child in $(pgrep -P "$pid"); do
      echo "$child"
      descendants "$child"
    done
  done
}

# Two nodes of two ranks each (global ranks 0..3), stepping at different
# speeds (node 0's faster: 50 and 33 steps a second, node 1's 25 and 20), each
# rank writing the step it stopped at to stoppedRANK.
write_node_preemptible() {
  cat >preempt_nodes.py <<'PY'
import os, sys, time
import air
rank = int(os.environ["RANK"])
step = 0
while True:
    time.sleep(0.02 + 0.01 * rank)
    step += 1
    air.step()
    if step == 10:
        print("rank %d at step 10" % rank, flush=True)
    if air.should_stop():
        with open("stopped%d" % rank, "w") as f:
            f.write("%d" % step)
        sys.exit(0)
PY
}

# start_pid_node RANK ARGS...: as start_node (lib.sh), and node$RANK.pid is
# air-run's own pid, so that one agent alone can be signalled.
start_pid_node() {
  local rank=$1
  shift
  (sh -c 'echo $$ >"$0.pid"; exec "$@"' "node$rank" "$AIR_RUN" --nnodes 2 --node-rank "$rank" \
    --master-addr 127.0.0.1 --master-port "$PORT" "$@" >"node$rank.out" 2>"node$rank.err"
  echo $? >"node$rank.rc") 2>/dev/null &
}

# start_preemptible_nodes: starts two agents on preempt_nodes.py and waits
# until every rank made 10 steps.
start_preemptible_nodes() {
  write_node_preemptible
  PORT=$(free_port_pair)
  [[ -n $PORT ]] || fail "no free port pair" || return
  export PYTHONPATH=$AIR_SOURCE_DIR/python
  local node
  for node in 0 1; do
    start_pid_node "$node" --cpu-ranks 2 --python "$TORCH_PYTHON" --grace-period 60s \
      --summary "summary$node.json" preempt_nodes.py
  done
  if ! wait_for "[[ \$(cat node0.out node1.out 2>/dev/null | grep -c 'at step 10') -ge 4 ]]" 90; then
    kill -KILL "$(cat node0.pid)" "$(cat node1.pid)" 2>/dev/null
    fail "the ranks did not make 10 steps" || return
  fi
}

# wait_for_nodes: both agents ended (within 90 s), else both are killed.
wait_for_nodes() {
  if ! wait_for "[[ -s node0.rc && -s node1.rc ]]" 90; then
    kill -KILL "$(cat node0.pid)" "$(cat node1.pid)" 2>/dev/null
    fail "the agents did not end within 90 s of the signal" || return
  fi
}

# preempt_two_nodes NODE...: starts the two agents, sends SIGTERM to the
# agents of the nodes named, and waits for both agents to end.
preempt_two_nodes() {
  start_preemptible_nodes || return
  local node pids=()
  for node in "$@"; do pids+=("$(cat "node$node.pid")"); done
  kill -TERM "${pids[@]}"
  wait_for_nodes
}

# expect_one_stop_step: every rank of both nodes stopped at one step, both
# agents exited 143, and both summaries carry that step as the job's.
expect_one_stop_step() {
  expect_eq "$(cat node0.rc) $(cat node1.rc)" "143 143"
  local s0 s1 s2 s3
  s0=$(cat stopped0) s1=$(cat stopped1) s2=$(cat stopped2) s3=$(cat stopped3)
  [[ $s0 == "$s1" && $s1 == "$s2" && $s2 == "$s3" ]] ||
    fail "ranks stopped at different steps: $s0 / $s1 / $s2 / $s3"
  local node
  for node in 0 1; do
    expect_eq "$(json_get "summary$node.json" 'd["outcome"]["status"], d["outcome"]["preemption"]["stop_step"], d["outcome"]["preemption"]["decided_by"]')" \
      "preempted $s0 job"
  done
}

test_sigterm_to_one_node_stops_every_node_at_one_step() {
  preempt_two_nodes 1 || return
  expect_one_stop_step
  # Each node's lines name the node that prints them.
  expect_contains "$(cat node1.err)" "air-run (node 1): SIGTERM: agreeing on one stop step with the other nodes"
  expect_contains "$(cat node0.err)" "air-run (node 0): SIGTERM on node 1: asking ranks 0 and 1 to stop at step $(cat stopped0)"
  expect_eq "$(json_get summary0.json 'd["outcome"]["preemption"]["signal_node"], d["outcome"]["preemption"]["asked_ranks"]')" \
    "1 [0, 1]"
  expect_eq "$(json_get summary1.json 'd["outcome"]["preemption"]["asked_ranks"]')" "[2, 3]"
}

test_sigterm_to_both_nodes_at_once_stops_them_at_one_step() {
  preempt_two_nodes 0 1 || return
  expect_one_stop_step
  # The node whose signal node 0 heard first, the same on both nodes.
  local first
  first=$(json_get summary0.json 'd["outcome"]["preemption"]["signal_node"]')
  [[ $first == 0 || $first == 1 ]] || fail "signal_node $first"
  expect_eq "$(json_get summary1.json 'd["outcome"]["preemption"]["signal_node"]')" "$first"
}

test_sigterm_to_every_process_of_both_nodes_stops_them_at_one_step() {
  # Slurm's scancel of a two-node step: every agent and every rank at once.
  start_preemptible_nodes || return
  local agents=("$(cat node0.pid)" "$(cat node1.pid)")
  # shellcheck disable=SC2046 # one word per pid
  kill -TERM "${agents[@]}" $(descendants "${agents[@]}")
  wait_for_nodes || return
  expect_one_stop_step
  local node
  for node in 0 1; do
    expect_eq "$(json_get "summary$node.json" 'd["outcome"]["preemption"]["asked_ranks"] == d["outcome"]["preemption"]["stopped_ranks"]')" "True"
  done
}

test_a_silent_node_0_leaves_node_1_to_its_own_step_after_2s() {
  start_preemptible_nodes || return
  # Node 0's agent stopped (its ranks run on): node 1 hears nothing back.
  kill -STOP "$(cat node0.pid)"
  kill -TERM "$(cat node1.pid)"
  wait_for "grep -q 'node 0 did not pick a stop step within 2s' node1.err" 30
  local said=$?
  kill -CONT "$(cat node0.pid)"
  ((said == 0)) || fail "node 1 did not fall back to its own step" || return
  wait_for_nodes || return
  expect_eq "$(cat node1.rc)" "143"
  expect_eq "$(cat stopped2)" "$(cat stopped3)"
  expect_eq "$(json_get summary1.json 'd["outcome"]["status"], d["outcome"]["preemption"]["decided_by"], d["outcome"]["preemption"]["fallback"], d["outcome"]["preemption"]["stop_step"] == int(open("stopped2").read())')" \
    "preempted node True True"
  [[ $(cat node0.rc) != 0 ]] || fail "node 0 exited 0 after node 1 was preempted"
}

# Two gloo ranks of a DDP model, each asking air.should_stop() every step and
# saving a checkpoint with air.data.save when it says so; each writes its pid
# (pidRANK) and the step it stopped at (stoppedRANK).
write_ddp_preemptible() {
  cat >preempt_ddp.py <<'PY'
import os, sys, time
import torch, torch.distributed as dist
import air, air.data
dist.init_process_group("gloo")
rank = dist.get_rank()
with open("pid%d" % rank, "w") as f:
    f.write(str(os.getpid()))
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.ones(100000, 8))
workers = int(os.environ.get("AIR_TEST_WORKERS", "0"))  # DataLoader worker processes
batches = iter(torch.utils.data.DataLoader(data, batch_size=4, num_workers=workers))
while True:
    optimizer.zero_grad()
    model(next(batches)[0]).sum().backward()  # DDP's all-reduce
    optimizer.step()                          # counted: air.steps()
    time.sleep(0.05)
    if air.steps() == 10:
        print("rank %d at step 10" % rank, flush=True)
    if air.should_stop():
        air.data.save({"weight": model.module.weight.detach(), "step": air.steps()})
        with open("stopped%d" % rank, "w") as f:
            f.write(str(air.steps()))
        sys.exit(0)
PY
}

# start_ddp_preemptible ARGS...: air-run on preempt_ddp.py in the background
# ($air), once both ranks made 10 steps.
start_ddp_preemptible() {
  write_ddp_preemptible
  PYTHONPATH=$AIR_SOURCE_DIR/python "$AIR_RUN" --cpu-ranks 2 --python "$TORCH_PYTHON" --checkpoint-dir ckpt \
    --summary summary.json "$@" preempt_ddp.py >stdout 2>stderr &
  air=$!
  if ! wait_for "[[ \$(grep -c 'at step 10' stdout) -ge 2 ]]" 90; then
    kill -KILL "$air"
    fail "the ranks did not make 10 steps" || return
  fi
}

test_sigterm_to_every_process_stops_the_ranks_at_one_step() {
  # As Slurm's scancel, time limit or preemption do: one SIGTERM to every
  # process of the step at once, air-run and the ranks alike.
  start_ddp_preemptible --grace-period 60s || return
  # shellcheck disable=SC2046 # one word per pid
  kill -TERM "$air" $(descendants "$air")
  finish_air 90
  expect_rc 143
  [[ -s stopped0 && -s stopped1 ]] || fail "a rank did not stop: $(cat stderr)" || return
  local s0 s1
  s0=$(cat stopped0) s1=$(cat stopped1)
  expect_eq "$s0" "$s1"
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["preemption"]["stop_step"], d["outcome"]["preemption"]["asked_ranks"], d["outcome"]["preemption"]["stopped_ranks"]')" \
    "preempted $s0 [0, 1] [0, 1]"
  expect_eq "$(json_get summary.json '[(r["exit"]["code"], r["stopped_by_air_run"]) for r in d["ranks"]]')" \
    "[(0, True), (0, True)]"
  expect_eq "$(json_get summary.json 'd["outcome"]["preemption"]["checkpoint"]')" "$PWD/ckpt/checkpoint-000001"
  [[ -d ckpt/checkpoint-000001 ]] || fail "no checkpoint"
  expect_contains "$(cat stderr)" "asking ranks 0 and 1 to stop at step $s0"
  expect_contains "$(cat stderr)" "  stopped at step $s0: ranks 0-1"
  expect_not_contains "$(cat stderr)" "did not stop"
}

test_sigterm_to_every_process_with_dataloader_workers() {
  # Slurm signals the ranks' DataLoader workers too: they defer as their rank
  # does, so the rank's next batch still comes and it reaches the stop step.
  AIR_TEST_WORKERS=2 start_ddp_preemptible --grace-period 60s || return
  # shellcheck disable=SC2046 # one word per pid
  kill -TERM "$air" $(descendants "$air")
  finish_air 90
  expect_rc 143
  [[ -s stopped0 && -s stopped1 ]] || fail "a rank did not stop: $(tail -5 stderr)" || return
  expect_eq "$(cat stopped0)" "$(cat stopped1)"
  expect_eq "$(json_get summary.json '[r["exit"]["code"] for r in d["ranks"]], d["outcome"]["preemption"]["stopped_ranks"]')" \
    "[0, 0] [0, 1]"
  [[ -d ckpt/checkpoint-000001 ]] || fail "no checkpoint"
}

test_slurm_s_sigterm_sigcont_sigterm_is_one_stop_request() {
  # What slurmd sends every process of the step on a time limit and on a
  # preemption: SIGTERM, SIGCONT, SIGTERM within milliseconds. Neither air-run
  # nor a rank may read the second SIGTERM as "kill now".
  start_ddp_preemptible --grace-period 60s || return
  local pids
  pids="$air $(descendants "$air")"
  # shellcheck disable=SC2086 # one word per pid
  { kill -TERM $pids; kill -CONT $pids; kill -TERM $pids; }
  finish_air 90
  expect_rc 143
  [[ -s stopped0 && -s stopped1 ]] || fail "a rank did not stop: $(tail -5 stderr)" || return
  expect_eq "$(cat stopped0)" "$(cat stopped1)"
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["preemption"]["stopped_ranks"], [r["exit"]["code"] for r in d["ranks"]]')" \
    "preempted [0, 1] [0, 0]"
  [[ -d ckpt/checkpoint-000001 ]] || fail "no checkpoint"
  expect_not_contains "$(cat stderr)" "second interrupt"
}

test_a_second_sigterm_after_the_burst_still_kills_now() {
  # Ranks whose save takes a minute: a second SIGTERM, later than the first
  # one's burst, kills them at once ("now"); one inside it (above) does not.
  cat >slow_save.py <<'PY'
import sys, time
import air
while True:
    time.sleep(0.02)
    air.step()
    if air.steps() == 10:
        print("at step 10", flush=True)
    if air.should_stop():
        print("saving", flush=True)
        time.sleep(60)
        sys.exit(0)
PY
  PYTHONPATH=$AIR_SOURCE_DIR/python "$AIR_RUN" --cpu-ranks 2 --python "$TORCH_PYTHON" --grace-period 90s \
    --summary summary.json slow_save.py >stdout 2>stderr &
  air=$!
  wait_for "[[ \$(grep -c 'at step 10' stdout) -ge 2 ]]" 60 || fail "the ranks did not start" || return
  kill -TERM "$air"
  kill -TERM "$air" # within the burst: the same request
  wait_for "[[ \$(grep -c saving stdout) -ge 2 ]]" 30 || fail "the ranks were not asked to stop" || return
  sleep 1.5 # past the first signal's burst
  local start=$SECONDS
  kill -TERM "$air"
  finish_air 60
  ((SECONDS - start < 20)) || fail "the second SIGTERM took $((SECONDS - start))s"
  expect_rc 143
  expect_eq "$(json_get summary.json '[r["exit"]["signal_name"] for r in d["ranks"]]')" "['SIGKILL', 'SIGKILL']"
  expect_contains "$(cat stderr)" "killed (SIGKILL) at the second interrupt: ranks 0-1"
}

test_usr1_to_every_process_stops_the_ranks_at_one_step() {
  # srun forwards Slurm's --signal=B:USR1@N to every process of the step: the
  # polling ranks defer it (its default would kill them) and stop at one step.
  start_ddp_preemptible --grace-period 60s || return
  # shellcheck disable=SC2046 # one word per pid
  kill -USR1 "$air" $(descendants "$air")
  finish_air 90
  expect_rc 138
  [[ -s stopped0 && -s stopped1 ]] || fail "a rank did not stop: $(tail -5 stderr)" || return
  expect_eq "$(cat stopped0)" "$(cat stopped1)"
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["preemption"]["signal"], d["outcome"]["preemption"]["stopped_ranks"]')" \
    "preempted SIGUSR1 [0, 1]"
  [[ -d ckpt/checkpoint-000001 ]] || fail "no checkpoint"
}

test_air_run_s_teardown_ends_a_rank_blocked_in_a_collective() {
  # Rank 1 waits in a gloo all_reduce that rank 0 never joins; both poll
  # should_stop(). air-run's own SIGTERM (--timeout) must end rank 1 at once,
  # not at the grace period's SIGKILL 60 s later: no Python handler runs there.
  cat >blocked.py <<'PY'
import time
import torch, torch.distributed as dist
import air
dist.init_process_group("gloo")
for _ in range(3):
    air.step()
    air.should_stop()
print("rank %d polls" % dist.get_rank(), flush=True)
if dist.get_rank() == 1:
    dist.all_reduce(torch.ones(1))
while True:
    time.sleep(0.1)
PY
  PYTHONPATH=$AIR_SOURCE_DIR/python "$AIR_RUN" --cpu-ranks 2 --python "$TORCH_PYTHON" --timeout 20s \
    --grace-period 60s --summary summary.json blocked.py >stdout 2>stderr &
  air=$!
  finish_air 120
  expect_rc 124
  expect_eq "$(grep -c polls stdout)" "2"
  expect_eq "$(json_get summary.json '[r["exit"]["signal_name"] for r in d["ranks"]], d["duration_s"] < 50')" \
    "['SIGTERM', 'SIGTERM'] True"
}

test_sigterm_to_a_polling_rank_alone_still_ends_it() {
  # air-run never hears of it, so no stop step comes: the rank dies of it
  # once its shim gave up waiting for one (5 s), and the run fails on it.
  start_ddp_preemptible --grace-period 60s || return
  local start=$SECONDS
  kill -TERM "$(cat pid1)"
  finish_air 60
  ((SECONDS - start >= 4 && SECONDS - start < 30)) || fail "rank 1 ended $((SECONDS - start))s after SIGTERM"
  expect_rc 143
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["root_cause_rank"], d["ranks"][1]["exit"]["signal_name"]')" \
    "failed 1 SIGTERM"
  expect_contains "$(cat stderr)" "rank 1 was killed by signal 15 (SIGTERM)"
  [[ ! -e stopped1 ]] || fail "rank 1 stopped as if asked"
}

test_a_rank_with_its_own_sigterm_handler_keeps_it() {
  # The shim defers SIGTERM only where the program left its default: this
  # one's handler still runs at once when the signal reaches every process.
  cat >own_handler.py <<'PY'
import os, signal, sys, time
import air
def bye(*_):
    print("rank handler at step %d" % air.steps(), flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, bye)
while True:
    time.sleep(0.02)
    air.step()
    if air.steps() == 10:
        print("at step 10", flush=True)
    if air.should_stop():
        sys.exit(0)
PY
  PYTHONPATH=$AIR_SOURCE_DIR/python "$AIR_RUN" --cpu-ranks 1 --python "$TORCH_PYTHON" --summary summary.json \
    own_handler.py >stdout 2>stderr &
  air=$!
  wait_for "grep -q 'at step 10' stdout" 60 || fail "the rank did not make 10 steps" || return
  # shellcheck disable=SC2046 # one word per pid
  kill -TERM "$air" $(descendants "$air")
  finish_air 60
  expect_rc 143
  expect_contains "$(cat stdout)" "rank handler at step"
  # No rank stopped at the step: nothing was saved there, so no preemption.
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["preemption"]["stopped_ranks"], d["ranks"][0]["exit"]["code"]')" \
    "interrupted [] 7"
  expect_contains "$(json_get summary.json 'd["outcome"]["reason"]')" "but no rank stopped at step"
  expect_contains "$(cat stderr)" "rank 0 did not stop at step"
}

run_tests
