#!/usr/bin/env bash
# GPU-tagged end-to-end tests: real NVML detection, the product page's example
# over NCCL on every GPU, FSDP, a rank dying mid-collective, kill -9, Ctrl-C
# and a timeout during training (no process left on the GPUs each time), the
# preflight check, @distributed and TorchDistributor on GPUs. They need NVIDIA
# GPUs and a torch with CUDA; on any other machine (CI) the whole file exits
# 77, which ctest reports as skipped (label `gpu`). scripts/gpu-suite.sh runs
# them on the GPU machine.
AIR_E2E_GPUS=real # the GPUs air-run finds, where there are any (lib.sh)
source "$(dirname "$0")/lib.sh"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if ((ngpu == 0)); then
  echo "skip: no NVIDIA GPU (nvidia-smi lists none)"
  exit 77
fi
if ! "$TORCH_PYTHON" -c 'import sys, torch; sys.exit(torch.cuda.device_count() == 0)' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch with CUDA (set TORCH_PYTHON)"
  exit 77
fi
export NCCL_NVLS_ENABLE=0 # never NVLink multicast: it can take a shared host's GPUs down

# run_air, with a deadline: GPU time is scarce, so an air-run that does not end
# within GPU_TEST_LIMIT seconds is killed (finish_air keeps hang.txt).
run_air() {
  "$AIR_RUN" "$@" >"$TESTDIR/stdout" 2>"$TESTDIR/stderr" &
  air=$!
  finish_air "${GPU_TEST_LIMIT:-150}"
  out=$(cat "$TESTDIR/stdout")
  err=$(cat "$TESTDIR/stderr")
}


# smi_uuids: the GPUs' UUIDs as nvidia-smi lists them, sorted, one line.
smi_uuids() { nvidia-smi --query-gpu=uuid --format=csv,noheader | sort | tr '\n' ' '; }

# model: the family nvidia-smi's name gives, read here without air-run's
# rules: the first word after the vendor's, up to a dash ("NVIDIA H100 80GB
# HBM3" -> H100, "NVIDIA A100-SXM4-80GB" -> A100, "NVIDIA H200" -> H200).
model() {
  nvidia-smi --query-gpu=name --format=csv,noheader | head -1 |
    awk '{for (i = 1; i <= NF; i++) if ($i != "NVIDIA" && $i != "Tesla") {split($i, w, "-"); print toupper(w[1]); exit}}'
}

# gpu_processes: compute processes nvidia-smi sees on any GPU (pid, memory).
gpu_processes() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; }

test_list_gpus_matches_nvidia_smi() {
  run_air --list-gpus --json
  expect_rc 0
  echo "$out" >gpus.json
  expect_eq "$(json_get gpus.json 'd["accelerator_type"]')" "GPU_${ngpu}x$(model)"
  expect_eq "$(json_get gpus.json 'd["source"]')" "nvml"
  expect_eq "$(json_get gpus.json '" ".join(sorted(g["uuid"] for g in d["gpus"])) + " "')" "$(smi_uuids)"
  local smi_bus
  smi_bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | sort | tr '\n' ' ')
  expect_eq "$(json_get gpus.json '" ".join(sorted(g["pci_bus_id"] for g in d["gpus"])) + " "')" "$smi_bus"
  expect_eq "$(json_get gpus.json 'all(g["memory_total_bytes"] > 16 * 2**30 for g in d["gpus"])')" "True"
}

# The live status area on a real terminal shows NVML's readings of the ranks'
# GPUs: utilisation, memory used/total and temperature as numbers, not "--".
# Two ranks (on one GPU too): a single rank on a terminal owns its last line.
test_live_status_shows_real_gpu_readings() {
  command -v script >/dev/null || { echo "skip: no script(1)"; return 0; }
  cat >busy.py <<'PY'
import os, time, torch
x = torch.randn(8192, 8192, device=f"cuda:{int(os.environ['LOCAL_RANK']) % torch.cuda.device_count()}")
end = time.time() + 4
while time.time() < end:
    x = (x @ x).clamp_(-1, 1)
torch.cuda.synchronize()
PY
  TERM=xterm timeout 120 env -u CI script -qfec "\"$AIR_RUN\" --nproc-per-node 2 --python \"$TORCH_PYTHON\" busy.py; echo rc=\$?" /dev/null \
    >pty.out 2>&1 </dev/null
  expect_contains "$(cat pty.out)" "rc=0"
  grep -aqE 'gpu0 [0-9]+% [0-9]+\.[0-9]/[0-9]+\.[0-9]G [0-9]+C' pty.out ||
    fail "no NVML reading in the live view: $(grep -ao 'gpu0[^|]*' pty.out | tail -3)"
}

test_cuda_visible_devices_by_index_and_uuid() {
  ((ngpu >= 2)) || { echo "  (one GPU: skipped)"; return 0; }
  local last=$((ngpu - 1)) uuid
  uuid=$(nvidia-smi -i "$last" --query-gpu=uuid --format=csv,noheader)
  CUDA_VISIBLE_DEVICES=$last run_air --list-gpus --json
  expect_rc 0
  echo "$out" >by-index.json
  expect_eq "$(json_get by-index.json 'd["accelerator_type"] + " " + " ".join(g["uuid"] for g in d["gpus"])')" \
    "GPU_1x$(model) $uuid"
  CUDA_VISIBLE_DEVICES=$uuid run_air --list-gpus --json
  expect_rc 0
  echo "$out" >by-uuid.json
  expect_eq "$(json_get by-uuid.json 'd["accelerator_type"] + " " + " ".join(g["uuid"] for g in d["gpus"])')" \
    "GPU_1x$(model) $uuid"
}

# prefix R: rank R's line prefix; a run of one rank prints unprefixed, as torchrun.
prefix() { ((ngpu > 1)) && echo "[rank$1]: "; }

# print_uuid: a rank command printing how many GPUs torch sees and the UUID of cuda:$LOCAL_RANK.
print_uuid='import os, torch; d = int(os.environ["LOCAL_RANK"]); print("uuid", torch.cuda.device_count(), "GPU-" + str(torch.cuda.get_device_properties(d).uuid))'

# expect_ranks_on_their_gpus VISIBLE: every rank printed (print_uuid) VISIBLE
# GPUs and, as its cuda:LOCAL_RANK, the GPU summary.json records for it.
expect_ranks_on_their_gpus() {
  local r want
  for ((r = 0; r < ngpu; r++)); do
    want=$(json_get summary.json "d['ranks'][$r]['gpu']")
    expect_contains "$out" "$(prefix "$r")uuid $1 $want"
  done
}

test_each_rank_sees_the_gpu_air_run_bound_it_to() {
  run_air --summary summary.json --no-python "$TORCH_PYTHON" -c "$print_uuid"
  expect_rc 0
  expect_ranks_on_their_gpus "$ngpu"
  expect_eq "$(json_get summary.json 'sorted(r["gpu"] for r in d["ranks"]) == sorted(d["selection"]["gpus"])')" "True"
  expect_eq "$(json_get summary.json 'len(set(r["gpu"] for r in d["ranks"]))')" "$ngpu"
}

test_ranks_bind_by_index_inside_the_parents_cuda_visible_devices() {
  # As under torchrun: the list reaches the ranks unchanged and rank r uses
  # device r inside it; with the order reversed, rank 0 is on the last GPU.
  ((ngpu >= 2)) || { echo "skip: needs 2 GPUs"; return 0; }
  local order
  order=$(seq $((ngpu - 1)) -1 0 | paste -sd, -)
  CUDA_VISIBLE_DEVICES=$order run_air --summary summary.json --no-python \
    "$TORCH_PYTHON" -c 'import os; print("cvd", os.environ["CUDA_VISIBLE_DEVICES"])'
  expect_rc 0
  expect_eq "$(grep -c "cvd $order" stdout)" "$ngpu"
  CUDA_VISIBLE_DEVICES=$order run_air --summary summary.json --no-python "$TORCH_PYTHON" -c "$print_uuid"
  expect_rc 0
  expect_ranks_on_their_gpus "$ngpu"
  expect_eq "$(json_get summary.json 'd["ranks"][0]["gpu"]')" \
    "$(nvidia-smi -i $((ngpu - 1)) --query-gpu=uuid --format=csv,noheader)"
}

test_torchrun_nproc_per_node_gpu_and_more_ranks_than_gpus() {
  run_air --nproc-per-node gpu --no-python "$TORCH_PYTHON" -c "$print_uuid"
  expect_rc 0
  expect_eq "$(grep -c 'uuid ' stdout)" "$ngpu"
  # Twice as many ranks as GPUs: torchrun launches them (gloo tests share GPUs); so does air-run, with a note.
  run_air --nproc-per-node $((2 * ngpu)) --no-python "$TORCH_PYTHON" -c 'import os; print("r", os.environ["RANK"])'
  expect_rc 0
  expect_contains "$err" "$((2 * ngpu)) ranks on $ngpu GPU(s)"
  expect_eq "$(grep -cE '(^|]: )r [0-9]+$' stdout)" "$((2 * ngpu))"
}

test_isolated_ranks_see_only_their_own_gpu() {
  run_air --isolate-gpus --summary summary.json --no-python "$TORCH_PYTHON" -c "$print_uuid"
  expect_rc 0
  expect_ranks_on_their_gpus 1
}

test_wrong_type_or_count_fails_before_launch() {
  run_air --accelerator-type GPU_8xH100 --no-python touch launched
  expect_rc 2
  expect_contains "$err" "requested GPU_8xH100, found GPU_${ngpu}x"
  run_air -n $((ngpu + 1)) --no-python touch launched
  expect_rc 2
  expect_contains "$err" "requested $((ngpu + 1)) accelerators, found GPU_${ngpu}x"
  [[ ! -e launched ]] || fail "a rank was launched despite the mismatch"
  run_air -n 1 --no-python touch launched
  expect_rc 0
  [[ -e launched ]] || fail "-n 1 did not launch"
}

test_product_page_example_trains_on_every_gpu_with_nccl() {
  run_air --python "$TORCH_PYTHON" -f "$AIR_SOURCE_DIR/configs/demo.yaml" --summary summary.json
  expect_rc 0
  local r
  for ((r = 0; r < ngpu; r++)); do
    expect_contains "$out" "$(prefix "$r")rank $r/$ngpu epoch 2: loss"
    expect_contains "$out" "$(prefix "$r")rank $r: done in"
  done
  expect_eq "$(grep -c 'weights in sync: True' stdout)" "$ngpu"
  expect_eq "$(json_get summary.json 'd["selection"]["cpu"], d["launch"]["world_size"]')" "False $ngpu"
  echo "  demo wall time $(json_get summary.json 'd["duration_s"]') s"
}

test_fsdp_variant_trains() {
  run_air --python "$TORCH_PYTHON" "$AIR_SOURCE_DIR/configs/examples/simple_mlp_fsdp.py" --epochs 2
  expect_rc 0
  local r
  for ((r = 0; r < ngpu; r++)); do expect_contains "$out" "$(prefix "$r")rank $r/$ngpu fsdp epoch 1: loss"; done
}

test_rank_dying_mid_all_reduce_is_root_cause_and_frees_the_gpus() {
  ((ngpu >= 2)) || { echo "  (one GPU: skipped)"; return 0; }
  [[ -z $(gpu_processes) ]] || fail "GPUs busy before the test: $(gpu_processes)"
  # Sample nvidia-smi while the job runs, so that "no process left" below is
  # known to come from a tool that does see the ranks on this machine.
  (while :; do gpu_processes >>during.txt; sleep 0.2; done) &
  local sampler=$!
  run_air --python "$TORCH_PYTHON" --grace-period 10s --summary summary.json \
    "$AIR_SOURCE_DIR/configs/examples/crash_in_allreduce.py"
  kill "$sampler"
  wait "$sampler" 2>/dev/null
  expect_rc 9
  expect_eq "$(json_get summary.json 'd["outcome"]["root_cause_rank"], d["outcome"]["reason"]')" \
    "1 rank 1 exited with exit code 9"
  expect_contains "$err" "root cause: rank 1"
  # Every other rank was blocked in NCCL and stopped by air-run, not failed on its own.
  expect_eq "$(json_get summary.json 'all(r["stopped_by_air_run"] for r in d["ranks"] if r["rank"] != 1)')" "True"
  echo "  run ended after $(json_get summary.json 'd["duration_s"]') s; last rank ended" \
    "$(json_get summary.json 'round(max(r["duration_s"] for r in d["ranks"]) - d["ranks"][1]["duration_s"], 3)') s" \
    "after rank 1 (grace period 10 s)"
  [[ -s during.txt ]] || fail "nvidia-smi never saw the ranks on the GPUs: the check below would prove nothing"
  # No rank outlives air-run holding GPU memory.
  wait_for '[[ -z $(gpu_processes) ]]' 5 || fail "processes still on the GPUs: $(gpu_processes)"
  local pid
  for pid in $(json_get summary.json '" ".join(str(r["pid"]) for r in d["ranks"])'); do
    pid_alive "$pid" && fail "rank pid $pid outlived air-run"
  done
  return 0
}

# expect_gpus_freed: no rank process is left, and no process holds GPU memory.
expect_gpus_freed() {
  expect_ranks_gone
  wait_for '[[ -z $(gpu_processes) ]]' 10 || fail "processes still on the GPUs: $(gpu_processes)"
}

# start_gpu_training [AIR-RUN OPTIONS]: start_training on every GPU, and make
# sure nvidia-smi sees the ranks (else "freed" below would prove nothing).
start_gpu_training() {
  start_training "$ngpu" "$@" || return
  [[ -n $(gpu_processes) ]] || fail "nvidia-smi does not see the ranks on the GPUs"
}

test_kill_9_of_air_run_frees_the_gpus() {
  start_gpu_training || return
  kill -KILL "$air"
  finish_air 10
  expect_gpus_freed
}

# gpu_memory_used: MiB in use on each GPU, one line, in index order.
gpu_memory_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | tr '\n' ' '; }

# Ranks that are shell wrappers (the rank is `sh`, not Python), each with a
# Python grandchild on its GPU that ignores SIGTERM and one in a session of its
# own (setsid): after kill -9 of air-run, no process is left and the GPU
# memory is back to what it was (PDEATHSIG alone reaches only the shells).
test_kill_9_with_wrapper_ranks_frees_the_gpus() {
  local mark="air-gpu-orphan-$$-$RANDOM" before
  before=$(gpu_memory_used)
  cat >hold.py <<'PY'
import os, signal, time, torch
signal.signal(signal.SIGTERM, signal.SIG_IGN)
dev = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
x = torch.empty(512 * 2**20, dtype=torch.uint8, device=f"cuda:{dev}")  # 512 MiB
torch.cuda.synchronize()
print("holding", flush=True)
time.sleep(600)
PY
  cat >wrapper.sh <<SH
#!/bin/sh
"$TORCH_PYTHON" hold.py "$mark" &
setsid "$TORCH_PYTHON" hold.py "$mark" &
"$TORCH_PYTHON" hold.py "$mark"
SH
  chmod +x wrapper.sh
  "$AIR_RUN" --no-python --grace-period 2s ./wrapper.sh >stdout 2>stderr &
  air=$!
  if ! wait_for "[[ \$(grep -c holding stdout) -ge $((3 * ngpu)) ]]" 120; then
    kill -KILL "$air" $(pgrep -f -- "$mark") 2>/dev/null
    fail "the wrappers' Python processes did not start: $(tail -5 stderr)"
    return 1
  fi
  [[ -n $(gpu_processes) ]] || fail "nvidia-smi does not see the processes on the GPUs"
  kill -KILL "$air"
  finish_air 10
  if ! wait_for "[[ \$(pgrep -c -f -- $mark) == 0 ]]" 30; then
    fail "processes left after kill -9 of air-run: $(pgrep -af -- "$mark")"
    kill -KILL $(pgrep -f -- "$mark") 2>/dev/null
  fi
  wait_for '[[ -z $(gpu_processes) ]]' 20 || fail "processes still on the GPUs: $(gpu_processes)"
  # memory back to within 256 MiB of what it was on every GPU
  wait_for "python3 -c 'import sys; b, a = sys.argv[1].split(), sys.argv[2].split(); sys.exit(any(int(y) > int(x) + 256 for x, y in zip(b, a)))' \"$before\" \"\$(gpu_memory_used)\"" 20 ||
    fail "GPU memory not freed: before $before, after $(gpu_memory_used) MiB"
}

test_ctrl_c_stops_training_with_130_and_frees_the_gpus() {
  start_gpu_training || return
  kill -INT "$air"
  finish_air 60
  expect_rc 130
  expect_eq "$(json_get summary.json 'd["outcome"]["interrupt_signal_name"], all(r["stopped_by_air_run"] for r in d["ranks"])')" "SIGINT True"
  expect_gpus_freed
}

test_timeout_stops_training_with_124_and_frees_the_gpus() {
  start_gpu_training --timeout 30s || return
  finish_air 90
  expect_rc 124
  expect_gpus_freed
}

test_preflight_check_passes() {
  run_air --check --json
  expect_rc 0
  echo "$out" >check.json
  expect_eq "$(json_get check.json 'd["status"], len(d["gpus"])')" "pass $ngpu"
  if ((ngpu >= 2)); then
    expect_eq "$(json_get check.json 'd["nccl"]["results"][-1]["bytes"], d["nccl"]["results"][-1]["correct"]')" "268435456 True"
    echo "  busbw at 256 MiB: $(json_get check.json 'd["nccl"]["results"][-1]["busbw_gbps"]') GB/s"
  fi
}

test_distributed_decorator_on_every_gpu() {
  cat >train.py <<'PY'
from air import distributed

@distributed
def train(scale):
    import os, torch, torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    t = torch.full((4,), float(dist.get_rank() + 1), device="cuda") * scale
    dist.all_reduce(t)
    out = {"rank": dist.get_rank(), "sum": t[0].item(), "gpu": torch.cuda.current_device()}
    dist.destroy_process_group()
    return out

print("RESULTS", train.distributed(2.0))
PY
  PYTHONPATH=$AIR_SOURCE_DIR/python AIR_RUN_BINARY=$AIR_RUN timeout -k 5 "${GPU_TEST_LIMIT:-150}" \
    "$TORCH_PYTHON" train.py >stdout 2>stderr
  rc=$?
  expect_rc 0
  local r sum=$((ngpu * (ngpu + 1)))
  local want="RESULTS ["
  for ((r = 0; r < ngpu; r++)); do want+="{'rank': $r, 'sum': $sum.0, 'gpu': $r}, "; done
  expect_eq "$(grep '^RESULTS' stdout)" "${want%, }]"
}

test_torch_distributor_on_gpus() {
  cat >td.py <<'PY'
from air import TorchDistributor

def train(scale):
    import os, torch, torch.distributed as dist
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # as Spark's docs ask
    dist.init_process_group("nccl")
    t = torch.ones(2, device="cuda") * scale
    dist.all_reduce(t)
    return (dist.get_world_size(), t.sum().item())

print("RESULT", TorchDistributor(num_processes=NGPU, local_mode=True, use_gpu=True).run(train, 3.0))
PY
  sed -i "s/NGPU/$ngpu/" td.py
  PYTHONPATH=$AIR_SOURCE_DIR/python AIR_RUN_BINARY=$AIR_RUN timeout -k 5 "${GPU_TEST_LIMIT:-150}" \
    "$TORCH_PYTHON" td.py >stdout 2>stderr
  rc=$?
  expect_rc 0
  expect_eq "$(grep '^RESULT' stdout)" "RESULT ($ngpu, $((6 * ngpu)).0)"
}

run_tests
