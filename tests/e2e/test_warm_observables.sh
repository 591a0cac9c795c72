#!/usr/bin/env bash
# The warm start's contract (docs/restarts.md, "What a warm rank observes"):
# a rank forked from the warm interpreter observes what a fresh `python
# script.py` observes. One probe (warm_probe.py) runs fresh (--no-preload)
# and warm (--preload torch), each a first start and a restart, and every
# observable is compared: the generators' states, sys.path and what imports
# resolve to, the environment the script set before importing torch and
# torch's view of it, argv, cwd, umask, rlimits, signal dispositions and
# masks, fds, the hash flag. Real torch: Debian's /usr/bin/python3
# ($TORCH_PYTHON); with CUDA (the GPU machine) the CUDA generator too.
AIR_E2E_GPUS=real # the GPUs air-run finds, where there are any (lib.sh)
source "$(dirname "$0")/lib.sh"
# --nproc-per-node 2, not --cpu-ranks 2: two ranks on a GPU host too (they
# share its GPU), so the GPU machine runs the same cases with its own torch.

if ! "$TORCH_PYTHON" -c 'import torch' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch"
  exit 0
fi

AIR_BOUND=${AIR_BOUND:-300} # real torch ranks: a run that waits for ever ends (lib.sh run_air)

# probe_run MODE FLAGS...: runs the probe on 2 ranks, a failing first attempt
# and one restart, from this folder; its observations land in MODE/.
probe_run() {
  local mode=$1
  shift
  mkdir -p "$mode" out
  rm -f out/*
  PROBE_OUT=$PWD/out run_air --nproc-per-node 2 --python "$TORCH_PYTHON" --max-restarts 1 "$@" \
    --summary "$mode/summary.json" probe.py x --flag
  expect_rc 0 || return 1
  mv out/obs.* "$mode"/
}

test_a_warm_rank_observes_what_a_fresh_one_does() {
  cp "$AIR_SOURCE_DIR/tests/e2e/warm_probe.py" probe.py
  probe_run fresh --no-preload || return 1
  probe_run warm --preload torch || return 1
  expect_eq "$(json_get fresh/summary.json '[r["warm"] for r in d["ranks"]]')" "[False, False]"
  expect_eq "$(json_get warm/summary.json '[r["warm"] for r in d["ranks"]]')" "[True, True]"
  "$TORCH_PYTHON" - <<'PY' || fail "a warm rank observes something a fresh one does not (above)"
import itertools, json, sys

def load(mode, attempt, rank):
    return json.load(open("%s/obs.%d.%d.json" % (mode, attempt, rank)))

bad = 0
runs = list(itertools.product((0, 1), (0, 1)))  # (attempt, rank)
for attempt, rank in runs:
    fresh, warm = load("fresh", attempt, rank), load("warm", attempt, rank)
    if not warm["known"]["torch_before"]:
        print("attempt %d rank %d: not forked warm (torch was not imported before the script)" % (attempt, rank))
        bad += 1
    for key in sorted(set(fresh["same"]) | set(warm["same"])):
        a, b = fresh["same"].get(key), warm["same"].get(key)
        if a != b:
            if isinstance(a, dict) and isinstance(b, dict):  # the entries that differ
                a, b = ({k: d.get(k) for k in set(a) | set(b) if a.get(k) != b.get(k)} for d in (a, b))
            print("attempt %d rank %d: %s: fresh %r, warm %r" % (attempt, rank, key, a, b))
            bad += 1
# Every generator: one state per rank and attempt, warm as fresh.
for mode in ("fresh", "warm"):
    observed = {(a, r): load(mode, a, r)["distinct"] for a, r in runs}
    for key in observed[(0, 0)]:
        values = [observed[run][key] for run in runs]
        if values[0] is None:
            continue  # numpy absent
        if len(set(map(repr, values))) != len(values):
            print("%s: %s repeats across ranks or attempts: %r" % (mode, key, values))
            bad += 1
# And none of the warm ranks' states is a fresh one's (no replay).
for key in load("warm", 0, 0)["distinct"]:
    fresh = {repr(load("fresh", a, r)["distinct"][key]) for a, r in runs}
    warm = {repr(load("warm", a, r)["distinct"][key]) for a, r in runs}
    if load("warm", 0, 0)["distinct"][key] is not None and fresh & warm:
        print("%s: a warm state equals a fresh one" % key)
        bad += 1
print("compared %d observables on %d ranks x attempts, fresh and warm; cuda: %s"
      % (len(load("fresh", 0, 0)["same"]) + len(load("fresh", 0, 0)["distinct"]), len(runs),
         load("warm", 0, 0)["same"]["cuda_available"]))
sys.exit(1 if bad else 0)
PY
}

# A script that sets, before it imports torch, a variable torch reads at
# import: the ranks start fresh (the warm interpreter imported torch
# already), said in --dry-run and the summary, and torch honours it.
test_a_script_that_sets_torchs_import_time_variables_starts_fresh() {
  cat >threads.py <<'PY'
import os
os.environ["OMP_NUM_THREADS"] = "3"
import torch
print("threads", os.environ["RANK"], torch.get_num_threads(), flush=True)
PY
  run_air --nproc-per-node 2 --python "$TORCH_PYTHON" --preload torch --dry-run threads.py
  expect_rc 0
  expect_contains "$out" 'warm start: off: threads.py sets a variable torch reads at import before importing torch (threads.py line 2: os.environ["OMP_NUM_THREADS"] = "3")'
  run_air --nproc-per-node 2 --python "$TORCH_PYTHON" --preload torch --summary summary.json threads.py
  expect_rc 0
  expect_contains "$out" "threads 0 3"
  expect_contains "$out" "threads 1 3"
  expect_eq "$(json_get summary.json '[r["warm"] for r in d["ranks"]]')" "[False, False]"
  expect_contains "$(json_get summary.json 'd["ranks"][1]["fresh_reason"]')" "threads.py line 2"
}

# The warm interpreter never imports from the folder air-run was started in
# (`python -c` puts '' first on sys.path): a stub torch.py there is not run.
test_a_torch_py_in_air_runs_folder_is_not_imported() {
  mkdir work scripts
  echo 'raise SystemExit("the stub torch.py in the working directory ran")' >work/torch.py
  cat >scripts/t.py <<'PY'
import torch
print("real torch", hasattr(torch, "tensor"), flush=True)  # the stub would have ended the rank
PY
  cd work || return 1
  run_air --nproc-per-node 2 --python "$TORCH_PYTHON" --preload torch --summary ../summary.json ../scripts/t.py
  cd .. || return 1
  expect_rc 0
  expect_not_contains "$out$err" "stub torch.py"
  expect_contains "$out" "real torch True"
  expect_eq "$(json_get summary.json '[r["warm"] for r in d["ranks"]]')" "[True, True]"
}

# Each fork request carries only what a rank's environment changes of the
# one the interpreter started with. The cases where that differs from the
# whole: a variable air-run's environment has and every rank lacks
# (AIR_RESUME_FROM, exported stale, unset while there is no checkpoint), one
# that changes between attempts (the checkpoint attempt 0 wrote), and one the
# interpreter set itself (a preloaded module sets a variable when imported,
# which a fresh rank never imports, and one a library it loads sets in C
# alone, as GNU readline sets LINES and COLUMNS when torch's imports load it
# on Python 3.13). Fresh and warm see the same os.environ,
# attempt by attempt, and the C environment (what getenv reads) is
# os.environ in every rank.
test_a_ranks_environment_is_its_own_on_every_attempt() {
  cat >env.py <<'PY'
import ctypes, json, os, sys, time
environ = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
c_env, i = {}, 0
while environ[i] is not None:
    name, _, value = environ[i].partition(b"=")
    c_env[os.fsdecode(name)] = os.fsdecode(value)
    i += 1
folder = os.path.dirname(os.environ["AIR_RESULT_FILE"])
run_id = os.environ["TORCHELASTIC_RUN_ID"]
seen = {}
for name, value in os.environ.items():
    if name in ("MASTER_PORT", "AIR_RUN_CONTROL_PORT"):
        value = "<port>"
    seen[name] = value.replace(folder, "<run folder>").replace(run_id, "<run>")
attempt, rank = os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"]
with open("out/.env.%s.%s.json" % (attempt, rank), "w") as f:
    json.dump({"environ": seen, "c_matches": c_env == dict(os.environ),
               "resume": os.environ.get("AIR_RESUME_FROM"), "getenv_resume": os.getenv("AIR_RESUME_FROM"),
               "warm": "torch" in sys.modules}, f)
os.rename("out/.env.%s.%s.json" % (attempt, rank), "out/env.%s.%s.json" % (attempt, rank))
if attempt == "0":
    if rank == "0":  # fails once every rank has written what it saw
        while not all(os.path.exists("out/env.0.%d.json" % r) for r in range(int(os.environ["WORLD_SIZE"]))):
            time.sleep(0.05)
        os.makedirs("ckpt/step1")
        open("ckpt/step1/.metadata", "w").close()
        with open("ckpt/step1/.air-checkpoint", "w") as f:
            f.write('{"sequence": 1}')
        sys.exit(1)
    time.sleep(60)
PY
  mkdir modules
  cat >modules/sets_a_variable.py <<'PY'
import ctypes, os
os.environ["AIR_TEST_SET_BY_IMPORT"] = "1"
ctypes.CDLL(None).setenv(b"AIR_TEST_SET_IN_C", b"1", 1)  # os.environ never sees it
PY
  local mode
  for mode in fresh warm; do
    rm -rf out ckpt
    mkdir out
    local flags=(--no-preload)
    [[ $mode == warm ]] && flags=(--preload torch,sets_a_variable)
    AIR_RESUME_FROM=stale PYTHONPATH=$PWD/modules run_air --nproc-per-node 2 --python "$TORCH_PYTHON" \
      --max-restarts 1 --grace-period 5s --checkpoint-dir ckpt --summary "$mode.json" "${flags[@]}" env.py
    expect_rc 0 || return 1
    mv out "$mode"
  done
  expect_eq "$(json_get warm.json '[r["warm"] for r in d["ranks"]]')" "[True, True]"
  "$TORCH_PYTHON" - "$PWD/ckpt/step1" <<'PY' || fail "a rank's environment differs fresh and warm (above)"
import json, sys
checkpoint = sys.argv[1]
bad = 0
for attempt in (0, 1):
    for rank in (0, 1):
        obs = {m: json.load(open("%s/env.%d.%d.json" % (m, attempt, rank))) for m in ("fresh", "warm")}
        where = "attempt %d rank %d" % (attempt, rank)
        resume = checkpoint if attempt else None
        for mode, o in obs.items():
            if attempt == 1 and o["warm"] != (mode == "warm"):  # a restart always forks
                print("%s: %s rank not started %s" % (where, mode, mode)); bad += 1
            if not o["c_matches"]:
                print("%s: %s: the C environment is not os.environ" % (where, mode)); bad += 1
            if o["resume"] != resume or o["getenv_resume"] != resume:
                print("%s: %s: AIR_RESUME_FROM %r (getenv %r), not %r" % (where, mode, o["resume"],
                                                                        o["getenv_resume"], resume)); bad += 1
        a, b = obs["fresh"]["environ"], obs["warm"]["environ"]
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                print("%s: %s: fresh %r, warm %r" % (where, name, a.get(name), b.get(name))); bad += 1
print("compared the environment on 2 ranks x 2 attempts, fresh and warm")
sys.exit(1 if bad else 0)
PY
}

run_tests "$@"
