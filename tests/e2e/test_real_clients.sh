#!/usr/bin/env bash
# The libraries people train with, each launched by its usual torchrun line
# with torchrun replaced by air-run: a Hugging Face Trainer, a PyTorch
# Lightning fit and an accelerate loop (tests/clients/: tiny models built
# from a config, random data, nothing downloaded; CPU ranks over gloo, so a
# machine with one GPU runs them too). Each trains and exits 0; a crash on
# rank 1 gives its exception's type and message in the summary and the
# reason; Lightning runs in the launcher's environment and starts no
# processes; a Trainer run resumes after a restart; a stuck rank is named.
#
# Needs a torch with those libraries (TORCH_PYTHON): the GPU machine has them
# (scripts/gpu-suite.sh, step "clients"); elsewhere the test is skipped (77).
AIR_E2E_GPUS=real # the GPUs air-run finds, where there are any (lib.sh)
source "$(dirname "$0")/lib.sh"

CLIENTS=$AIR_SOURCE_DIR/tests/clients
has() { "$TORCH_PYTHON" -c "import torch, $1" >/dev/null 2>&1; }
if ! has transformers && ! has lightning && ! has pytorch_lightning && ! has accelerate; then
  echo "skip: $TORCH_PYTHON has none of transformers, lightning, accelerate"
  exit 77
fi
export PYTHONPATH=$CLIENTS${PYTHONPATH:+:$PYTHONPATH}

# A torchrun line with torchrun replaced: air-run --nproc-per-node 2 SCRIPT ARGS.
launch() { run_air --python "$TORCH_PYTHON" --summary s.json "$@"; }

expect_crash_named() { # expect_crash_named: rank 1's injected RuntimeError at step 8
  expect_rc 1
  expect_eq "$(json_get s.json 'd["ranks"][1]["error"]["type"], d["ranks"][1]["error"]["message"]')" \
    "RuntimeError injected failure at step 8"
  expect_contains "$(json_get s.json 'd["outcome"]["reason"]')" \
    "rank 1 failed: RuntimeError: injected failure at step 8 (faults.py:"
  expect_contains "$err" "rank 1 failed: RuntimeError: injected failure at step 8"
  expect_not_contains "$err" "[rank1]: [rank1]:"
  echo "  reason: $(json_get s.json 'd["outcome"]["reason"]')"
}

test_hf_trainer_trains() {
  has transformers || { echo "skip: no transformers"; return 0; }
  launch --nproc-per-node 2 "$CLIENTS/hf_trainer.py" --output-dir out --max-steps 12
  expect_rc 0
  expect_contains "$out" "trained: global_step=12"
  echo "  $(grep -m1 'trained:' "$TESTDIR/stdout")"
}

test_hf_trainer_crash_is_named() {
  has transformers || { echo "skip: no transformers"; return 0; }
  AIR_TEST_CRASH_AT=8 launch --nproc-per-node 2 "$CLIENTS/hf_trainer.py" --output-dir out --max-steps 12
  expect_crash_named
}

test_hf_trainer_resumes_after_a_restart() {
  has transformers || { echo "skip: no transformers"; return 0; }
  AIR_TEST_CRASH_AT=8 AIR_TEST_CRASH_ONCE=$TESTDIR/crashed launch --nproc-per-node 2 --max-restarts 1 \
    "$CLIENTS/hf_trainer.py" --output-dir out --max-steps 12
  expect_rc 0
  expect_eq "$(json_get s.json 'len(d["outcome"]["attempts"])')" "2"
  expect_contains "$(json_get s.json 'd["outcome"]["attempts"][0]["reason"]')" \
    "rank 1 failed: RuntimeError: injected failure at step 8"
  expect_eq "$(json_get s.json 'd["ranks"][0]["result"]["value"]["global_step"]')" "12"
  expect_contains "$(json_get s.json 'd["ranks"][0]["result"]["value"]["resumed_from"]')" "checkpoint-5"
}

test_hf_trainer_stuck_rank_is_named() {
  has transformers || { echo "skip: no transformers"; return 0; }
  # --on-hang stop: the default (report) names the rank and lets the run go on.
  AIR_TEST_HANG_AT=6 launch --nproc-per-node 2 --hang-timeout 10s --on-hang stop "$CLIENTS/hf_trainer.py" \
    --output-dir out --max-steps 12
  expect_rc 124
  expect_contains "$err" "rank 1 is in at_step"
  echo "  $(grep -m1 'rank 1 is in' "$TESTDIR/stderr")"
}

test_lightning_fits_in_the_launchers_environment() {
  has lightning || has pytorch_lightning || { echo "skip: no lightning"; return 0; }
  launch --nproc-per-node 2 "$CLIENTS/lightning_fit.py" --max-steps 12
  expect_rc 0
  expect_eq "$(json_get s.json '[(r["result"]["value"]["rank"], r["result"]["value"]["world_size"], r["result"]["value"]["environment"]) for r in d["ranks"]]')" \
    "[(0, 2, 'TorchElasticEnvironment'), (1, 2, 'TorchElasticEnvironment')]"
  # The ranks are the processes air-run started, and they started none.
  expect_eq "$(json_get s.json '[r["result"]["value"]["pid"] == r["pid"] for r in d["ranks"]]')" "[True, True]"
  expect_contains "$out" "children=0"
  expect_not_contains "$out" "children=1"
}

test_lightning_crash_is_named() {
  has lightning || has pytorch_lightning || { echo "skip: no lightning"; return 0; }
  AIR_TEST_CRASH_AT=8 launch --nproc-per-node 2 "$CLIENTS/lightning_fit.py" --max-steps 12
  expect_crash_named
}

test_accelerate_trains_and_its_crash_is_named() {
  has accelerate || { echo "skip: no accelerate"; return 0; }
  launch --nproc-per-node 2 "$CLIENTS/accelerate_loop.py" --max-steps 12
  expect_rc 0
  expect_contains "$out" "trained: steps=12 processes=2"
  AIR_TEST_CRASH_AT=8 launch --nproc-per-node 2 "$CLIENTS/accelerate_loop.py" --max-steps 12
  expect_crash_named
}

run_tests
