#!/usr/bin/env bash
# Where air-run's own output goes: closed standard streams, report paths that
# are devices, FIFOs or symlinks, output that cannot be written (a full
# device, a pipe whose reader is gone), and rank bytes (NUL, escape
# sequences) in the reports air-run composes.
source "$(dirname "$0")/lib.sh"

# cgroup_v2: true where air-run can make a run cgroup (cgroup v2, as root).
cgroup_v2() { [[ -f /sys/fs/cgroup/cgroup.controllers && $(id -u) == 0 ]]; }

test_closed_standard_streams_do_not_reach_a_victim() {
  # An unrelated process whose pid the rank prints alone on a line: with
  # air-run's fds 1 and 2 closed, the run cgroup's cgroup.procs would sit on
  # one of them, and the line would move the victim into the run's cgroup (the
  # end-of-run sweep then kills it).
  sleep 1000 &
  local victim=$!
  "$AIR_RUN" --no-python --cpu-ranks 1 sh -c "echo $victim; echo $victim >&2" >&- 2>&-
  rc=$?
  local alive=yes
  pid_alive "$victim" || alive=no
  kill -KILL "$victim" 2>/dev/null
  wait "$victim" 2>/dev/null
  expect_rc 0
  expect_eq "$alive" yes
  cgroup_v2 || echo "  (no cgroup v2 here: the victim could not have been moved; the log test below shows the fds)"
}

test_closed_standard_streams_keep_each_log_its_own() {
  # With fds 1 and 2 closed a rank's log file would be opened there, and the
  # console echo of every rank would be written into rank 0's log.
  mkdir logs
  "$AIR_RUN" --no-python --cpu-ranks 2 --log-dir logs sh -c 'echo "line of rank $RANK"' >&- 2>&- <&-
  rc=$?
  expect_rc 0
  local log0
  log0=$(cat logs/*/rank0.log 2>/dev/null)
  expect_contains "$log0" "line of rank 0"
  expect_not_contains "$log0" "rank 1"
  expect_not_contains "$log0" "[rank"
  expect_not_contains "$log0" "succeeded"
}

test_stdin_closed_gives_the_stdin_rank_end_of_input() {
  # Before: the rank waited on a pipe air-run never closed (its stdin fd was
  # its own run folder or nothing), until killed.
  timeout -s KILL 30 "$AIR_RUN" --no-python --cpu-ranks 1 --stdin 0 sh -c 'cat; echo "end of input"' \
    <&- >stdout 2>stderr
  rc=$?
  expect_rc 0
  expect_contains "$(cat stdout)" "end of input"
}

test_report_into_device_copies_is_written_in_place() {
  if [[ $(id -u) != 0 ]] || ! mknod full c 1 7 2>/dev/null || ! mknod null c 1 3 2>/dev/null; then
    echo "  (skipped: mknod needs root)"
    return 0
  fi
  run_air --no-python --cpu-ranks 1 --summary null true
  expect_rc 0
  [[ -c null ]] || fail "--summary on a copy of /dev/null replaced the device: $(ls -l null)"
  run_air --no-python --cpu-ranks 1 --summary full true
  expect_rc 125
  expect_contains "$err" "summary not written"
  expect_contains "$err" "No space left on device"
  [[ -c full ]] || fail "--summary on a copy of /dev/full replaced the device: $(ls -l full)"
  run_air --no-python --cpu-ranks 1 --junit full true
  expect_rc 125
  [[ -c full ]] || fail "--junit on a copy of /dev/full replaced the device"
}

test_report_into_a_fifo_reaches_its_reader() {
  mkfifo collector.fifo
  cat collector.fifo >collected.json &
  local reader=$!
  run_air --no-python --cpu-ranks 1 --summary collector.fifo true
  expect_rc 0
  # A FIFO replaced by a file leaves its reader waiting for a writer forever.
  wait_for "! pid_alive $reader" 10 || { kill "$reader"; fail "the FIFO's reader got nothing"; }
  wait "$reader" 2>/dev/null
  [[ -p collector.fifo ]] || fail "the FIFO was replaced by a regular file"
  expect_eq "$(json_get collected.json 'd["outcome"]["status"]')" succeeded
}

test_report_into_a_fifo_nobody_reads_is_an_error_not_a_hang() {
  mkfifo unread.fifo
  timeout -s KILL 30 "$AIR_RUN" --no-python --cpu-ranks 1 --summary unread.fifo true >stdout 2>stderr
  rc=$?
  expect_rc 125
  expect_contains "$(cat stderr)" "no process reads this FIFO"
  [[ -p unread.fifo ]] || fail "the FIFO was replaced by a regular file"
}

test_report_through_symlinks() {
  # A link to air-run's own stdout: the summary goes down stdout, the link stays.
  ln -s /proc/self/fd/1 to-stdout
  run_air --no-python --cpu-ranks 1 --summary to-stdout true
  expect_rc 0
  [[ -L to-stdout ]] || fail "the symlink to /proc/self/fd/1 was replaced"
  expect_contains "$out" '"schema_version"'
  # A link to a regular file: the file it points to is replaced, the link stays.
  mkdir reports
  echo old >reports/summary.json
  ln -s reports/summary.json summary-link.json
  run_air --no-python --cpu-ranks 1 --summary summary-link.json true
  expect_rc 0
  [[ -L summary-link.json ]] || fail "the symlink to a regular file was replaced"
  expect_eq "$(json_get reports/summary.json 'd["outcome"]["status"]')" succeeded
}

test_json_on_a_full_device_is_125() {
  "$AIR_RUN" --no-python --cpu-ranks 1 --json true >/dev/full 2>stderr
  rc=$?
  expect_rc 125
  expect_contains "$(cat stderr)" "No space left on device"
}

test_json_into_a_closed_pipe_is_125_not_sigpipe() {
  # The reader is gone before the JSON comes: EPIPE, reported, not death by SIGPIPE (141).
  "$AIR_RUN" --no-python --cpu-ranks 1 --json sh -c 'sleep 0.5' 2>stderr | true
  rc=${PIPESTATUS[0]}
  expect_rc 125
  expect_contains "$(cat stderr)" "Broken pipe"
}

test_github_step_summary_on_a_full_device_is_125() {
  GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY=/dev/full run_air --no-python --cpu-ranks 1 true
  expect_rc 125
  expect_contains "$err" "GITHUB_STEP_SUMMARY not written"
}

# A rank that prints a NUL byte in the middle of a line, then a clipboard
# write (OSC 52) and a window title (OSC 0), and fails; rank 0 waits to be
# stopped. Only rank 0's output is shown on the console (--ranks 0).
hostile_rank='if [ "$RANK" = 1 ]; then printf "before\000after\n"; printf "\033]52;c;aGk=\007\033]0;pwned\007\n"; exit 3; fi; exec sleep 30'

test_nul_and_escapes_from_a_rank_stay_out_of_the_report() {
  mkdir logs
  # On a terminal: the report is what air-run writes to it.
  script -qfec "$(printf '%q ' "$AIR_RUN" --no-python --cpu-ranks 2 --ranks 0 --log-dir logs \
    --summary summary.json --grace-period 1s sh -c "$hostile_rank")" /dev/null >tty.txt 2>&1
  local text
  text=$(tr '\000\033\007' '@EB' <tty.txt)
  expect_contains "$text" "exit code 3"
  expect_contains "$text" "after"
  expect_contains "$text" "log: "
  expect_contains "$text" "stopped by air-run: rank 0"
  expect_not_contains "$text" "E]52;"
  expect_not_contains "$text" "E]0;pwned"
  expect_not_contains "$text" "@"
  # The summary: no control character in the last lines or the error texts.
  local last
  last=$(json_get summary.json 'repr(d["ranks"][1]["last_line"]) + " " + repr(d["ranks"][1]["error"]["traceback"])')
  expect_contains "$last" "after"
  expect_not_contains "$last" "\\x1b"
  expect_not_contains "$last" "\\x00"
  expect_not_contains "$last" "\\x07"
}

test_nul_and_escapes_from_a_rank_stay_out_of_github_reports() {
  # The rank's live output (NUL and all) is its own: stdout is read with tr, not $(...).
  GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY=$PWD/step.md "$AIR_RUN" --no-python --cpu-ranks 2 --grace-period 1s \
    sh -c "$hostile_rank" >stdout 2>stderr
  rc=$?
  expect_rc 3
  local annotation
  annotation=$(grep -a '^::error' stdout | tr '\000\033\007' '@EB')
  expect_contains "$annotation" "before?after"
  expect_not_contains "$annotation" "@"
  expect_not_contains "$annotation" "E]52"
  expect_contains "$(tr '\000\033' '@E' <step.md)" "exit code 3"
  expect_not_contains "$(tr '\000\033' '@E' <step.md)" "@"
  expect_not_contains "$(tr '\000\033' '@E' <step.md)" "E]"
  # The human report on stderr is whole past the NUL byte.
  expect_contains "$(tr '\000' '@' <stderr)" "stopped by air-run: rank 0"
}

run_tests
