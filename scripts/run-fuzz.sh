#!/usr/bin/env bash
# Runs every libFuzzer target in DIR (built by `make fuzz`) for SECONDS each,
# starting from its corpus in fuzz/corpus/<target>/. New inputs go to a
# scratch directory next to the binaries (the checkout's corpus stays as
# committed); a crash leaves its input as DIR/crash-<target>-* and fails the
# run: copy it into fuzz/corpus/<target>/ once fixed, so ctest replays it.
# Prints one line per target: executions, executions per second, corpus size.
set -euo pipefail
dir=${1:?usage: run-fuzz.sh BUILD/fuzz SECONDS}
seconds=${2:-10}
src=$(cd "$(dirname "$0")/.." && pwd)/fuzz
status=0
for binary in "$dir"/fuzz_*; do
  target=${binary##*/fuzz_}
  work="$dir/work-$target"
  mkdir -p "$work"
  log="$dir/$target.log"
  if "$binary" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$dir/crash-$target-" -print_final_stats=1 "$work" "$src/corpus/$target" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  inputs=$(find "$work" "$src/corpus/$target" -type f | wc -l)
  printf '%-16s %s: %s executions, %s/s, %s corpus inputs\n' "$target" "$result" "${runs:-?}" "${rate:-?}" "$inputs"
  if [[ $result == FAILED ]]; then tail -30 "$log" >&2; fi
done
exit $status
