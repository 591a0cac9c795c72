#!/usr/bin/env bash
# Losing a node under c10d --nnodes MIN:MAX with --max-restarts: the agents
# that are left restart the worker group at the smaller world size, as
# torchrun's elastic agent does (docs/multinode.md). Three local agents; one
# that does not host the join is killed with its whole process group.
source "$(dirname "$0")/lib.sh"

# Each rank notes what it ran as; attempt 0 then waits to be stopped, a
# later attempt finishes at once.
write_worker() {
  cat >work.sh <<'SH'
#!/bin/sh
echo "$TORCHELASTIC_RESTART_COUNT $GROUP_RANK $RANK $WORLD_SIZE $GROUP_WORLD_SIZE" >>"seen.$AGENT"
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exec sleep 120
exit 0
SH
  chmod +x work.sh
}

summary_nodes() { # summary_nodes FILE: the node count of each attempt, "3 2"
  /usr/bin/python3 -c 'import json,sys; print(" ".join(str(len(a["nodes"])) for a in json.load(open(sys.argv[1]))["outcome"]["attempts"]))' "$1"
}

# lose_node VICTIM SURVIVOR...: three agents a, b, c (nodes 0, 1, 2), VICTIM
# killed with its process group during attempt 0; the survivors, in node
# order, must run attempt 1 as nodes 0 and 1 of 2.
lose_node() {
  local victim=$1 first=$2 second=$3
  PORT=$(free_port)
  write_worker
  local args=(--nnodes 2:3 --max-restarts 2 --cpu-ranks 1 --grace-period 2s --timeout 2m --no-python ./work.sh)
  start_agent a "${args[@]}"
  wait_for "port_listening $PORT" 10 || fail "agent a never listened on $PORT"
  start_agent b "${args[@]}"
  sleep 0.5 # b joins before c: node ranks follow arrival
  start_agent c "${args[@]}"
  wait_for "[ -s seen.a ] && [ -s seen.b ] && [ -s seen.c ]" 30 || fail "attempt 0 did not start on 3 nodes: $(cat a.err)"
  expect_eq "$(cat seen.c)" "0 2 2 3 3"
  kill -KILL -- "-$(cat "$victim.pid")"
  wait_for "[ -f $first.rc ] && [ -f $second.rc ]" 60 || fail "the other agents did not finish: $(tail -5 a.err)"
  expect_eq "$(cat "$first.rc")" 0
  expect_eq "$(cat "$second.rc")" 0
  # attempt 1: two nodes, renumbered in their old order, world size 2
  expect_eq "$(tail -1 "seen.$first")" "1 0 0 2 2"
  expect_eq "$(tail -1 "seen.$second")" "1 1 1 2 2"
  expect_eq "$(wc -l <"seen.$victim")" 1
  expect_contains "$(cat "$second.err")" "this is node 1 of 2 now, world size 2"
  expect_eq "$(summary_nodes "$first.json")" "3 2"
  expect_eq "$(summary_nodes "$second.json")" "3 2"
  local reason
  reason=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["outcome"]["attempts"][0]["reason"])' a.json)
  expect_contains "$reason" "its agent closed the control connection"
  wait
}

test_a_lost_node_restarts_the_others_at_the_smaller_world_size() { lose_node c a b; }
test_a_lost_middle_node_moves_the_last_one_up() { lose_node b a c; }

test_with_a_fixed_node_count_a_lost_node_still_ends_the_run() {
  PORT=$(free_port)
  write_worker
  local args=(--nnodes 3:3 --max-restarts 2 --cpu-ranks 1 --grace-period 2s --timeout 2m --no-python ./work.sh)
  start_agent a "${args[@]}"
  wait_for "port_listening $PORT" 10 || fail "agent a never listened on $PORT"
  start_agent b "${args[@]}"
  sleep 0.5
  start_agent c "${args[@]}"
  wait_for "[ -s seen.a ] && [ -s seen.b ] && [ -s seen.c ]" 30 || fail "attempt 0 did not start on 3 nodes: $(cat a.err)"
  kill -KILL -- "-$(cat c.pid)"
  wait_for "[ -f a.rc ] && [ -f b.rc ]" 60 || fail "the other agents did not finish: $(tail -5 a.err)"
  # --nnodes 3 is not elastic: a lost node ends the run, as before
  expect_eq "$(cat a.rc)" 1
  expect_eq "$(cat b.rc)" 1
  expect_eq "$(wc -l <seen.a)" 1
  wait
}

# A real gloo job on two nodes (--nnodes 1:2) whose node 1 agent alone is
# killed: its rank dies with it, rank 0's collective fails with "Connection
# closed by peer", and one rank per node means every local rank has ended at
# once. The attempt's cause is still the lost node, not rank 0.
test_a_lost_node_is_named_not_the_rank_that_lost_its_peer() {
  PORT=$(free_port)
  cat >gloo_job.py <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    open("ready." + os.environ["AGENT"], "w").close()
    while True:
        dist.all_reduce(t)
        time.sleep(0.05)
dist.all_reduce(t)
print("finished at world size", dist.get_world_size())
PY
  local args=(--nnodes 1:2 --max-restarts 2 --cpu-ranks 1 --grace-period 2s --timeout 2m
    --python "$TORCH_PYTHON" gloo_job.py)
  start_agent a "${args[@]}"
  wait_for "port_listening $PORT" 10 || fail "agent a never listened on $PORT"
  start_agent b "${args[@]}"
  wait_for "[ -f ready.a ] && [ -f ready.b ]" 60 || fail "attempt 0 did not start on 2 nodes: $(tail -5 a.err)"
  kill -KILL "$(cat b.pid)" # the agent only: its rank dies with it
  wait_for "[ -f a.rc ]" 90 || fail "agent a did not finish: $(tail -5 a.err)"
  expect_eq "$(cat a.rc)" 0
  expect_contains "$(cat a.out)" "finished at world size 1"
  local attempt0
  attempt0=$(/usr/bin/python3 -c 'import json,sys; a = json.load(open(sys.argv[1]))["outcome"]["attempts"][0]; print(a["reason"]); print("remote node", (a["remote_failure"] or {}).get("node_rank"))' a.json)
  expect_contains "$attempt0" "node 1"
  expect_contains "$attempt0" "its agent closed the control connection"
  expect_not_contains "$attempt0" "rank 0 exited"
  expect_contains "$attempt0" "remote node 1"
  expect_contains "$(grep 'restarting the worker group' a.err)" "after stopped because node 1"
  wait
}

run_tests
