#!/usr/bin/env bash
# Static (torchrun-style) multi-node: two air-run agents on loopback, one per
# "node", joined through node 0's control port. Global ranks, failure on one
# node ending the other, an interrupt, a killed agent, a node that never joins.
source "$(dirname "$0")/lib.sh"

now_ms() { date +%s%3N; }

# start_node RANK ARGS...: runs one agent in the background, output in node$RANK.{out,err}, exit code in node$RANK.rc.
start_node() {
  local rank=$1
  shift
  ("$AIR_RUN" --nnodes "$NNODES" --node-rank "$rank" --master-addr 127.0.0.1 --master-port "$PORT" "$@" \
    >"node$rank.out" 2>"node$rank.err"
  echo $? >"node$rank.rc"
  now_ms >"node$rank.end") 2>/dev/null &
  eval "node${rank}_pid=$!"
}

node_rc() { cat "node$1.rc"; }

setup() {
  PORT=$(free_port_pair)
  NNODES=${1:-2}
  [[ -n $PORT ]] || fail "no free port pair"
}

test_two_nodes_give_global_rank_environment() {
  setup
  cat >env.sh <<'SH'
#!/bin/sh
env > "env.$RANK"
SH
  chmod +x env.sh
  start_node 0 --cpu-ranks 2 --no-python ./env.sh
  start_node 1 --cpu-ranks 2 --no-python ./env.sh
  wait
  expect_eq "$(node_rc 0)" 0
  expect_eq "$(node_rc 1)" 0
  local r e
  for r in 0 1 2 3; do
    [[ -f env.$r ]] || { fail "rank $r did not run"; continue; }
    e=$(cat "env.$r")
    expect_two_nodes_of_two_ranks_env "$r" "$e"
    expect_contains "$e" "ROLE_WORLD_SIZE=4"
    expect_contains "$e" "MASTER_ADDR=127.0.0.1"
    expect_contains "$e" "MASTER_PORT=$PORT"
  done
  # one run id for the whole job: node 0's
  expect_eq "$(grep '^TORCHELASTIC_RUN_ID=' env.3)" "$(grep '^TORCHELASTIC_RUN_ID=' env.0)"
  expect_contains "$(cat node1.err)" "node 1/2 ("
  expect_contains "$(cat node1.err)" "ranks 2-3 of 4, master 127.0.0.1:$PORT, control port $((PORT + 1)), via static"
}

test_two_by_two_gloo_ddp_trains() {
  if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
    echo "  (skipped: $TORCH_PYTHON has no torch)"
    return 0
  fi
  setup
  local script=$AIR_SOURCE_DIR/configs/examples/simple_mlp_ddp.py
  start_node 0 --cpu-ranks 2 --python "$TORCH_PYTHON" --timeout 5m "$script" --epochs 2 --samples 2000
  start_node 1 --cpu-ranks 2 --python "$TORCH_PYTHON" --timeout 5m "$script" --epochs 2 --samples 2000
  wait
  expect_eq "$(node_rc 0)" 0
  expect_eq "$(node_rc 1)" 0
  local all r
  all=$(cat node0.out node1.out)
  for r in 0 1 2 3; do
    expect_contains "$all" "[rank$r]: rank $r/4 epoch 1: loss"
    expect_contains "$all" "[rank$r]: rank $r: done in"
  done
  expect_contains "$(cat node1.out)" "[rank3]:"
  expect_not_contains "$(cat node0.out)" "[rank3]:"
  expect_not_contains "$all" "weights in sync: False"
}

test_slow_warm_imports_keep_the_agents_talking() {
  # The warm interpreter's `import torch` (a stand-in that takes 3 s) lasts
  # longer than the control connection tolerates silence (read_timeout=1):
  # each agent keeps up its heartbeats while it waits, so no node takes the
  # other for dead (it did: "no word from its agent for 1s").
  setup
  mkdir -p slowlib/torch
  printf 'import time\ntime.sleep(3)\n' >slowlib/torch/__init__.py
  printf 'import torch\nprint("rank imported torch")\n' >train.py
  local n
  for n in 0 1; do
    PYTHONPATH=$PWD/slowlib start_node "$n" --cpu-ranks 1 --python "$TORCH_PYTHON" --preload torch \
      --rdzv-conf read_timeout=1 --timeout 2m train.py
  done
  wait
  expect_eq "$(node_rc 0)" 0
  expect_eq "$(node_rc 1)" 0
  expect_contains "$(cat node0.out node1.out)" "[rank1]: rank imported torch"
  expect_not_contains "$(cat node0.err node1.err)" "no word from"
}

test_failure_on_node_1_ends_node_0_quickly() {
  setup
  cat >rank.sh <<'SH'
#!/bin/sh
if [ "$RANK" = 3 ]; then sleep 1; date +%s%3N > fail.ms; exit 5; fi
exec sleep 120
SH
  chmod +x rank.sh
  start_node 0 --cpu-ranks 2 --no-python ./rank.sh
  start_node 1 --cpu-ranks 2 --no-python ./rank.sh
  wait
  # every node exits with the failing rank's code
  expect_eq "$(node_rc 1)" 5
  expect_eq "$(node_rc 0)" 5
  expect_contains "$(cat node1.err)" "rank 3 exited with exit code 5"
  expect_contains "$(cat node0.err)" "stopped because node 1 ("
  expect_contains "$(cat node0.err)" "failed: rank 3 exited with exit code 5"
  expect_lines_name_node 0
  expect_lines_name_node 1
  local took=$(($(cat node0.end) - $(cat fail.ms)))
  echo "  node 0 ended ${took}ms after rank 3 failed on node 1"
  ((took < 2000)) || fail "node 0 ended ${took}ms after the failure on node 1"
}

# expect_lines_name_node NODE: every line of air-run's own on NODE's console
# (stdout and stderr: those that start with "air-run") says "air-run (node NODE)".
expect_lines_name_node() {
  local n=$1 own
  own=$(grep -h '^air-run' "node$n.out" "node$n.err")
  [[ -n $own ]] || { fail "node $n printed no line of air-run's own"; return; }
  if grep -v "^air-run (node $n)[ :]" <<<"$own"; then
    fail "node $n: the lines above do not name the node"
  fi
}

test_every_air_run_line_names_its_node() {
  # A job that prints many of air-run's own kinds of lines: the --timeout
  # notice and the placement (before the ranks), the unauthenticated join
  # warning (node 0), a failure, the other node's stop and the final report,
  # on both nodes. (The other multi-node tests here check their lines too: an
  # interrupt's teardown, a killed agent, a failed join; the report's
  # warnings are tests/unit/report_text_test.cpp's.)
  setup
  cat >rank.sh <<'SH'
#!/bin/sh
echo "air-run: a rank's own line, not air-run's"
if [ "$RANK" = 3 ]; then sleep 1; exit 5; fi
exec sleep 120
SH
  chmod +x rank.sh
  start_node 0 --cpu-ranks 2 --timeout 5m --no-python ./rank.sh
  start_node 1 --cpu-ranks 2 --timeout 5m --no-python ./rank.sh
  wait
  expect_eq "$(node_rc 0)" 5
  expect_eq "$(node_rc 1)" 5
  local n
  for n in 0 1; do
    expect_lines_name_node "$n"
    expect_contains "$(cat "node$n.err")" "air-run (node $n): this run stops after 5m (timeout, flag --timeout)"
    expect_contains "$(cat "node$n.err")" "air-run (node $n): node $n/2 ("
    expect_contains "$(cat "node$n.err")" "air-run (node $n): run "
  done
  expect_contains "$(cat node0.err)" "air-run (node 0): warning: the control connection is not authenticated"
  expect_contains "$(cat node1.err)" "failed after"
  expect_contains "$(cat node1.err)" "rank 3 exited with exit code 5"
  # The ranks' lines stay theirs, prefix and all.
  expect_contains "$(cat node1.out)" "[rank3]: air-run: a rank's own line, not air-run's"
}

test_one_node_lines_stay_air_run() {
  run_air --cpu-ranks 1 --timeout 5m --no-python true
  expect_rc 0
  expect_contains "$err" "air-run: this run stops after 5m"
  expect_contains "$err" "air-run: run "
  expect_not_contains "$err" "(node 0)"
}

test_interrupt_on_node_1_ends_node_0() {
  setup
  start_node 0 --cpu-ranks 2 --no-python sleep 120
  start_node 1 --cpu-ranks 2 --no-python sleep 120
  wait_for "grep -q 'via static' node1.err 2>/dev/null" 10 || fail "node 1 never started"
  sleep 0.5
  local agent sent
  agent=$(pgrep -P "$node1_pid" -f 'air-run' | head -1)
  [[ -n $agent ]] || { fail "no agent process for node 1"; return; }
  sent=$(now_ms)
  kill -INT "$agent"
  wait
  expect_eq "$(node_rc 1)" 130
  expect_eq "$(node_rc 0)" 130
  expect_contains "$(cat node0.err)" "failed: interrupted by SIGINT"
  expect_contains "$(cat node1.err)" "air-run (node 1): stopping 2 ranks (SIGINT)"
  expect_lines_name_node 0
  expect_lines_name_node 1
  local took=$(($(cat node0.end) - sent))
  echo "  node 0 ended ${took}ms after node 1 was interrupted"
  ((took < 2000)) || fail "node 0 took ${took}ms"
}

test_killed_agent_is_noticed() {
  setup
  start_node 0 --cpu-ranks 1 --no-python sleep 120
  start_node 1 --cpu-ranks 1 --no-python sh -c 'echo $$ > node1-rank.pid; exec sleep 120'
  wait_for "grep -q 'via static' node1.err 2>/dev/null" 10 || fail "node 1 never started"
  wait_for "[[ -s node1-rank.pid ]]" 10 || fail "node 1's rank never started"
  local agent sent
  agent=$(pgrep -P "$node1_pid" -f 'air-run' | head -1)
  [[ -n $agent ]] || { fail "no agent process for node 1"; return; }
  sent=$(now_ms)
  kill -KILL "$agent"
  wait
  expect_eq "$(node_rc 0)" 1
  expect_contains "$(cat node0.err)" "its agent closed the control connection (it exited or was killed)"
  expect_lines_name_node 0
  local took=$(($(cat node0.end) - sent))
  ((took < 3000)) || fail "node 0 took ${took}ms to notice"
  # node 1's rank died with its agent (parent-death signal)
  # (its own pid, not a pattern: other tests may be running sleeps in parallel)
  wait_for "! pid_alive $(cat node1-rank.pid)" 5 || fail "a rank outlived its killed agent"
}

test_node_that_never_joins_is_named() {
  setup 3
  local start=$SECONDS
  start_node 0 --cpu-ranks 1 --join-timeout 2s --no-python true
  start_node 1 --cpu-ranks 1 --join-timeout 2s --no-python true
  wait
  expect_eq "$(node_rc 0)" 125
  expect_eq "$(node_rc 1)" 125
  local msg="error: node 2 did not join within 2s (node 0's agent waited on control port $((PORT + 1)))"
  expect_contains "$(cat node0.err)" "air-run (node 0): $msg"
  expect_contains "$(cat node1.err)" "air-run (node 1): $msg"
  expect_lines_name_node 0
  expect_lines_name_node 1
  ((SECONDS - start < 10)) || fail "took $((SECONDS - start))s"
}

test_ranks_per_node_must_agree() {
  setup
  start_node 0 --cpu-ranks 2 --no-python true
  start_node 1 --cpu-ranks 3 --no-python true
  wait
  expect_eq "$(node_rc 0)" 2
  expect_eq "$(node_rc 1)" 2
  local msg="runs 3 rank(s) but node 0 ("
  expect_contains "$(cat node0.err)" "air-run (node 0): error: node 1 ("
  expect_contains "$(cat node0.err)" "$msg"
  expect_contains "$(cat node1.err)" "$msg"
  expect_contains "$(cat node1.err)" "every node must run the same number of ranks"
}

test_missing_target_on_one_node_stops_the_other() {
  setup
  start_node 0 --cpu-ranks 1 --no-python sleep 120
  start_node 1 --cpu-ranks 1 --no-python ./does-not-exist
  wait
  expect_eq "$(node_rc 1)" 127
  expect_eq "$(node_rc 0)" 127
  expect_contains "$(cat node0.err)" "does-not-exist"
}

test_node_rank_outside_nnodes_is_a_usage_error() {
  run_air --nnodes 2 --node-rank 2 --no-python true
  expect_rc 2
  expect_contains "$err" "air-run: error: --node-rank: node rank 2 is outside 0..1 (--nnodes = 2)"
}

test_dry_run_shows_the_node() {
  run_air --dry-run --nnodes 2 --node-rank 1 --node_rank 1 --master-addr 10.0.0.1 --cpu-ranks 2 --no-python true
  expect_rc 0
  expect_contains "$out" "nnodes = 2  (flag --nnodes)"
  expect_contains "$out" "rank 2 (local 0)"
  expect_contains "$out" "rank 3 (local 1)"
  expect_contains "$out" "on node 1/2"
  expect_contains "$out" "MASTER_PORT=29500"
}

run_tests
