#!/usr/bin/env bash
# Runs every GPU-facing check of air-run on a machine with NVIDIA GPUs:
# build from source, `make demo`, the GPU-tagged end-to-end tests (tests/e2e/test_gpu.sh:
# NVML detection, spec-vs-hardware matching, the product page's DDP example and
# an FSDP variant over NCCL, a rank dying mid-collective, the preflight check,
# @distributed on GPUs), the [.gpu] and supervisor unit tests, the preflight
# bandwidth against PyTorch's, and the benchmark against torchrun.
#
#   scripts/gpu-suite.sh [OUTDIR]        (OUTDIR defaults to ./gpu-results)
#
# GPU_SUITE_STEPS (default "demo,tests,unit,clients,preflight,bench,hangs,stragglers,preempt,binding,launch,restart";
# also "steps" and "warm") picks steps, so that a
# short device lease can run them in two calls; the build always runs and is
# incremental (GPU_SUITE_TARGET=air-run builds only the binary, for steps that
# need nothing else). Each step prints PASS/FAIL; the summary is OUTDIR/gpu-suite.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT_DIR=$(mkdir -p "${1:-gpu-results}" && cd "${1:-gpu-results}" && pwd)
LOG="$OUT_DIR/gpu-suite.txt"
BUILD=build-gpu
AIR=$PWD/$BUILD/cli/air-run
PY=${PYTHON:-$(command -v python3)}
STEPS=${GPU_SUITE_STEPS:-demo,tests,unit,clients,preflight,bench,hangs,stragglers,preempt,binding,launch,restart}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 # never NVLink multicast on shared hosts
failures=0

say() { echo "$*" | tee -a "$LOG"; }
want() { [[ ",$STEPS," == *",$1,"* ]]; }
check() { # check NAME DESCRIPTION EXIT-STATUS
  if [[ $3 == 0 ]]; then say "PASS $1: $2"; else say "FAIL $1: $2"; failures=$((failures + 1)); fi
}
# run_step NAME LIMIT LOG PROGRAM [ARG...]: runs PROGRAM under `timeout LIMIT`
# into LOG and checks its exit status. A program that is missing (not built)
# fails the step: timeout's 127 is never read as a pass.
run_step() {
  local name=$1 limit=$2 log=$3
  shift 3
  if [[ ! -x $1 ]] && ! command -v "$1" >/dev/null; then
    say "FAIL $name: $1 is missing (not built?)"
    failures=$((failures + 1))
    return
  fi
  timeout "$limit" "$@" >"$log" 2>&1
  local rc=$?
  check "$name" "exit $rc: $(tail -2 "$log" | head -1)" "$rc"
}

say "== build ($(date -u +%FT%TZ), steps: $STEPS)"
start=$SECONDS
cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release >"$OUT_DIR/build.log" 2>&1 &&
  cmake --build $BUILD -j "$(nproc)" ${GPU_SUITE_TARGET:+--target $GPU_SUITE_TARGET} >>"$OUT_DIR/build.log" 2>&1
rc=$?
check build "cmake build in $((SECONDS - start)) s" $rc
if [[ $rc != 0 || ! -x "$AIR" ]]; then
  # A failed build fails the suite: the steps would test an older binary, or none.
  say "== the build failed: no step runs; see build.log"
  tail -30 "$OUT_DIR/build.log"
  exit 1
fi
nvidia-smi -L | tee -a "$LOG"
ngpu=$(nvidia-smi -L | grep -c '^GPU ')

if want demo; then
  say "== make demo (the README's first command; packages are the machine's own)"
  start=$SECONDS
  AIR_SKIP_DEPS=1 timeout 180 make demo DEMO_BUILD=$BUILD >"$OUT_DIR/demo.log" 2>&1
  rc=$?
  grep -E "epoch 2|in sync|air-run: run" "$OUT_DIR/demo.log" | tee -a "$LOG"
  check demo "make demo: exit $rc in $((SECONDS - start)) s" "$rc"
fi

if want tests; then
  say "== GPU end-to-end tests (tests/e2e/test_gpu.sh)"
  start=$SECONDS
  AIR_RUN="$AIR" AIR_FIXTURE_DIR=$PWD/$BUILD/fixtures TORCH_PYTHON=$PY TMPDIR=$OUT_DIR/e2e \
    timeout -k 5 480 bash -c 'mkdir -p "$TMPDIR" && exec bash tests/e2e/test_gpu.sh' >"$OUT_DIR/e2e-gpu.log" 2>&1
  rc=$?
  tee -a "$LOG" <"$OUT_DIR/e2e-gpu.log"
  check e2e-gpu "exit $rc in $((SECONDS - start)) s" "$rc"
fi

if want unit; then
  say "== unit tests: [.gpu] cases, and the supervisor's on this machine"
  run_step unit-gpu 60 "$OUT_DIR/unit-gpu.log" $BUILD/tests/unit_tests '[.gpu]'
  run_step unit-supervisor 180 "$OUT_DIR/unit-supervisor.log" $BUILD/tests/unit_tests '[supervisor]'
  # Every unit test, as `make test` runs them: they must build and pass here (Catch2 v3) too.
  run_step unit-all 600 "$OUT_DIR/unit-all.log" $BUILD/tests/unit_tests
fi

if want clients; then
  # This machine's torch (2.3+ prefixes a crashed rank's lines with "[rankN]: ")
  # and the libraries people train with: transformers, Lightning, accelerate.
  say "== a rank's exception on this torch, and the real clients (tests/e2e/test_rank_exceptions.sh, test_real_clients.sh)"
  # Side by side (16 cores; each test bounded): the step's device time is the longer one's.
  start=$SECONDS
  clients=(real_clients rank_exceptions)
  for t in "${clients[@]}"; do
    AIR_RUN="$AIR" AIR_FIXTURE_DIR=$PWD/$BUILD/fixtures AIR_SOURCE_DIR=$PWD TORCH_PYTHON=$PY TMPDIR=$OUT_DIR/e2e-$t \
      timeout -k 5 "${GPU_SUITE_CLIENTS_LIMIT:-420}" bash -c 'mkdir -p "$TMPDIR" && bash "tests/e2e/test_$0.sh"; rc=$?; echo "$rc" >"$1"; exit "$rc"' \
      "$t" "$OUT_DIR/$t.rc" >"$OUT_DIR/$t.log" 2>&1 &
  done
  wait
  for t in "${clients[@]}"; do
    rc=$(cat "$OUT_DIR/$t.rc" 2>/dev/null || echo 124) # no file: the bound killed it
    tee -a "$LOG" <"$OUT_DIR/$t.log"
    check "$t" "exit $rc within $((SECONDS - start)) s" "$rc"
  done
fi

if want preflight; then
  say "== preflight, and PyTorch's all-reduce through air-run on the same GPUs"
  start=$SECONDS
  timeout 60 "$AIR" --check | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  check preflight "exit $rc in $((SECONDS - start)) s" "$rc"
  timeout 60 "$AIR" --check --json >"$OUT_DIR/check.json" 2>"$OUT_DIR/check-json.err"
  if ((ngpu >= 2)); then
    timeout 150 "$AIR" --python "$PY" scripts/torch-allreduce-bench.py --compare "$OUT_DIR/check.json" \
      >"$OUT_DIR/torch-allreduce.log" 2>&1
    rc=$?
    grep -o '"compare": {[^}]*}' "$OUT_DIR/torch-allreduce.log" | tee -a "$LOG"
    check torch-allreduce "exit $rc (1: air-nccl-check and PyTorch differ by more than 10% at 256 MiB)" "$rc"
  fi
fi

if want bench; then
  if command -v torchrun >/dev/null; then
    say "== benchmark against torchrun"
    timeout 400 "$PY" scripts/bench-vs-torchrun.py --air-run "$AIR" --baseline $BUILD/fixtures/baseline_launcher \
      --python "$PY" --json "$OUT_DIR/bench-vs-torchrun.json" --markdown "$OUT_DIR/bench-vs-torchrun.md" 2>&1 |
      tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    check bench "exit $rc" "$rc"
  else
    say "SKIP bench: no torchrun on PATH"
  fi
fi

if want steps; then # the step counting benchmark alone (the hangs step runs it too)
  timeout 300 "$PY" scripts/bench-steps.py --air-run "$AIR" --python "$PY" --device cuda --steps 10000 \
    --rounds 3 --json "$OUT_DIR/bench-steps.json" 2>&1 | tee -a "$LOG"
  check bench-steps "exit ${PIPESTATUS[0]}" "${PIPESTATUS[0]}"
fi

if want hangs; then
  say "== hangs on the GPU: a Flight Recorder dump from a one-rank NCCL run, a hang named, step counting's cost"
  HANG_DIR=$OUT_DIR/hangs
  mkdir -p "$HANG_DIR"
  cat >"$HANG_DIR/fr_rank.py" <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
t = torch.ones(1 << 20, device="cuda")
for _ in range(5):
    dist.all_reduce(t)
dist.broadcast(t, 0)
torch.cuda.synchronize()
print("collectives done; quiet now", flush=True)
time.sleep(8)  # quiet: air-run diagnoses a hang and asks for the Flight Recorder
dist.destroy_process_group()
PY
  timeout 120 "$AIR" -n 1 --python "$PY" --hang-timeout 3s --log-dir "$HANG_DIR/fr-logs" \
    --summary "$HANG_DIR/fr-summary.json" "$HANG_DIR/fr_rank.py" >"$HANG_DIR/fr.log" 2>&1
  rc=$?
  grep -E "no progress|goes on|air-run: run" "$HANG_DIR/fr.log" | tee -a "$LOG"
  fr=$(find "$HANG_DIR/fr-logs" -name '*.fr.json' 2>/dev/null | head -1)
  [[ -n $fr ]] && cp "$fr" "$HANG_DIR/flight_recorder_rank0.json" && head -c 2500 "$fr" | tee -a "$LOG" && echo | tee -a "$LOG"
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); h=d["outcome"]["hang"]; print("hang files:", h and h["flight_recorder_files"])' \
    "$HANG_DIR/fr-summary.json" 2>&1 | sed "s|$OUT_DIR/||g" | tee -a "$LOG"
  [[ $rc == 0 && -n $fr ]]
  check flight-recorder "exit $rc, dump written: ${fr:+yes}" $?
  cat >"$HANG_DIR/stuck_cuda.py" <<'PY'
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()


def stuck_here():
    time.sleep(3600)


t = torch.ones(4, device="cuda")
for step in range(3):
    dist.all_reduce(t)
print("rank %d entered the loop" % rank, flush=True)
if rank == 1:
    stuck_here()
dist.all_reduce(t)
PY
  start=$SECONDS
  timeout 120 "$AIR" --nproc-per-node 3 --python "$PY" --hang-timeout 4s --on-hang stop --grace-period 5s \
    --summary "$HANG_DIR/stuck-summary.json" "$HANG_DIR/stuck_cuda.py" >"$HANG_DIR/stuck.log" 2>&1
  rc=$?
  grep -E "no progress|others wait" "$HANG_DIR/stuck.log" | tee -a "$LOG"
  [[ $rc == 124 ]] && grep -q "rank 1 is in stuck_here" "$HANG_DIR/stuck.log"
  check hang-named "exit $rc (124 expected) in $((SECONDS - start)) s, rank 1 named" $?
  if [[ ${GPU_HANGS_BENCH:-1} != 0 ]]; then
    timeout 300 "$PY" scripts/bench-steps.py --air-run "$AIR" --python "$PY" --device cuda --steps 10000 \
      --rounds 3 --json "$HANG_DIR/bench-steps.json" 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    check bench-steps "exit $rc" "$rc"
  fi
fi

if want stragglers; then
  say "== a straggler on the GPU, named with its GPU's NVML readings"
  S_DIR=$OUT_DIR/stragglers
  mkdir -p "$S_DIR"
  cat >"$S_DIR/paced_cuda.py" <<'PY'
import sys, time, torch, torch.distributed as dist
import air
dist.init_process_group("gloo")
extra = float(sys.argv[1]) if dist.get_rank() == 1 else 0.0
a = torch.randn(2048, 2048, device="cuda")
t = torch.ones(1, device="cuda")
for step in range(40):
    for _ in range(4):
        a = torch.tanh(a @ a)
    torch.cuda.synchronize()
    time.sleep((20 + extra) / 1000)
    dist.all_reduce(t)
    air.step()
PY
  for extra in 80 0; do
    PYTHONPATH=$PWD/python timeout 120 "$AIR" --nproc-per-node 3 --python "$PY" --summary "$S_DIR/summary-$extra.json" \
      "$S_DIR/paced_cuda.py" "$extra" >"$S_DIR/paced-$extra.log" 2>&1
    rc=$?
    grep -E "straggler|air-run: run" "$S_DIR/paced-$extra.log" | tee -a "$LOG"
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("stragglers:", d["stragglers"])' \
      "$S_DIR/summary-$extra.json" 2>&1 | tee -a "$LOG"
    if [[ $extra == 0 ]]; then
      [[ $rc == 0 ]] && ! grep -q "is a straggler" "$S_DIR/paced-$extra.log"
      check straggler-even "exit $rc, no straggler among even ranks" $?
    else
      [[ $rc == 0 ]] && grep -q "rank 1 is a straggler.*GPU-" "$S_DIR/paced-$extra.log"
      check straggler-named "exit $rc, rank 1 named with its GPU's readings" $?
    fi
  done
fi

if want preempt; then
  say "== preemption of DDP training on the GPU: one stop step, a real checkpoint (air.data, DCP), then resume"
  P_DIR=$OUT_DIR/preempt
  mkdir -p "$P_DIR"
  cat >"$P_DIR/ddp_preempt.py" <<'PY'
import os, sys, time, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
import air, air.data
dist.init_process_group("gloo")  # two ranks share the one GPU: NCCL wants a GPU per rank
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(4)]).cuda())
optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
start = 0
if os.environ.get("AIR_RESUME_FROM"):
    state = {"model": model.module.state_dict(), "step": torch.zeros((), dtype=torch.int64)}
    air.data.load(state)
    model.module.load_state_dict(state["model"])
    start = int(state["step"])
print("rank %d training from step %d (resume from %s)" % (rank, start, os.environ.get("AIR_RESUME_FROM")), flush=True)
x = torch.randn(64, 4096, device="cuda")
step = start
while step < start + int(sys.argv[1]):
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
    step += 1
    time.sleep(0.05 * rank)
    if air.should_stop():
        left = air.stop_deadline()
        t0 = time.time()
        path = air.data.save({"model": model.module.state_dict(), "step": torch.tensor(step)})
        print("rank %d stopped at step %d (air.stop_step() %s); checkpoint %s saved in %.2f s, %.1f s were left"
              % (rank, step, air.stop_step(), os.path.basename(path), time.time() - t0, left), flush=True)
        sys.exit(0)
print("rank %d finished at step %d" % (rank, step), flush=True)
PY
  rm -rf "$P_DIR/ckpt"
  PYTHONPATH=$PWD/python timeout 150 "$AIR" --nproc-per-node 2 --python "$PY" --grace-period 60s --checkpoint-dir "$P_DIR/ckpt" \
    --summary "$P_DIR/preempt-summary.json" "$P_DIR/ddp_preempt.py" 100000 >"$P_DIR/preempt.log" 2>&1 &
  air_pid=$!
  for _ in $(seq 120); do
    [[ $(grep -c "training from" "$P_DIR/preempt.log") -ge 2 ]] && break
    sleep 0.5
  done
  sleep 5
  kill -TERM $air_pid
  wait $air_pid
  rc=$?
  grep -E "stopped at step|SIGTERM|air-run: run" "$P_DIR/preempt.log" | tee -a "$LOG"
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); o=d["outcome"]; print("status:", o["status"], "preemption:", o["preemption"])' \
    "$P_DIR/preempt-summary.json" 2>&1 | tee -a "$LOG"
  ls "$P_DIR/ckpt" | tee -a "$LOG"
  steps=$(grep -o "stopped at step [0-9]*" "$P_DIR/preempt.log" | sort -u | wc -l)
  [[ $rc == 143 && $steps == 1 ]]
  check preempt "exit $rc (143 expected), $steps distinct stop step(s) over 2 ranks" $?
  PYTHONPATH=$PWD/python timeout 150 "$AIR" --nproc-per-node 2 --python "$PY" --checkpoint-dir "$P_DIR/ckpt" \
    --summary "$P_DIR/resume-summary.json" "$P_DIR/ddp_preempt.py" 3 >"$P_DIR/resume.log" 2>&1
  rc=$?
  grep -E "training from|finished at|air-run: run" "$P_DIR/resume.log" | sed "s|$OUT_DIR/||g" | tee -a "$LOG"
  [[ $rc == 0 ]] && grep -q "training from step [1-9]" "$P_DIR/resume.log"
  check resume "exit $rc, the new launch resumed from the checkpoint" $?
fi

if want binding; then
  say "== --numa-binding on the GPU: each rank's CPUs against its GPU's NUMA node"
  B_DIR=$OUT_DIR/binding
  mkdir -p "$B_DIR"
  printf 'import os\nprint("rank", os.environ["RANK"], "cpus", len(os.sched_getaffinity(0)), "of", os.cpu_count(), "OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS"))\n' \
    >"$B_DIR/affinity.py"
  nvidia-smi topo -m 2>&1 | head -4 | tee -a "$LOG"
  lscpu | grep -E "NUMA|Socket|L3" | tee -a "$LOG"
  failed=0
  for mode in node socket exclusive core-complex; do # 4 ranks share the GPU: exclusive splits its CPUs
    timeout 60 "$AIR" --numa-binding $mode --nproc-per-node 4 --dry-run --python "$PY" "$B_DIR/affinity.py" 2>&1 |
      grep -iE "cpus|numa|bind" | head -6 | tee -a "$LOG"
    timeout 60 "$AIR" --numa-binding $mode --nproc-per-node 4 --python "$PY" --summary "$B_DIR/$mode.json" \
      "$B_DIR/affinity.py" >"$B_DIR/$mode.log" 2>&1 || failed=1
    grep -E "rank|warning|OMP" "$B_DIR/$mode.log" | sort | head -6 | tee -a "$LOG"
  done
  check binding "every mode ran" $failed
fi

if want launch; then
  say "== launch cost: air-run against a bare fork/exec loop, and torchrun"
  timeout 200 "$PY" scripts/bench-launch.py --air-run "$AIR" --baseline $BUILD/fixtures/baseline_launcher \
    --ranks 8,128,1024 --repeat 7 --launch-only --breakdown --json "$OUT_DIR/bench-launch.json" 2>&1 | tail -8 | tee -a "$LOG"
  check bench-launch "exit ${PIPESTATUS[0]}" "${PIPESTATUS[0]}"
fi

if want restart; then
  say "== restart to the first step, 8 ranks with import torch and gloo: --no-preload, auto, --preload torch, torchrun"
  timeout 420 "$PY" scripts/bench-restart-to-step.py --air-run "$AIR" --python "$PY" --ranks 8 --rounds 3 \
    --json "$OUT_DIR/bench-restart-to-step.json" 2>&1 | tail -12 | tee -a "$LOG"
  check bench-restart "exit ${PIPESTATUS[0]}" "${PIPESTATUS[0]}"
fi

if want warm; then # where a GPU rank's first start goes, fresh against --preload torch (not in the default steps)
  say "== a DDP rank's first start on the GPU by phase, fresh and warm"
  timeout 300 "$PY" scripts/bench-warm-phases.py --air-run "$AIR" --python "$PY" --device cuda --ranks 1 \
    --rounds 3 --json "$OUT_DIR/bench-warm-phases.json" 2>&1 | tail -12 | tee -a "$LOG"
  check bench-warm-phases "exit ${PIPESTATUS[0]}" "${PIPESTATUS[0]}"
  timeout 120 "$PY" scripts/bench-store-wait.py --python "$PY" --build $BUILD --rounds 5 2>&1 | tail -3 | tee -a "$LOG"
  check bench-store-wait "exit ${PIPESTATUS[0]}" "${PIPESTATUS[0]}"
fi

say "== $failures failure(s)"
exit $((failures > 0))
