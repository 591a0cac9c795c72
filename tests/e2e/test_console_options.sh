#!/usr/bin/env bash
# Console options: -q, colour of the root cause and of notices, --timestamps,
# --stdin (a Python rank reading the terminal, in a real pty through util-linux
# script), and the per-run log folder.
source "$(dirname "$0")/lib.sh"

test_quiet_keeps_rank_output_and_the_report() {
  run_air --cpu-ranks 2 --no-python sh -c 'echo hi $RANK'
  expect_contains "$err" "air-run: setting OMP_NUM_THREADS"
  run_air -q --cpu-ranks 2 --no-python sh -c 'echo hi $RANK'
  expect_rc 0
  expect_contains "$out" "[rank1]: hi 1"
  expect_contains "$err" "air-run: run "
  expect_not_contains "$err" "OMP_NUM_THREADS"
  expect_eq "$(grep -c '^air-run:' "$TESTDIR/stderr")" "1" # the report's line only
}

test_root_cause_red_and_notices_dim_in_colour_only() {
  local esc=$'\x1b'
  FORCE_COLOR=1 run_air --cpu-ranks 2 --no-python sh -c '[ $RANK = 1 ] && exit 3; sleep 0.2'
  expect_rc 3
  expect_contains "$err" "${esc}[31m  root cause: rank 1"
  expect_contains "$err" "${esc}[2mair-run: setting OMP_NUM_THREADS"
  NO_COLOR=1 run_air --cpu-ranks 2 --no-python sh -c '[ $RANK = 1 ] && exit 3; sleep 0.2'
  expect_contains "$err" "  root cause: rank 1"
  [[ $err != *"$esc"* ]] || fail "escape codes under NO_COLOR"
}

test_timestamps_start_console_lines() {
  run_air --timestamps --cpu-ranks 2 --log-dir logs --no-python sh -c 'echo hi $RANK; echo oops >&2'
  expect_rc 0
  [[ $out =~ (^|$'\n')[0-2][0-9]:[0-5][0-9]:[0-5][0-9]\.[0-9]{3}\ \[rank1\]:\ hi\ 1 ]] || fail "no stamp: $out"
  [[ $err =~ [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}\ \[rank0\]:\ oops ]] || fail "no stamp on stderr: $err"
  expect_eq "$(cat logs/*/rank1.log)" "hi 1"$'\n'"oops" # log files keep the rank's bytes
}

test_log_dir_gets_a_folder_per_run() {
  run_air --cpu-ranks 1 --log-dir logs --no-python sh -c 'echo first'
  run_air --cpu-ranks 1 --log-dir logs --no-python sh -c 'echo second'
  expect_eq "$(ls logs | wc -l)" "2"
  expect_eq "$(cat logs/*/rank0.log | sort | tr '\n' ' ')" "first second "
  run_air --cpu-ranks 1 --log-dir 'logs2/{rank}' --no-python sh -c 'echo x'
  expect_eq "$(cat logs2/*/0/rank0.log)" "x"
}

write_asking_rank() {
  printf 'name = input("name? ")\nprint("hello", name)\n' >ask.py
  printf 'x = 41\nbreakpoint()\nprint("x is", x)\n' >debug.py
}

test_stdin_rank_reads_the_terminal() {
  command -v script >/dev/null || { echo "skip: no script(1)"; return 0; }
  write_asking_rank
  # One rank on a terminal: rank 0 gets the terminal by default.
  TERM=xterm NO_COLOR=1 timeout 30 env -u CI script -qfec "\"$AIR_RUN\" --cpu-ranks 1 ask.py; echo rc=\$?" /dev/null \
    < <(sleep 2; printf 'world\n'; sleep 3) >pty.out 2>&1
  # (one rank prints without the [rank0]: prefix)
  expect_contains "$(cat pty.out)" "name? world" # the prompt, then the echo of what was typed
  expect_contains "$(cat pty.out)" "hello world"
  expect_contains "$(cat pty.out)" "rc=0"
  # pdb through breakpoint(): change a variable, continue.
  TERM=xterm NO_COLOR=1 timeout 30 env -u CI script -qfec "\"$AIR_RUN\" --cpu-ranks 1 debug.py; echo rc=\$?" /dev/null \
    < <(sleep 2; printf 'x = 42\n'; sleep 0.5; printf 'c\n'; sleep 3) >pty.out 2>&1
  expect_contains "$(cat pty.out)" "(Pdb) x = 42"
  expect_not_contains "$(cat pty.out)" "Error in sitecustomize"
  expect_contains "$(cat pty.out)" "x is 42"
  expect_contains "$(cat pty.out)" "rc=0"
}

test_stdin_named_rank_and_the_default_without_it() {
  printf 'import os, sys\nif os.environ["RANK"] == "1":\n    print("hello", input("name? "))\nelse:\n    print("rank 0 read", repr(sys.stdin.read()))\n' >ask2.py
  echo piped | run_air --stdin 1 --cpu-ranks 2 ask2.py
  expect_rc 0
  expect_contains "$out" "[rank1]: name? hello piped"
  expect_contains "$out" "[rank0]: rank 0 read ''" # the others read /dev/null
  run_air --stdin 2 --cpu-ranks 2 ask2.py
  expect_rc 2
  expect_contains "$err" "stdin (--stdin): rank 2 is not in this run (world size 2)"
}

run_tests
