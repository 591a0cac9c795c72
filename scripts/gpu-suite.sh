#!/usr/bin/env bash
# Runs every GPU-facing check of air-run on a machine with NVIDIA GPUs, in one go:
# build from source, NVML detection, spec-vs-hardware matching, the product page's
# DDP example and an FSDP variant over NCCL, a rank crashing mid-collective, the
# [.gpu] unit tests, the preflight check, and the benchmark against torchrun.
#
#   scripts/gpu-suite.sh [OUTDIR]        (OUTDIR defaults to ./gpu-results)
#
# Each step prints PASS/FAIL with its numbers; the summary is OUTDIR/gpu-suite.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${1:-gpu-results}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu-suite.txt"
: >"$LOG"
BUILD=build-gpu
AIR=$BUILD/cli/air-run
PY=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on shared hosts
failures=0

say() { echo "$*" | tee -a "$LOG"; }
# GPU_SUITE_SKIP="fsdp,unit,uuid,bench-launch" skips steps when device time is short.
want() { [[ ",${GPU_SUITE_SKIP:-}," != *",$1,"* ]]; }
check() { # check NAME CONDITION-DESCRIPTION RESULT(0/1)
  if [[ $3 == 0 ]]; then say "PASS $1: $2"; else say "FAIL $1: $2"; failures=$((failures + 1)); fi
}
now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.2f}')"; }

say "== build"
t0=$(now)
cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release >"$OUT_DIR/build.log" 2>&1 &&
  cmake --build $BUILD -j "$(nproc)" $(want unit || echo --target air-run air-nccl-check) >>"$OUT_DIR/build.log" 2>&1
check build "cmake build in $(elapsed "$t0" "$(now)") s" $?
[[ -x $AIR ]] || { say "no binary; see build.log"; tail -30 "$OUT_DIR/build.log"; exit 1; }
nvidia-smi -L | tee -a "$LOG"
ngpu=$(nvidia-smi -L | wc -l)
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}

say "== detection"
$AIR --list-gpus | tee -a "$LOG"
$AIR --list-gpus --json >"$OUT_DIR/list-gpus.json"
type=$(python3 -c "import json;print(json.load(open('$OUT_DIR/list-gpus.json'))['accelerator_type'])")
check list-gpus "accelerator_type=$type with $ngpu GPUs" "$([[ $type == GPU_${ngpu}xH200 ]] && echo 0 || echo 1)"
python3 - "$OUT_DIR/list-gpus.json" <<'PYEOF' | tee -a "$LOG"
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
smi = subprocess.run(["nvidia-smi", "--query-gpu=uuid,pci.bus_id,name,memory.total", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().splitlines()
smi_uuids = {l.split(",")[0].strip() for l in smi}
ours = {g["uuid"] for g in d["gpus"]}
print("nvidia-smi uuids == air-run uuids:", smi_uuids == ours)
for g in d["gpus"]:
    print(f"  {g['index']} {g['uuid']} {g['pci_bus_id']} {g['name']} {g['memory_total_bytes'] / 2**30:.0f} GiB")
PYEOF
if ((ngpu >= 2)); then
  one=$(CUDA_VISIBLE_DEVICES=1 $AIR --list-gpus --json | python3 -c "import json,sys;d=json.load(sys.stdin);print(d['accelerator_type'], d['gpus'][0]['uuid'])")
  uuid1=$(python3 -c "import json;print(json.load(open('$OUT_DIR/list-gpus.json'))['gpus'][1]['uuid'])")
  check cvd-index "CUDA_VISIBLE_DEVICES=1 -> $one" "$([[ $one == "GPU_1xH200 $uuid1" ]] && echo 0 || echo 1)"
  byuuid=$(CUDA_VISIBLE_DEVICES=$uuid1 $AIR --list-gpus --json | python3 -c "import json,sys;d=json.load(sys.stdin);print(d['accelerator_type'], d['gpus'][0]['uuid'])")
  check cvd-uuid "CUDA_VISIBLE_DEVICES=<uuid of 1> -> $byuuid" "$([[ $byuuid == "GPU_1xH200 $uuid1" ]] && echo 0 || echo 1)"
  # The rank sees the GPU air-run selected: compare torch's view of device 0 with NVML's UUID.
  if want uuid; then
    (sleep 45; ps -ef --forest >"$OUT_DIR/ps-uuid.txt" 2>&1) &
    seen=$(timeout 60 $AIR -n 1 --no-python "$PY" -c "import torch;print(torch.cuda.get_device_properties(0).uuid)" 2>"$OUT_DIR/uuid.err" | sed -n 's/^\[rank0\]: //p')
  fi
  uuid0=$(python3 -c "import json;print(json.load(open('$OUT_DIR/list-gpus.json'))['gpus'][0]['uuid'])")
  want uuid && check uuid-binding "rank 0 of -n 1 sees torch uuid $seen, NVML $uuid0" "$([[ GPU-$seen == "$uuid0" ]] && echo 0 || echo 1)"
fi

say "== matching"
$AIR --accelerator-type GPU_8xH100 --no-python true >/dev/null 2>"$OUT_DIR/mismatch.err"
rc=$?
check type-mismatch "rc=$rc: $(cat "$OUT_DIR/mismatch.err")" "$([[ $rc == 2 ]] && grep -q "requested GPU_8xH100, found GPU_${ngpu}xH200" "$OUT_DIR/mismatch.err" && echo 0 || echo 1)"
$AIR -n $((ngpu + 1)) --no-python true >/dev/null 2>"$OUT_DIR/count.err"
rc=$?
check too-many "-n $((ngpu + 1)) rc=$rc: $(cat "$OUT_DIR/count.err")" "$([[ $rc == 2 ]] && echo 0 || echo 1)"
$AIR -n 1 --no-python true >/dev/null 2>&1
check one "-n 1 rc=$?" $?

say "== product page example (DDP, NCCL, all GPUs)"
t0=$(now)
timeout 180 $AIR --python "$PY" -f configs/demo.yaml --summary "$OUT_DIR/demo-summary.json" >"$OUT_DIR/demo.log" 2>&1
rc=$?
t_demo=$(elapsed "$t0" "$(now)")
grep -E "epoch 2|in sync" "$OUT_DIR/demo.log" | tee -a "$LOG"
check demo-ddp "rc=$rc in $t_demo s; $(grep -c 'weights in sync: True' "$OUT_DIR/demo.log") ranks in sync" "$([[ $rc == 0 ]] && [[ $(grep -c 'weights in sync: True' "$OUT_DIR/demo.log") -ge $ngpu ]] && echo 0 || echo 1)"

want fsdp && say "== FSDP variant"
want fsdp && timeout 180 $AIR --python "$PY" configs/examples/simple_mlp_fsdp.py --epochs 2 >"$OUT_DIR/fsdp.log" 2>&1
rc=$?
want fsdp && grep "epoch 1" "$OUT_DIR/fsdp.log" | tee -a "$LOG"
want fsdp && check fsdp "rc=$rc" $rc

say "== a rank crashing while the others are blocked in an NCCL all-reduce"
t0=$(now)
timeout 120 $AIR --python "$PY" --grace-period 10s --summary "$OUT_DIR/crash-summary.json" configs/examples/crash_in_allreduce.py >"$OUT_DIR/crash.log" 2>&1
rc=$?
t_crash=$(elapsed "$t0" "$(now)")
tail -15 "$OUT_DIR/crash.log" | tee -a "$LOG"
sleep 1
left=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | wc -l)
check nccl-crash "rc=$rc (want 9), total $t_crash s, compute processes left on GPUs: $left" "$([[ $rc == 9 && $left == 0 ]] && echo 0 || echo 1)"

say "== preflight"
t0=$(now)
timeout 60 $AIR --check >"$OUT_DIR/check.txt" 2>&1
rc=$?
t_check=$(elapsed "$t0" "$(now)")
cat "$OUT_DIR/check.txt" | tee -a "$LOG"
timeout 60 $AIR --check --json >"$OUT_DIR/check.json" 2>"$OUT_DIR/check-json.err"
check preflight "rc=$rc in $t_check s" $rc

say "== PyTorch all-reduce through air-run (comparison for the preflight bandwidth)"
timeout 120 $AIR --python "$PY" scripts/torch-allreduce-bench.py --compare "$OUT_DIR/check.json" >"$OUT_DIR/torch-allreduce.log" 2>&1
check torch-allreduce "rc=$? (1 = air-nccl-check and PyTorch differ by more than 10% at 256 MiB)" $?
tail -5 "$OUT_DIR/torch-allreduce.log" | tee -a "$LOG"

if want unit; then
say "== unit tests: [.gpu] and the supervisor on this machine"
timeout 60 $BUILD/tests/unit_tests '[.gpu]' >"$OUT_DIR/unit-gpu.log" 2>&1
check unit-gpu "$(tail -2 "$OUT_DIR/unit-gpu.log" | head -1)" $?
timeout 120 $BUILD/tests/unit_tests '[supervisor]' >"$OUT_DIR/unit-supervisor.log" 2>&1
check unit-supervisor "$(tail -2 "$OUT_DIR/unit-supervisor.log" | head -1)" $?
fi

if command -v torchrun >/dev/null; then
  say "== benchmark against torchrun"
  want bench-launch && timeout 150 python3 scripts/bench-launch.py --air-run $AIR --baseline $BUILD/fixtures/baseline_launcher \
    --torchrun torchrun --ranks 2,8,64 --repeat 3 --json "$OUT_DIR/bench-launch.json" 2>&1 | tee -a "$LOG"
  timeout 200 python3 scripts/bench-gpu.py --air-run $AIR --python "$PY" --repeat 1 --json "$OUT_DIR/bench-gpu.json" 2>&1 | tee -a "$LOG"
fi

say "== $failures failure(s)"
exit $((failures > 0))
