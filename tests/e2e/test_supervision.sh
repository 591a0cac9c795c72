#!/usr/bin/env bash
# The built binary supervising real fixture processes: every exit code that
# docs/supervision.md lists, the rank environment, console prefixes, signals, kill -9.
source "$(dirname "$0")/lib.sh"

test_all_ranks_succeed_exit_0() {
  run_air -n 4 --cpu-ranks 4 --no-python "$F/exit_with" 0
  expect_rc 0
}

test_failing_rank_code_is_air_run_code() {
  # rank 1 exits 3 at once; the others sleep and must be stopped
  cat >rank.sh <<'SH'
#!/bin/sh
if [ "$RANK" = 1 ]; then exit 3; fi
exec sleep 60
SH
  chmod +x rank.sh
  local start=$SECONDS
  run_air --cpu-ranks 3 --grace-period 5s --no-python ./rank.sh
  expect_rc 3
  expect_contains "$err" "rank 1"
  ((SECONDS - start < 10)) || fail "teardown took $((SECONDS - start))s"
}

test_rank_killed_by_signal_is_128_plus_n() {
  cat >rank.sh <<'SH'
#!/bin/sh
if [ "$RANK" = 0 ]; then kill -SEGV $$; fi
exec sleep 60
SH
  chmod +x rank.sh
  run_air --cpu-ranks 2 --no-python ./rank.sh
  expect_rc 139
  expect_contains "$err" "SIGSEGV"
}

test_timeout_is_124() {
  run_air --cpu-ranks 2 --timeout 1 --grace-period 1s --no-python sleep 60
  expect_rc 124
  expect_contains "$err" "timed out"
}

test_not_found_is_127() {
  run_air --no-python ./does-not-exist
  expect_rc 127
  run_air /nonexistent/train.py
  expect_rc 127
}

test_not_executable_is_126() {
  echo 'echo hi' >not_exec.sh
  chmod -x not_exec.sh
  run_air --no-python ./not_exec.sh
  expect_rc 126
}

test_missing_interpreter_is_127() {
  touch train.py
  run_air --python /nonexistent/python3 train.py
  expect_rc 127
  expect_contains "$err" "/nonexistent/python3"
}

test_rank_environment_parity() {
  cat >env.sh <<'SH'
#!/bin/sh
env > "env.$RANK"
SH
  chmod +x env.sh
  RANK=99 OMP_NUM_THREADS= run_air --cpu-ranks 3 --master-port 0 --env EXTRA=x --run-id myrun --no-python ./env.sh
  expect_rc 0
  local r
  for r in 0 1 2; do
    local e
    e=$(cat "env.$r")
    expect_contains "$e" "RANK=$r"
    expect_contains "$e" "LOCAL_RANK=$r"
    expect_contains "$e" "WORLD_SIZE=3"
    expect_contains "$e" "LOCAL_WORLD_SIZE=3"
    expect_contains "$e" "GROUP_RANK=0"
    expect_contains "$e" "GROUP_WORLD_SIZE=1"
    expect_contains "$e" "ROLE_RANK=$r"
    expect_contains "$e" "ROLE_WORLD_SIZE=3"
    expect_contains "$e" "ROLE_NAME=default"
    expect_contains "$e" "MASTER_ADDR=127.0.0.1"
    expect_contains "$e" "MASTER_PORT="
    expect_contains "$e" "TORCHELASTIC_RUN_ID=myrun"
    expect_contains "$e" "TORCHELASTIC_RESTART_COUNT=0"
    expect_contains "$e" "TORCHELASTIC_MAX_RESTARTS=0"
    expect_contains "$e" "TORCHELASTIC_USE_AGENT_STORE=False"
    expect_contains "$e" "TORCHELASTIC_ERROR_FILE="
    expect_contains "$e" "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"
    expect_contains "$e" "PYTHONUNBUFFERED=1"
    expect_contains "$e" "NODE_RANK=0"
    expect_contains "$e" "NUM_NODES=1"
    expect_contains "$e" "AIR_RUN_ID=myrun"
    expect_contains "$e" "AIR_RESULT_FILE="
    expect_contains "$e" "AIR_ACCELERATOR_TYPE=CPU"
    expect_contains "$e" "AIR_NUM_ACCELERATORS=3"
    expect_contains "$e" "EXTRA=x"
    expect_not_contains "$e" "RANK=99"
  done
  # MASTER_PORT is one free port shared by every rank
  local p0 p2
  p0=$(grep '^MASTER_PORT=' env.0)
  p2=$(grep '^MASTER_PORT=' env.2)
  expect_eq "$p0" "$p2"
  [[ $p0 != "MASTER_PORT=0" ]] || fail "port 0 handed to ranks"
  # each rank has its own result and error file
  [[ $(grep '^AIR_RESULT_FILE=' env.0) != $(grep '^AIR_RESULT_FILE=' env.1) ]] || fail "shared result file"
}

test_omp_threads_kept_when_set() {
  printf '#!/bin/sh\necho "omp=$OMP_NUM_THREADS"\n' >omp.sh
  chmod +x omp.sh
  OMP_NUM_THREADS=7 run_air --cpu-ranks 2 --no-python ./omp.sh
  expect_contains "$out" "[rank0]: omp=7"
  env -u OMP_NUM_THREADS "$AIR_RUN" --cpu-ranks 2 --no-python ./omp.sh >o 2>e
  expect_contains "$(cat o)" "[rank1]: omp=1"
  expect_contains "$(cat e)" "OMP_NUM_THREADS=1"
}

test_console_prefixes_streams_and_filter() {
  printf '#!/bin/sh\necho "out $RANK"\necho "err $RANK" >&2\nprintf "partial $RANK"\n' >p.sh
  chmod +x p.sh
  run_air --cpu-ranks 3 --ranks 0,2 --log-dir logs --no-python ./p.sh
  expect_rc 0
  expect_contains "$out" "[rank0]: out 0"
  expect_contains "$out" "[rank2]: out 2"
  expect_contains "$out" "[rank2]: partial 2"
  expect_not_contains "$out" "err 0"
  expect_contains "$err" "[rank0]: err 0"
  expect_not_contains "$out$err" "out 1"
  expect_contains "$(cat logs/*/rank1.log)" "out 1"
  expect_contains "$(cat logs/*/rank1.log)" "err 1"
}

test_log_holds_the_ranks_bytes_exactly() {
  # A 3 MB line without a newline: the console shows it in 1 MiB pieces, the
  # log keeps the rank's bytes as they were, and so does a last line without a newline.
  "$F/long_line" 3000000 >expected
  run_air --cpu-ranks 1 --run-id long --log-dir logs --no-python "$F/long_line" 3000000
  expect_rc 0
  cmp expected logs/long/rank0.log >cmp.txt 2>&1 || fail "rank0.log differs from the rank's output: $(cat cmp.txt)"
  expect_eq "$(grep -c '^aaaa' stdout)" "3" # the console's view: 1 MiB pieces
  printf 'first\nno newline' >expected
  run_air --cpu-ranks 1 --run-id partial --log-dir logs --no-python printf 'first\nno newline'
  expect_rc 0
  cmp expected logs/partial/rank0.log >cmp.txt 2>&1 || fail "rank0.log differs from the rank's output: $(cat cmp.txt)"
}

test_flood_does_not_interleave() {
  run_air --cpu-ranks 4 --no-python "$F/spew" 4
  expect_rc 0
  # every stdout line is a whole prefixed line
  local bad
  bad=$(grep -cvE '^\[rank[0-3]\]: ' "$TESTDIR/stdout")
  expect_eq "$bad" "0"
  local lines
  lines=$(wc -l <"$TESTDIR/stdout")
  ((lines > 1000)) || fail "only $lines lines"
}

test_sigterm_forwarded_exit_143() {
  "$AIR_RUN" --cpu-ranks 2 --grace-period 5s --no-python sh -c 'echo "$$" > pid.$RANK; exec sleep 60' >o 2>e &
  local air=$!
  wait_for '[[ -s pid.0 && -s pid.1 ]]' 10 || fail "ranks did not start"
  kill -TERM $air
  wait $air
  rc=$?
  expect_rc 143
  local p
  for p in $(cat pid.0 pid.1); do
    ! pid_alive "$p" || fail "rank pid $p survived SIGTERM of air-run"
  done
}

test_sigint_exit_130() {
  # a non-interactive shell starts background jobs with SIGINT ignored; restore it as a terminal would
  env --default-signal=INT "$AIR_RUN" --cpu-ranks 2 --grace-period 5s --no-python sh -c 'echo "$$" > pid.$RANK; exec sleep 60' >o 2>e &
  local air=$!
  wait_for '[[ -s pid.0 && -s pid.1 ]]' 10 || fail "ranks did not start"
  kill -INT $air
  wait $air
  rc=$?
  expect_rc 130
  local p
  for p in $(cat pid.0 pid.1); do
    wait_for "! pid_alive $p" 5 || fail "rank pid $p survived SIGINT of air-run"
  done
}

test_kill_9_of_air_run_leaves_no_rank() {
  "$AIR_RUN" --cpu-ranks 3 --no-python sh -c 'echo "$$" > pid.$RANK; exec sleep 60' >o 2>e &
  local air=$!
  wait_for '[[ -s pid.0 && -s pid.1 && -s pid.2 ]]' 10 || fail "ranks did not start"
  kill -9 $air
  wait $air 2>/dev/null
  local p
  for p in $(cat pid.0 pid.1 pid.2); do
    wait_for "! pid_alive $p" 5 || fail "rank pid $p survived kill -9 of air-run"
  done
}

test_grandchildren_die_at_teardown() {
  cat >gc.sh <<'SH'
#!/bin/sh
sleep 60 &
echo $! > "gc.$RANK"
if [ "$RANK" = 1 ]; then sleep 0.3; exit 5; fi
wait
SH
  chmod +x gc.sh
  run_air --cpu-ranks 2 --grace-period 2s --no-python ./gc.sh
  expect_rc 5
  local p
  for p in $(cat gc.0 gc.1); do
    wait_for "! pid_alive $p" 5 || fail "grandchild $p survived teardown"
  done
}

test_rank_ignoring_sigterm_is_killed_after_grace() {
  cat >r.sh <<'SH'
#!/bin/sh
if [ "$RANK" = 0 ]; then sleep 0.3; exit 1; fi
exec "$F/ignore_term"
SH
  chmod +x r.sh
  local start=$SECONDS
  F=$F run_air --cpu-ranks 2 --grace-period 1s --no-python ./r.sh
  expect_rc 1
  ((SECONDS - start < 8)) || fail "took $((SECONDS - start))s"
}

test_no_fd_leaks_into_ranks() {
  run_air --cpu-ranks 2 --no-python "$F/list_fds"
  expect_rc 0
  local fds
  fds=$(echo "$out" | sed -n 's/^\[rank0\]: //p' | sort -n | tr '\n' ' ')
  expect_eq "$fds" "0 1 2 "
}

test_more_ranks_than_the_soft_fd_limit_allows() {
  # 60 ranks need ~180 pipe ends at start, over a soft limit of 64: air-run
  # lifts its own limit and gives each rank the inherited 64 back.
  (ulimit -Sn 64 && exec "$AIR_RUN" --cpu-ranks 60 --no-python sh -c 'ulimit -Sn') >stdout 2>stderr
  rc=$?
  expect_rc 0
  expect_eq "$(grep -c '^\[rank[0-9]*\]: 64$' stdout)" 60
}

run_tests
