#!/usr/bin/env bash
# --max-restarts: the worker group restarts after a failure (one node and two
# local agents), TORCHELASTIC_RESTART_COUNT counts, every attempt's root cause
# reaches the summary; an interrupt during a later attempt ends everything.
source "$(dirname "$0")/lib.sh"

# A rank that fails (exit 3) on attempt 0 when it is rank 1, and succeeds later.
write_flaky_rank() {
  cat >rank.sh <<'SH'
#!/bin/sh
echo "attempt $TORCHELASTIC_RESTART_COUNT of max $TORCHELASTIC_MAX_RESTARTS port $MASTER_PORT" >> "seen.$RANK"
if [ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  sleep 0.5 # every rank has written its line before the group is torn down
  echo "rank 1 gives up" >&2
  exit 3
fi
exit 0
SH
  chmod +x rank.sh
}

json() { # json FILE EXPR: one value from a JSON file
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

test_one_node_restarts_after_a_failure() {
  write_flaky_rank
  run_air --cpu-ranks 2 --max-restarts 2 --summary s.json --no-python ./rank.sh
  expect_rc 0
  expect_eq "$(head -1 seen.1)" "attempt 0 of max 2 port $(sed -n 's/.*port //p' seen.0 | head -1)"
  expect_eq "$(wc -l <seen.0 | tr -d ' ')" 2
  expect_contains "$(sed -n 2p seen.1)" "attempt 1 of max 2"
  # a fresh master port for the second attempt
  local p0 p1
  p0=$(sed -n '1s/.*port //p' seen.0)
  p1=$(sed -n '2s/.*port //p' seen.0)
  [[ $p0 != "$p1" ]] || fail "attempt 1 reused master port $p0"
  expect_contains "$err" "restarting the worker group: attempt 1 (restart 1 of 2, TORCHELASTIC_RESTART_COUNT=1"
  expect_contains "$err" "succeeded after"
  expect_contains "$err" "succeeded after"
  expect_contains "$err" "and 1 restart: 2 ranks exited 0"
  expect_contains "$err" "attempt 0 failed after"
  expect_contains "$err" "restart 1 of 2 followed"
  expect_eq "$(json s.json 'd["outcome"]["restarts"]')" 1
  expect_eq "$(json s.json 'd["outcome"]["attempts"][0]["reason"]')" "rank 1 exited with exit code 3"
  expect_eq "$(json s.json 'd["outcome"]["attempts"][0]["root_cause_rank"]')" 1
  expect_eq "$(json s.json 'd["outcome"]["attempts"][1]["exit_code"]')" 0
  expect_eq "$(json s.json 'd["launch"]["max_restarts"]')" 2
  if /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
    /usr/bin/python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), cls=jsonschema.Draft202012Validator)' \
      s.json "$AIR_SOURCE_DIR/docs/summary.schema.json" || fail "summary does not validate"
  fi
}

# A hang is a failure of the group: with a restart left the hung attempt is
# restarted, and --on-hang defaults to stop with --max-restarts. Before, the
# run ended hung (124) with "restarts: 0".
test_a_hang_with_restarts_left_is_restarted() {
  cat >hangs_once.sh <<'SH'
#!/bin/sh
echo "attempt $TORCHELASTIC_RESTART_COUNT up"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exec sleep 60; fi
echo "attempt $TORCHELASTIC_RESTART_COUNT done"
SH
  chmod +x hangs_once.sh
  run_air --cpu-ranks 2 --max-restarts 1 --hang-timeout 1s --grace-period 2s --summary s.json --no-python ./hangs_once.sh
  expect_rc 0
  expect_contains "$err" "restarting the worker group: attempt 1 (restart 1 of 1"
  expect_contains "$out" "attempt 1 done"
  expect_contains "$err" "attempt 0 hung after"
  expect_eq "$(json s.json 'd["outcome"]["restarts"]')" 1
  expect_eq "$(json s.json 'd["outcome"]["attempts"][0]["status"]')" "hung"
  expect_eq "$(json s.json 'd["outcome"]["status"]')" "succeeded"
  # Without restarts the default stays report: the run goes on and ends as its ranks do.
  run_air --dry-run --cpu-ranks 2 --no-python true
  expect_contains "$out" "on_hang = report  (default)"
  run_air --dry-run --cpu-ranks 2 --max-restarts 2 --no-python true
  expect_contains "$out" "on_hang = stop  (default, max_restarts 2: hangs restart)"
}

test_restarts_run_out() {
  cat >rank.sh <<'SH'
#!/bin/sh
[ "$RANK" = 0 ] && exit $((TORCHELASTIC_RESTART_COUNT + 4))
exit 0
SH
  chmod +x rank.sh
  run_air --cpu-ranks 2 --max-restarts 2 --summary s.json --no-python ./rank.sh
  # the last attempt's code; every attempt's root cause is kept
  expect_rc 6
  expect_eq "$(json s.json 'd["outcome"]["restarts"]')" 2
  expect_eq "$(json s.json '[a["exit_code"] for a in d["outcome"]["attempts"]]')" "[4, 5, 6]"
  expect_contains "$err" "failed after"
  expect_contains "$err" "and 2 restarts (exit code 6): rank 0 exited with exit code 6"
  expect_contains "$err" "attempt 0 failed after"
  expect_contains "$err" "attempt 1 failed after"
  expect_not_contains "$err" "attempt 2 failed after" # the last attempt is the report's headline
}

test_no_restart_without_the_flag() {
  write_flaky_rank
  run_air --cpu-ranks 2 --summary s.json --no-python ./rank.sh
  expect_rc 3
  expect_eq "$(wc -l <seen.0 | tr -d ' ')" 1
  expect_eq "$(json s.json 'd["outcome"]["restarts"]')" 0
  expect_not_contains "$err" "restarting"
}

test_timeout_covers_the_whole_run() {
  cat >rank.sh <<'SH'
#!/bin/sh
sleep 0.6
exit 1
SH
  chmod +x rank.sh
  local start=$SECONDS
  run_air --cpu-ranks 1 --max-restarts 50 --timeout 2s --no-python ./rank.sh
  expect_rc 124
  expect_contains "$err" "timed out after 2s (the whole run"
  ((SECONDS - start < 6)) || fail "took $((SECONDS - start))s"
}

test_ctrl_c_during_attempt_2_ends_everything() {
  cat >rank.sh <<'SH'
#!/bin/sh
echo $$ >> pids
echo "$TORCHELASTIC_RESTART_COUNT" >> attempts
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 0 ] && exit 7
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exec sleep 120
touch attempt2.started
exec sleep 120
SH
  chmod +x rank.sh
  env --default-signal=INT "$AIR_RUN" --cpu-ranks 2 --max-restarts 3 --summary s.json --no-python ./rank.sh >out 2>err &
  air=$!
  wait_for "[[ -f attempt2.started ]]" 10 || fail "attempt 2 never started"
  sleep 0.3
  kill -INT "$air"
  finish_air 10
  expect_eq "$rc" 130
  expect_eq "$(json s.json 'd["outcome"]["status"]')" interrupted
  expect_eq "$(json s.json 'd["outcome"]["restarts"]')" 1
  rank_pids=$(cat pids)
  expect_ranks_gone
  # no third attempt
  expect_eq "$(sort -u attempts | tr '\n' ' ')" "0 1 "
}

# One number per attempt, from 0: the console, the report, the summary, the
# --log-dir files and torchrun's -r/-t folders all call the retry "attempt 1".
test_attempts_are_numbered_alike_everywhere() {
  cat >rank.sh <<'SH'
#!/bin/sh
echo "out of attempt $TORCHELASTIC_RESTART_COUNT"
echo "$TORCHELASTIC_ERROR_FILE" >"errfile.$TORCHELASTIC_RESTART_COUNT"
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3
exit 0
SH
  chmod +x rank.sh
  run_air --cpu-ranks 1 --max-restarts 1 --run-id same --log-dir logs -r 1 --summary s.json --no-python ./rank.sh
  expect_rc 0
  expect_contains "$err" "restarting the worker group: attempt 1 (restart 1 of 1"
  expect_contains "$err" "attempt 0 failed after"
  expect_eq "$(json s.json '[a["attempt"] for a in d["outcome"]["attempts"]]')" "[0, 1]"
  expect_eq "$(head -1 logs/same/rank0.log)" "out of attempt 0"
  expect_eq "$(head -1 logs/same/rank0.attempt1.log)" "out of attempt 1"
  local dir
  dir=$(echo logs/same_*) # torchrun's layout: the -r folder beside the run's, not in it
  [[ -d $dir ]] || { fail "no -r folder logs/same_*"; return; }
  expect_eq "$(cat "$dir/attempt_0/0/stdout.log")" "out of attempt 0"
  expect_eq "$(cat "$dir/attempt_1/0/stdout.log")" "out of attempt 1"
  expect_contains "$(cat errfile.1)" "/attempt_1/0/error.json"
}

# Two local agents: static rendezvous with --max-restarts.

test_two_nodes_restart_together() {
  PORT=$(free_port_pair)
  write_flaky_rank
  start_node 0 --cpu-ranks 1 --max-restarts 1 --summary s0.json --no-python ./rank.sh
  start_node 1 --cpu-ranks 1 --max-restarts 1 --summary s1.json --no-python ./rank.sh
  wait
  expect_eq "$(cat node0.rc)" 0
  expect_eq "$(cat node1.rc)" 0
  # both nodes ran two attempts with the same fresh master port
  expect_eq "$(wc -l <seen.0 | tr -d ' ')" 2
  expect_eq "$(wc -l <seen.1 | tr -d ' ')" 2
  expect_eq "$(sed -n 2p seen.0)" "$(sed -n 2p seen.1)"
  expect_eq "$(json s0.json 'd["outcome"]["restarts"]')" 1
  expect_eq "$(json s1.json 'd["outcome"]["attempts"][0]["reason"]')" "rank 1 exited with exit code 3"
  expect_contains "$(json s0.json 'd["outcome"]["attempts"][0]["reason"]')" "stopped because node 1"
  expect_contains "$(cat node0.err)" "restarting the worker group: attempt 1 (restart 1 of 1"
}

test_two_nodes_interrupt_in_attempt_2_ends_both() {
  PORT=$(free_port_pair)
  cat >rank.sh <<'SH'
#!/bin/sh
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 0 ] && exit 9
touch "attempt$TORCHELASTIC_RESTART_COUNT.$RANK"
exec sleep 120
SH
  chmod +x rank.sh
  start_node 0 --cpu-ranks 1 --max-restarts 3 --no-python ./rank.sh
  start_node 1 --cpu-ranks 1 --max-restarts 3 --no-python ./rank.sh
  # attemptK.R: rank R runs in attempt K+1 (TORCHELASTIC_RESTART_COUNT=K).
  wait_for "[[ -f attempt1.0 && -f attempt1.1 ]]" 15 || fail "attempt 2 never started on both nodes"
  local agent
  agent=$(pgrep -P "$node1_pid" -f 'air-run' | head -1)
  [[ -n $agent ]] || { fail "no agent process for node 1"; return; }
  kill -TERM "$agent"
  wait
  expect_eq "$(cat node1.rc)" 143
  expect_eq "$(cat node0.rc)" 143
  expect_not_contains "$(cat node0.err)" "attempt 2 ("
}

run_tests
