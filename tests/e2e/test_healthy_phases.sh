#!/usr/bin/env bash
# Long healthy phases are no hang: real gloo ranks (Debian's /usr/bin/python3,
# $TORCH_PYTHON, which has torch) that go quiet for longer than the hang
# timeout while they work, or while the others finished, run to exit 0 with
# no restart. Each runs under the defaults of a job with restarts
# (--max-restarts 1: 5m hang timeout, --on-hang stop) and under a short
# --hang-timeout, which the phase outlasts (docs/hangs.md, "What a hang is").
AIR_E2E_GPUS=real # the GPUs air-run finds, where there are any (lib.sh)
source "$(dirname "$0")/lib.sh"
# --nproc-per-node 2, not --cpu-ranks 2: two ranks on a GPU host too (they
# share its GPU), so the GPU machine runs the same cases with its own torch.

if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch"
  exit 0
fi

# The short hang timeout and how long each phase lasts: more than twice it.
# Under the defaults (5m) a phase of a second shows as much, sooner.
SHORT=2s
PHASE=5

# run_phase SCRIPT: the script under both settings, each to exit 0 with no
# restart and no diagnosis. Every script prints one line first: a sign of
# life ends the start-up allowance, so the short timeout applies at once.
run_phase() {
  local script=$1 how
  for how in defaults short; do
    local args=(--nproc-per-node 2 --python "$TORCH_PYTHON" --max-restarts 1 --summary "summary-$how.json")
    [[ $how == short ]] && args+=(--hang-timeout "$SHORT")
    local start=$EPOCHREALTIME phase=1
    [[ $how == short ]] && phase=$PHASE
    PHASE=$phase run_air "${args[@]}" "$script"
    local took
    took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    echo "  $script under $how: exit $rc, $(json_get "summary-$how.json" 'd["outcome"]["restarts"]') restarts, ${took} s"
    expect_rc 0
    expect_eq "$(json_get "summary-$how.json" 'd["outcome"]["status"], d["outcome"]["restarts"], d["outcome"]["hang"]')" \
      "succeeded 0 None"
    expect_not_contains "$err" "no progress"
    expect_contains "$out" "[rank0]: done"
  done
}

test_an_evaluation_with_collectives_and_no_output_is_no_hang() {
  # Forward only, an all_reduce every 50 ms on every rank, nothing printed.
  cat >evaluate.py <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
print("evaluating", flush=True)
model, total = torch.nn.Linear(64, 64), torch.zeros(1)
with torch.no_grad():
    for _ in range(int(float(os.environ["PHASE"]) / 0.05)):  # as many on every rank
        total += model(torch.randn(8, 64)).sum()
        dist.all_reduce(torch.ones(1))
        time.sleep(0.05)
print("done", flush=True)
PY
  run_phase evaluate.py
}

test_a_progress_bar_without_newlines_is_no_hang() {
  # Rank 0 draws a tqdm-like bar (\r, no newline) 4 times a second, as
  # datasets.map does; rank 1 waits at a barrier meanwhile.
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
  run_phase bar.py
}

test_the_last_rank_alone_after_the_others_finished_is_no_hang() {
  # Rank 1 is done and exits 0; rank 0 uploads the model without a word
  # (a network wait: next to no CPU), longer than the hang timeout.
  cat >upload.py <<'PY'
import os, time, torch.distributed as dist
dist.init_process_group("gloo")
print("training over", flush=True)
dist.barrier()
if dist.get_rank() == 0:
    time.sleep(float(os.environ["PHASE"]))
    print("done", flush=True)
PY
  run_phase upload.py
}

test_a_checkpoint_save_on_rank_0_while_rank_1_waits_is_no_hang() {
  # Rank 0 saves checkpoints silently (CPU and disk) while rank 1 waits at a barrier.
  cat >save.py <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
print("saving", flush=True)
if dist.get_rank() == 0:
    state = {"w": torch.randn(1024, 1024)}
    end = time.monotonic() + float(os.environ["PHASE"])
    while time.monotonic() < end:
        state["w"] = state["w"] * 1.0001 + 1
        torch.save(state, "ckpt.pt")
dist.barrier()
print("done", flush=True)
PY
  run_phase save.py
}

test_a_rank_that_exec_d_another_program_survives_the_stack_request() {
  # Rank 0 becomes `sleep` (the Python handler for the stack signal is gone
  # with the exec); rank 1 stays Python. Ctrl-\ and a hang's diagnosis ask
  # for stacks: only rank 1 may get the signal, and both exit 0.
  cat >become.py <<'PY'
import os, sys, time
print("starting", flush=True)
if os.environ["RANK"] == "0":
    os.execvp("sleep", ["sleep", os.environ["PHASE"]])
time.sleep(float(os.environ["PHASE"]))
print("done", flush=True)
PY
  local how
  for how in ctrl-backslash report; do
    local args=(--nproc-per-node 2 --python "$TORCH_PYTHON" --max-restarts 1 --summary "summary-$how.json")
    [[ $how == report ]] && args+=(--hang-timeout "$SHORT" --on-hang report)
    # A non-interactive shell starts background jobs with SIGQUIT ignored.
    PHASE=$PHASE env --default-signal=QUIT "$AIR_RUN" "${args[@]}" become.py >"stdout-$how" 2>"stderr-$how" &
    air=$!
    if [[ $how == ctrl-backslash ]]; then
      wait_for "grep -q 'rank1.*starting' stdout-$how && grep -q 'rank0.*starting' stdout-$how" 60 || fail "no start"
      sleep 1 # rank 0 exec'd by now
      kill -QUIT "$air"
      wait_for "grep -q 'rank1 stack' stdout-$how stderr-$how" 10 || fail "no stack shown: $(tail -5 "stderr-$how")"
    fi
    finish_air 60
    echo "  become.py with $how: exit $rc, $(json_get "summary-$how.json" 'd["outcome"]["restarts"]') restarts"
    expect_rc 0
    expect_eq "$(json_get "summary-$how.json" 'd["outcome"]["restarts"], [r["exit"]["code"] for r in d["ranks"]]')" \
      "0 [0, 0]"
    [[ $how == report ]] && expect_contains "$(cat "stderr-$how")" "the run goes on (--on-hang report)"
    expect_not_contains "$(cat "stderr-$how")" "signal"
  done
}

run_tests
