#!/usr/bin/env bash
# Real torchrun command lines (tests/data/torchrun_lines.txt, each with its
# source) run through air-run unchanged, with the training script replaced by
# a probe that records each rank's argv and environment. What each rank should
# get is computed from torchrun's rules by tests/e2e/torchrun_lines.py, which
# reads the arguments with torchrun's own parser: it needs torch, so this uses
# Debian's /usr/bin/python3 (torch 1.13 on this machine). No GPU here: lines
# with --nproc-per-node gpu must be refused as torchrun refuses them.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/torchrun_lines.sh"

if ! "$TORCH_PYTHON" -c 'import torch.distributed.run' 2>/dev/null; then
  echo "skip: $TORCH_PYTHON has no torch"
  exit 0
fi

LINES_PY=$AIR_SOURCE_DIR/tests/e2e/torchrun_lines.py

# prepare_line N TARGET LINE: the line's directory ($TESTDIR/lineN) with the
# probe in place, its arguments in DIR/args (each ended by a NUL) and the
# directory to run it from in DIR/cwd. The expectations of every line are then
# computed in one interpreter (expect-each: torch imported once, not per line).
prepare_line() {
  local n=$1 target=$2 line=$3 d=$TESTDIR/line$1 port
  mkdir -p "$d/probe"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  torchrun_line_vars "$port"
  torchrun_line_args "$line"
  printf '%s\0' "${LINE_ARGS[@]}" >"$d/args"
  torchrun_line_workdir "$d" "$target" >"$d/cwd"
}

run_line() { # run_line N KIND
  local n=$1 kind=$2 d=$TESTDIR/line$1 cwd
  local e_refused e_reason e_nproc e_node_rank e_max_nodes e_tee e_local_ranks_filter e_numa_binding
  source "$d/expect.sh" || {
    fail "line $n: no expectation"
    return
  }
  mapfile -d '' -t LINE_ARGS <"$d/args"
  cwd=$(cat "$d/cwd")
  local dry=()
  [[ $kind == dry ]] && dry=(--dry-run)
  (cd "$cwd" && PROBE_OUT=$d/probe TMPDIR=$d CUDA_VISIBLE_DEVICES=0,1 \
    timeout 120 "$AIR_RUN" "${dry[@]}" "${LINE_ARGS[@]}" >"$d/stdout" 2>"$d/stderr")
  local rc=$? out err
  out=$(cat "$d/stdout")
  err=$(cat "$d/stderr")
  if [[ $e_refused == True ]]; then
    if [[ $rc != 2 ]]; then
      fail "line $n: torchrun refuses it ($e_reason), air-run exited $rc"
      return
    fi
    [[ $err == *"CUDA is not available"* || $err == *"unknown option"* ]] || fail "line $n: refusal says: $err"
    echo "line $n: refused, as torchrun refuses it on a machine without GPUs"
    return
  fi
  [[ $rc == 0 ]] || {
    fail "line $n: exit $rc: $(tail -3 "$d/stderr")"
    return
  }
  local nproc=$e_nproc node_rank=$e_node_rank nodes=$e_max_nodes
  if [[ $kind == dry ]]; then
    expect_contains "$out" "$nproc rank(s) on node $node_rank/$nodes"
    expect_contains "$out" "world size $((nproc * nodes))"
    expect_contains "$out" "RANK=$((node_rank * nproc)) LOCAL_RANK=0 WORLD_SIZE=$((nproc * nodes))"
    echo "line $n: node $node_rank of $nodes planned with ranks $((node_rank * nproc))..$(((node_rank + 1) * nproc - 1))"
    return
  fi
  local problems
  problems=$(CUDA_VISIBLE_DEVICES=0,1 "$TORCH_PYTHON" "$LINES_PY" check "$d/expect.json" "$d/probe") ||
    fail "line $n: $problems"
  # -t/-r files in torchrun's layout, and --local-ranks-filter on the console.
  local tee filter dir r
  tee=$e_tee
  filter=$e_local_ranks_filter
  if [[ $tee != 0 ]]; then
    dir=$(sed -n 's/^air-run: rank output files (--redirects\/--tee) in //p' "$d/stderr")
    [[ $dir == "$d"/torchelastic_*/*_* ]] || fail "line $n: tee directory '$dir'"
    for ((r = 0; r < nproc; r++)); do
      grep -q "probe stdout rank $r" "$dir/attempt_0/$r/stdout.log" || fail "line $n: no stdout.log of local rank $r"
      grep -q "probe stderr rank $r" "$dir/attempt_0/$r/stderr.log" || fail "line $n: no stderr.log of local rank $r"
    done
  fi
  # --numa-binding: every rank bound, and OMP_NUM_THREADS said to follow the binding.
  if [[ -n $e_numa_binding ]]; then
    expect_contains "$err" "the physical cores of its --numa-binding $e_numa_binding share"
  fi
  if [[ -n $filter ]]; then
    for ((r = 0; r < nproc; r++)); do
      if [[ ",$filter," == *",$r,"* ]]; then
        expect_contains "$out" "probe stdout rank $r"
      else
        expect_not_contains "$out" "probe stdout rank $r"
      fi
    done
  fi
  echo "line $n: $nproc rank(s) launched; argv and environment as torchrun gives them"
}

test_real_torchrun_lines_launch_with_torchruns_environment() {
  local n=0 kind repo _path target line launched=0
  local -a numbers=() kinds=() dirs=()
  while IFS=$'\t' read -r kind repo _path target line; do
    [[ -z $kind || $kind == \#* ]] && continue
    n=$((n + 1))
    if [[ $kind == c10d ]]; then
      echo "line $n: c10d join without --node-rank ($repo): checked by scripts/torchrun-probe-compare.sh"
      continue
    fi
    prepare_line "$n" "$target" "$line"
    numbers+=("$n") kinds+=("$kind") dirs+=("$TESTDIR/line$n")
  done <"$TORCHRUN_LINES_FILE"
  "$TORCH_PYTHON" "$LINES_PY" expect-each "${dirs[@]}" || fail "torchrun's parser failed on the lines"
  local i
  for i in "${!numbers[@]}"; do
    run_line "${numbers[$i]}" "${kinds[$i]}"
    launched=$((launched + 1))
  done
  ((n >= 30)) || fail "only $n lines in the corpus"
  ((launched >= 30)) || fail "only $launched lines checked"
}

run_tests
