#!/usr/bin/env bash
# Real PyTorch: a 4-rank gloo DDP training through the built air-run, using
# Debian's /usr/bin/python3 (the interpreter that has torch on this machine).
source "$(dirname "$0")/lib.sh"

if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch"
  exit 0
fi

test_four_rank_gloo_ddp_trains() {
  run_air -f "$AIR_SOURCE_DIR/configs/demo.yaml" --cpu-ranks 4 --python "$TORCH_PYTHON" --timeout 5m
  expect_rc 0
  local r
  for r in 0 1 2 3; do
    expect_contains "$out" "[rank$r]: rank $r/4 epoch 2: loss"
    expect_contains "$out" "[rank$r]: rank $r: done in"
  done
  expect_contains "$out" "weights in sync: True"
  expect_not_contains "$out" "weights in sync: False"
}

test_rank_crash_in_collective_is_root_cause() {
  cat >crash.py <<'PY'
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 2:
    sys.exit(7)
t = torch.ones(1)
dist.all_reduce(t)   # blocks forever for the others: rank 2 never joins
dist.barrier()
PY
  local start=$SECONDS
  run_air --cpu-ranks 4 --python "$TORCH_PYTHON" --grace-period 5s crash.py
  expect_rc 7
  expect_contains "$err" "rank 2"
  ((SECONDS - start < 30)) || fail "took $((SECONDS - start))s"
}

test_kill_9_mid_training_leaves_no_rank() {
  start_training 2 --cpu-ranks 2 || return
  kill -KILL "$air"
  finish_air 10
  expect_ranks_gone
}

test_ctrl_c_mid_training_is_130() {
  start_training 2 --cpu-ranks 2 || return
  kill -INT "$air"
  finish_air 60
  expect_rc 130
  expect_eq "$(python3 -c 'import json; d = json.load(open("summary.json")); print(d["outcome"]["interrupt_signal_name"], all(r["stopped_by_air_run"] for r in d["ranks"]))')" "SIGINT True"
  expect_ranks_gone
}

test_timeout_mid_training_is_124() {
  # Long enough for two ranks to reach their second epoch under ASan on a
  # loaded 2-core machine (10 s was not, once: the run timed out before).
  start_training 2 --cpu-ranks 2 --timeout 30s || return
  finish_air 60
  expect_rc 124
  expect_ranks_gone
}

run_tests
