#!/usr/bin/env bash
# Long healthy phases across 2 nodes are no hang: two agents on this host,
# two real gloo ranks each (Debian's /usr/bin/python3, $TORCH_PYTHON, which
# has torch). A rank of one node works alone in silence (a checkpoint save)
# or draws a progress bar while the other node's ranks wait for it at a
# barrier, or one node's ranks all finished while the other's go on alone:
# the waiting node goes quiet, but node 0 judges the job from every node's
# readings (docs/hangs.md, "Several nodes"), so the job runs to exit 0 with
# no restart, under the defaults of a job with restarts (--max-restarts 1:
# 5m hang timeout, --on-hang stop) and under a short --hang-timeout.
source "$(dirname "$0")/lib.sh"

if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch"
  exit 0
fi

# The short hang timeout and how long each phase lasts: more than twice it.
SHORT=2s
PHASE=7

# bounded_node RANK ARGS...: start_node (lib.sh), ended after 150 s at most
# (its ranks could otherwise wait for ever).
bounded_node() {
  local rank=$1
  shift
  (timeout -k 10 150 "$AIR_RUN" --nnodes 2 --node-rank "$rank" --master-addr 127.0.0.1 --master-port "$PORT" \
    "$@" >"node$rank.out" 2>"node$rank.err"
  echo $? >"node$rank.rc") 2>/dev/null &
}

# run_nodes HOW SCRIPT: both nodes under HOW (defaults, short), each to exit 0
# with no restart and no hang in its summary. Every script prints one line
# first: a sign of life ends the start-up allowance, so the short timeout
# applies at once.
run_nodes() {
  local how=$1 script=$2 node
  local args=(--cpu-ranks 2 --python "$TORCH_PYTHON" --max-restarts 1)
  [[ $how == short ]] && args+=(--hang-timeout "$SHORT")
  local phase=1
  [[ $how == short ]] && phase=$PHASE
  PORT=$(free_port_pair)
  [[ -n $PORT ]] || fail "no free port pair"
  local start=$EPOCHREALTIME
  for node in 0 1; do
    PHASE=$phase bounded_node "$node" "${args[@]}" --summary "summary$node-$how.json" "$script"
  done
  wait
  local took
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  err0=$(cat node0.err) err1=$(cat node1.err)
  echo "  $script under $how: exits $(cat node0.rc) $(cat node1.rc)," \
    "$(json_get "summary0-$how.json" 'd["outcome"]["restarts"]') restarts, ${took} s," \
    "$(grep -c 'quiet, not hung' node0.err) quiet verdicts"
  expect_eq "$(cat node0.rc) $(cat node1.rc)" "0 0"
  for node in 0 1; do
    expect_eq "$(json_get "summary$node-$how.json" 'd["outcome"]["status"], d["outcome"]["restarts"], d["outcome"]["hang"]')" \
      "succeeded 0 None"
  done
  expect_not_contains "$err0" "the others wait for"
  expect_not_contains "$err0" "stopping the run"
  expect_contains "$(cat node0.out node1.out)" "[rank0]: done"
  if [[ $how == short ]]; then
    # The phase outlasted the timeout: the waiting node went quiet, and node 0
    # found the job quiet, not hung, from the other node's readings.
    expect_contains "$err0" "quiet, not hung; the run goes on"
  fi
}

# save.py: rank $SAVER saves checkpoints silently (CPU and disk) while the
# other three ranks, on both nodes, wait at a barrier.
write_save() {
  cat >save.py <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
print("saving", flush=True)
if dist.get_rank() == int(os.environ["SAVER"]):
    state = {"w": torch.randn(1024, 1024)}
    end = time.monotonic() + float(os.environ["PHASE"])
    while time.monotonic() < end:
        state["w"] = state["w"] * 1.0001 + 1
        torch.save(state, "ckpt%d.pt" % dist.get_rank())
dist.barrier()
print("done", flush=True)
PY
}

test_a_checkpoint_save_on_node_0_while_node_1_waits_is_no_hang() {
  # Node 1 goes quiet; node 0, asked where its ranks are, measures rank 0's work.
  write_save
  local how
  for how in defaults short; do
    SAVER=0 run_nodes "$how" save.py
  done
  expect_contains "$err0" "rank 0 (node 0) works outside any collective"
  expect_contains "$err1" "node 0 finds the job quiet, not hung"
}

test_a_checkpoint_save_on_node_1_while_node_0_waits_is_no_hang() {
  # Node 0 goes quiet; node 1 measures rank 2's work and sends it with its places.
  write_save
  SAVER=2 run_nodes short save.py
  expect_contains "$err0" "rank 2 (node 1) works outside any collective"
}

test_a_progress_bar_on_node_0_while_node_1_waits_is_no_hang() {
  # Rank 0 draws a tqdm-like bar (\r, no newline) 4 times a second, as
  # datasets.map does; the other ranks wait at a barrier meanwhile.
  cat >bar.py <<'PY'
import os, sys, time, torch.distributed as dist
dist.init_process_group("gloo")
print("mapping", flush=True)
if dist.get_rank() == 0:
    n = int(float(os.environ["PHASE"]) * 4)
    for i in range(n + 1):
        sys.stdout.write("\rMap: %d%%" % (100 * i // n))
        sys.stdout.flush()
        time.sleep(0.25)
    sys.stdout.write("\n")
dist.barrier()
print("done", flush=True)
PY
  run_nodes short bar.py
}

test_node_0_alone_after_node_1_finished_is_no_hang() {
  # Node 1's ranks are done and exit 0; both ranks of node 0 upload without a
  # word (a network wait: next to no CPU), longer than the hang timeout and
  # than node 0's 10 s wait for the places of a node that never answers.
  cat >upload.py <<'PY'
import os, time, torch.distributed as dist
dist.init_process_group("gloo")
print("training over", flush=True)
dist.barrier()
if dist.get_rank() < 2:
    time.sleep(float(os.environ["PHASE"]))
    print("done", flush=True)
PY
  PHASE=16 run_nodes short upload.py
  expect_contains "$err0" "ranks finished and no rank waits in a collective"
}

test_node_1_alone_after_node_0_finished_is_no_hang() {
  # The other way round: node 0's ranks are done and its agent only waits for
  # node 1's; node 1's ranks upload in silence. Node 0 has no ranks left to
  # diagnose, and judges node 1's quiet alone.
  cat >upload.py <<'PY'
import os, time, torch.distributed as dist
dist.init_process_group("gloo")
print("training over", flush=True)
dist.barrier()
if dist.get_rank() >= 2:
    time.sleep(float(os.environ["PHASE"]))
print("done", flush=True)
PY
  run_nodes short upload.py
  expect_contains "$err1" "node 0 finds the job quiet, not hung; the run goes on"
}

test_node_1_alone_after_node_0_s_ranks_exited_is_no_hang() {
  # Without a process group (rank 0 hosts none, so it leaves at once): node
  # 0's agent has no supervisor left and only waits for node 1, whose ranks
  # work on in silence for longer than node 1's 30 s wait for node 0's verdict.
  cat >alone.py <<'PY'
import os, time
print("started", flush=True)
if int(os.environ["RANK"]) >= 2:
    time.sleep(float(os.environ["PHASE"]))
print("done", flush=True)
PY
  PHASE=36 run_nodes short alone.py
  expect_contains "$err1" "node 0 finds the job quiet, not hung; the run goes on"
}

run_tests
