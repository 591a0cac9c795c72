#!/usr/bin/env bash
# Runs every libFuzzer target in DIR (built by `make fuzz`) for SECONDS each,
# starting from its corpus in fuzz/corpus/<target>/. New inputs go to a
# scratch directory next to the binaries (the checkout's corpus stays as
# committed); a crash leaves its input as DIR/crash-<target>-* and fails the
# run: copy it into fuzz/corpus/<target>/ once fixed, so ctest replays it.
# A fuzzer uses one core: as many run at once as there are cores (JOBS).
# Prints one line per target: executions, executions per second, corpus size.
set -euo pipefail
dir=${1:?usage: run-fuzz.sh BUILD/fuzz SECONDS}
seconds=${2:-10}
jobs=${JOBS:-$(nproc)}
src=$(cd "$(dirname "$0")/.." && pwd)/fuzz

# fuzz_one BINARY: runs one target; writes its line to DIR/<target>.result and
# exits 1 when the target found a crash.
fuzz_one() {
  local binary=$1 target=${1##*/fuzz_}
  local work="$dir/work-$target" log="$dir/$target.log" result=ok
  mkdir -p "$work"
  "$binary" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$dir/crash-$target-" -print_final_stats=1 "$work" "$src/corpus/$target" >"$log" 2>&1 ||
    result=FAILED
  local runs rate inputs
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  inputs=$(find "$work" "$src/corpus/$target" -type f | wc -l)
  printf '%-16s %s: %s executions, %s/s, %s corpus inputs\n' "$target" "$result" "${runs:-?}" "${rate:-?}" \
    "$inputs" >"$dir/$target.result"
  [[ $result == ok ]]
}

binaries=("$dir"/fuzz_*)
running=0
for binary in "${binaries[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$binary" &
  running=$((running + 1))
done
wait

status=0
for binary in "${binaries[@]}"; do
  target=${binary##*/fuzz_}
  cat "$dir/$target.result"
  if [[ $(cat "$dir/$target.result") == *" FAILED: "* ]]; then
    tail -30 "$dir/$target.log" >&2
    status=1
  fi
done
exit $status
