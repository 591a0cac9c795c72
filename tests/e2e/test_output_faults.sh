#!/usr/bin/env bash
# Output that goes nowhere: air-run's stdout into a pipe nobody reads (the
# supervision must go on: timeout, signals, teardown), and a log dir on a full
# disk (the run's exit code stays the ranks', and the loss is reported).
source "$(dirname "$0")/lib.sh"

# start_unread ARGS...: air-run in the background ($air) with its stdout into
# a FIFO that this shell holds open and never reads; rank stderr is discarded
# so that only stdout floods. stderr (the report) goes to the file stderr.
start_unread() {
  mkfifo out.fifo
  exec 3<>out.fifo # a reader that never reads: writes block once 64 KiB wait
  env --default-signal=INT "$AIR_RUN" --no-python "$@" >out.fifo 2>stderr &
  air=$!
}

flood='exec "$0" 100000 2>/dev/null' # the spew fixture: 100 GB of lines, never ends in time

test_unread_stdout_timeout_still_exits_124() {
  local start=$SECONDS
  start_unread --cpu-ranks 2 --timeout 2 --grace-period 1s sh -c "$flood" "$F/spew"
  finish_air 15
  exec 3>&-
  expect_rc 124
  ((SECONDS - start <= 8)) || fail "timeout of 2 s took $((SECONDS - start)) s with stdout unread"
  err=$(cat stderr)
  expect_contains "$err" "timed out after 2s"
  expect_contains "$err" "not shown on the console"
}

test_unread_stdout_sigterm_still_works() {
  start_unread --cpu-ranks 2 --grace-period 1s sh -c "$flood" "$F/spew"
  sleep 1
  kill -TERM "$air"
  local start=$SECONDS
  finish_air 10
  exec 3>&-
  expect_rc 143
  ((SECONDS - start <= 5)) || fail "SIGTERM took $((SECONDS - start)) s with stdout unread"
  expect_contains "$(cat stderr)" "interrupted by SIGTERM"
}

test_slow_reader_loses_nothing() {
  # A reader that only starts after a pause gets every line: while the
  # console is behind, air-run leaves the ranks' output in their pipes.
  "$AIR_RUN" --no-python --cpu-ranks 2 sh -c 'exec "$0" 2 2>/dev/null' "$F/spew" 2>stderr |
    { sleep 2; cat; } >out.txt
  rc=${PIPESTATUS[0]}
  expect_rc 0
  local want
  want=$("$F/spew" 2 2>/dev/null | wc -l)
  expect_eq "$(wc -l <out.txt)" "$((2 * want))"
  expect_not_contains "$(cat stderr)" "not shown"
}

test_full_disk_under_log_dir_is_reported() {
  mkdir logs
  if ! mount -t tmpfs -o size=1m tmpfs logs 2>/dev/null; then
    echo "  (skipped: cannot mount a tmpfs here; the unit test with /dev/full covers the sink)"
    return 0
  fi
  # 6 MB a rank into 1 MB, the console a file: the disk fills after the
  # ranks' pipes moved to reader threads, which write the logs themselves.
  run_air --no-python --cpu-ranks 2 --run-id full --log-dir logs --summary summary.json sh -c 'exec "$0" 3' "$F/spew"
  umount -l logs
  expect_rc 0 # the ranks' code, not air-run's trouble
  expect_contains "$err" "warning: rank 0's log is incomplete: write logs/full/rank0.log: No space left on device"
  expect_contains "$err" "warning: rank 1's log is incomplete: write logs/full/rank1.log: No space left on device"
  expect_contains "$(cat summary.json)" '"log_error": "write logs/'
  expect_eq "$(wc -l <"$TESTDIR/stdout")" "$((2 * $("$F/spew" 3 2>/dev/null | wc -l)))" # the console lost nothing
}

run_tests
