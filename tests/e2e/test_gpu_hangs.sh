#!/usr/bin/env bash
# Hangs and healthy quiet phases over NCCL, one rank per GPU: what
# tests/e2e/test_hangs.sh and tests/e2e/test_healthy_phases.sh check with gloo
# on CPU, on the real thing. NCCL collectives return at once and the wait
# happens later (a synchronize, .item()), and a rank waiting behind NCCL spins
# a core, so the gloo suites cannot stand in for these. Needs 2 GPUs and a
# torch with CUDA ($TORCH_PYTHON); exits 77 (skipped) otherwise.
AIR_E2E_GPUS=real # the GPUs air-run finds, where there are any (lib.sh)
source "$(dirname "$0")/lib.sh"
export NCCL_NVLS_ENABLE=0 # never NVLink multicast: it can take a shared host's GPUs down
AIR_BOUND=${AIR_BOUND:-120}

gpus=$("$TORCH_PYTHON" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null)
# One GPU: NCCL refuses two ranks on one device, so the ranks share it over
# gloo with CUDA tensors (AIR_GPU_HANGS_BACKEND=gloo): the same scripts and
# CUDA waits, without NCCL's own.
BACKEND=${AIR_GPU_HANGS_BACKEND:-nccl}
((${gpus:-0} >= 2)) || [[ $BACKEND == gloo && ${gpus:-0} -ge 1 ]] || {
  echo "skip: needs 2 GPUs (or 1 with AIR_GPU_HANGS_BACKEND=gloo) and torch with CUDA (found ${gpus:-no torch})"
  exit 77
}
export BACKEND
echo "backend $BACKEND, $gpus GPU(s)"

# expect_named_in_time TIMEOUT_S: the diagnosis in $err came at most 5 s after the hang timeout.
expect_named_in_time() {
  local quiet
  quiet=$(echo "$err" | sed -nE 's/.*no progress for ([0-9.]+)(m?s).*/\1 \2/p' | head -1)
  [[ -n $quiet ]] || fail "no diagnosis with its quiet time in: $(echo "$err" | tail -3)"
  echo "  named after $quiet (hang timeout ${1}s)"
  awk -v q="${quiet% *}" -v u="${quiet#* }" -v t="$1" 'BEGIN { if (u == "ms") q /= 1000; exit !(q <= t + 5) }' ||
    fail "named after $quiet, more than ${1}s + 5 s"
}

# show_diagnosis: the lines that name the hang, for the record.
show_diagnosis() { echo "$err" | grep -E "no progress|is in |wait in|waits|hung|quiet" | head -6 | sed 's/^/  | /'; }

# The common start: one GPU per rank (or one shared), three collectives done.
prologue() {
  cat <<'PY'
import os, threading, time, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
dist.init_process_group(os.environ["BACKEND"])
rank = dist.get_rank()
t = torch.ones(1 << 10, device="cuda")
for _ in range(3):
    dist.all_reduce(t)
torch.cuda.synchronize()
print("rank %d entered the loop" % rank, flush=True)
PY
}

hung_run() { # hung_run SCRIPT: the script under a 4 s hang timeout, --on-hang stop
  run_air --nproc-per-node 2 --python "$TORCH_PYTHON" --hang-timeout 4s --on-hang stop --grace-period 5s \
    --summary summary.json "$1"
  show_diagnosis
  expect_rc 124
  expect_named_in_time 4
}

test_nccl_a_rank_asleep_while_the_other_waits_in_all_reduce_is_named() {
  {
    prologue
    cat <<'PY'
def stuck_here():
    time.sleep(3600)


if rank == 1:
    stuck_here()
dist.all_reduce(t)
torch.cuda.synchronize()
PY
  } >stuck.py
  hung_run stuck.py
  expect_contains "$err" "rank 1 is in stuck_here at stuck.py:11"
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["hang"]["laggards"]')" "hung [1]"
}

test_nccl_deadlock_both_ranks_receive_is_a_hang() {
  {
    prologue
    cat <<'PY'
buf = torch.zeros(4, device="cuda" if os.environ["BACKEND"] == "nccl" else "cpu")  # gloo: CPU only
dist.recv(buf, src=1 - rank)  # both receive, nobody sends
torch.cuda.synchronize()
PY
  } >deadlock.py
  hung_run deadlock.py
  expect_eq "$(json_get summary.json 'd["outcome"]["status"]')" "hung"
}

test_nccl_mismatched_collectives_are_a_hang() {
  {
    prologue
    cat <<'PY'
if rank == 0:
    dist.all_reduce(t)
    torch.cuda.synchronize()
dist.barrier()
torch.cuda.synchronize()
PY
  } >mismatch.py
  hung_run mismatch.py
  expect_eq "$(json_get summary.json 'd["outcome"]["status"]')" "hung"
}

# healthy_run SCRIPT: under a 2 s hang timeout and restarts, a 6 s quiet phase ends 0, no restart.
healthy_run() {
  PHASE=6 run_air --nproc-per-node 2 --python "$TORCH_PYTHON" --max-restarts 1 --hang-timeout 2s \
    --summary summary.json "$1"
  show_diagnosis
  expect_rc 0
  expect_eq "$(json_get summary.json 'd["outcome"]["status"], d["outcome"]["restarts"], d["outcome"]["hang"]')" \
    "succeeded 0 None"
  expect_contains "$out" "[rank0]: done"
}

test_nccl_an_evaluation_with_collectives_and_no_output_is_no_hang() {
  {
    prologue
    cat <<'PY'
model = torch.nn.Linear(64, 64).cuda()
with torch.no_grad():
    for _ in range(int(float(os.environ["PHASE"]) / 0.05)):
        dist.all_reduce(model(torch.randn(8, 64, device="cuda")).sum().reshape(1))
        torch.cuda.synchronize()
        time.sleep(0.05)
print("done", flush=True)
PY
  } >evaluate.py
  healthy_run evaluate.py
}

test_nccl_a_checkpoint_save_on_rank_0_while_rank_1_waits_is_no_hang() {
  {
    prologue
    cat <<'PY'
if rank == 0:
    state = {"w": torch.randn(1024, 1024, device="cuda")}
    end = time.monotonic() + float(os.environ["PHASE"])
    while time.monotonic() < end:
        state["w"] = state["w"] * 1.0001 + 1
        torch.save({k: v.cpu() for k, v in state.items()}, "ckpt.pt")
dist.barrier()
torch.cuda.synchronize()
print("done", flush=True)
PY
  } >save.py
  healthy_run save.py
}

run_tests
