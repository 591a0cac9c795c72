#!/usr/bin/env bash
# No process outlives air-run: kill -9 or a crash of air-run, or a successful
# run, with ranks that are shell wrappers, grandchildren that ignore SIGTERM,
# a grandchild that called setsid() and Python worker processes. Every process
# a test starts carries a unique marker in its argv; the test counts the live
# ones (zombies have no argv) and kills any it finds, so a failure leaks nothing.
source "$(dirname "$0")/lib.sh"

MARK=""
new_mark() { MARK="air-orphan-$$-$RANDOM-$current"; }

# marked: the live processes whose argv holds $MARK.
marked() { pgrep -f -- "$MARK" | tr '\n' ' '; }
count_marked() { pgrep -c -f -- "$MARK"; }

# expect_none_left SECONDS WHAT: no marked process after at most SECONDS.
expect_none_left() {
  if ! wait_for "[[ \$(count_marked) == 0 ]]" "$1"; then
    local left
    left=$(marked)
    ps -o pid,ppid,pgid,sid,stat,args -p "$(echo $left | tr ' ' ',')" >left.txt 2>&1
    fail "$2: $(count_marked) process(es) left: $(cat left.txt)"
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null
  fi
}

# A rank that is a wrapper: three grandchildren (one plain, one that ignores
# SIGTERM, one that ignores it in a session of its own), then waits. Rank 0
# also starts Python with two worker processes (DataLoader-style).
write_wrapper() {
  cat >rank.sh <<SH
#!/bin/sh
"$F/sleep_forever" "$MARK" >/dev/null &
"$F/ignore_term" "$MARK" >/dev/null &
setsid "$F/ignore_term" "$MARK" >/dev/null &
if [ "\$RANK" = 0 ] && [ -x "$TORCH_PYTHON" ]; then
  "$TORCH_PYTHON" -c 'import multiprocessing as m, time
p = m.Pool(2); p.map(abs, [1, 2]); time.sleep(600)' "$MARK" &
fi
wait
SH
  chmod +x rank.sh
}

# start_wrapped RANKS [ENV...]: air-run with RANKS wrapper ranks in the
# background ($air); returns once every process has started. The ranks are
# CPU ranks on any machine (--accelerator-type CPU): on a GPU machine
# --cpu-ranks would give way to one rank per GPU found.
start_wrapped() {
  local ranks=$1
  shift
  write_wrapper
  env "$@" "$AIR_RUN" --accelerator-type CPU -n "$ranks" --grace-period 1s --no-python ./rank.sh "$MARK" >stdout 2>stderr &
  air=$!
  # per rank: the wrapper and three grandchildren; rank 0: Python and 2 workers
  local want=$((ranks * 4 + 1)) # + air-run itself
  [[ -x $TORCH_PYTHON ]] && want=$((want + 3))
  # A cold interpreter can take long to start on a fresh machine: the bound is
  # generous, and a miss lists what did start, so the report says which kind lagged.
  if ! wait_for "[[ \$(count_marked) -ge $want ]]" 90; then
    local pids
    pids=$(marked | xargs | tr ' ' ',')
    fail "not everything started: $(count_marked) of $want: $(ps -o pid,ppid,args -p "${pids:-$air}" 2>&1 | cut -c1-150 | paste -sd ';' -); rank output: $(tail -5 stdout | paste -sd ';' -); $(tail -3 stderr)"
    kill -KILL "$air" $(marked) 2>/dev/null
    return 1
  fi
}

# expect_run_folder_removed: the run's private folder (in ./tmp, the run's
# TMPDIR) was there during the run and the watchdog removed it after air-run died.
expect_run_folder_removed() {
  wait_for '! compgen -G "tmp/air-run-*" >/dev/null' 10 ||
    fail "the run folder is left in \$TMPDIR after $1: $(ls tmp)"
}

test_kill_9_leaves_no_descendant() {
  new_mark
  mkdir tmp
  start_wrapped 2 TMPDIR="$PWD/tmp" || return
  compgen -G "tmp/air-run-*" >/dev/null || fail "no run folder in TMPDIR during the run: '$(ls tmp)'"
  kill -9 "$air"
  finish_air 5
  expect_none_left 10 "after kill -9 of air-run"
  expect_run_folder_removed "kill -9 of air-run"
}

test_crash_of_air_run_leaves_no_descendant() {
  # SIGABRT stands for a crash (abort, core dump). SIGQUIT is not one: air-run
  # takes it as a request for the ranks' stacks and carries on.
  new_mark
  mkdir tmp
  start_wrapped 2 TMPDIR="$PWD/tmp" || return
  kill -ABRT "$air"
  finish_air 5
  expect_none_left 10 "after air-run crashed (SIGABRT)"
  expect_run_folder_removed "air-run crashed"
}

test_kill_9_of_air_runs_whole_group_leaves_no_descendant() {
  # CI runners and `timeout -s KILL` kill a job's whole process group: the
  # watchdog, in a session of its own, is not in it and still ends the ranks.
  new_mark
  write_wrapper
  setsid "$AIR_RUN" --accelerator-type CPU -n 2 --grace-period 1s --no-python ./rank.sh "$MARK" >stdout 2>stderr &
  local want=$((2 * 4 + 1))
  [[ -x $TORCH_PYTHON ]] && want=$((want + 3))
  if ! wait_for "[[ \$(count_marked) -ge $want ]]" 30; then
    fail "not everything started: $(count_marked) of $want; $(tail -3 stderr)"
    kill -KILL $(marked) 2>/dev/null
    return 1
  fi
  air=$(pgrep -f -- "$AIR_RUN --accelerator-type CPU -n 2 --grace-period 1s --no-python ./rank.sh $MARK" | head -1)
  [[ -n $air ]] || { fail "air-run's pid not found"; kill -KILL $(marked) 2>/dev/null; return 1; }
  kill -KILL -- "-$air" # air-run leads its group (setsid)
  expect_none_left 10 "after kill -9 of air-run's process group"
}

test_kill_9_without_cgroup_leaves_no_descendant() {
  # Process groups, the subreaper and the watchdog alone: the setsid
  # grandchild is caught because air-run recorded it (it scans once a second).
  new_mark
  start_wrapped 2 AIR_RUN_CGROUP=off || return
  sleep 1.5
  kill -9 "$air"
  finish_air 5
  expect_none_left 10 "after kill -9 of air-run without a cgroup"
}

test_successful_run_leaves_no_background_job() {
  new_mark
  cat >rank.sh <<SH
#!/bin/sh
"$F/sleep_forever" "$MARK" >/dev/null 2>&1 &
"$F/ignore_term" "$MARK" >/dev/null 2>&1 &
setsid "$F/ignore_term" "$MARK" >/dev/null 2>&1 &
sleep 0.3
exit 0
SH
  chmod +x rank.sh
  for cgroup in on off; do
    AIR_RUN_CGROUP=$cgroup run_air --accelerator-type CPU -n 2 --grace-period 1s --no-python ./rank.sh
    expect_rc 0
    # at once: nothing may still be running when air-run has exited
    expect_none_left 0 "cgroup $cgroup: background processes outlived a successful run"
  done
}

test_background_job_beside_a_longer_rank_lives_to_the_end() {
  # Rank 0 leaves a background job that keeps its stdout and exits; rank 1
  # runs on well past the 2 s air-run gives a finished rank's pipes to close.
  # The job must live to the end of the run like any other leftover, then get
  # SIGTERM (it notes that in a file) and be counted.
  new_mark
  cat >rank.sh <<SH
#!/bin/sh
if [ "\$RANK" = 0 ]; then
  "$F/note_term" "\$PWD/termed" "$MARK" &
  sleep 0.2
  touch rank0-done
  exit 0
fi
exec "$F/wait_for_file" "\$PWD/go" 0
SH
  chmod +x rank.sh
  for cgroup in on off; do
    rm -f rank0-done go termed
    AIR_RUN_CGROUP=$cgroup "$AIR_RUN" --accelerator-type CPU -n 2 --grace-period 5s --no-python ./rank.sh >stdout 2>stderr &
    air=$!
    wait_for "[[ -e rank0-done ]]" 30 || fail "cgroup $cgroup: rank 0 did not finish"
    sleep 3 # past the 2 s a finished rank's pipes get
    [[ $(count_marked) == 1 ]] || fail "cgroup $cgroup: rank 0's background job was ended while rank 1 still ran"
    touch go
    finish_air 30
    expect_rc 0
    expect_none_left 0 "cgroup $cgroup: the background job outlived the run"
    [[ -e termed ]] || fail "cgroup $cgroup: the background job got no SIGTERM before the end"
    # Named: its pid, its name and its command line.
    expect_contains "$(cat stderr)" "air-run: ended 1 process that the ranks left running: pid "
    expect_contains "$(cat stderr)" " note_term ($F/note_term $PWD/termed air-orphan-" # cut at 200 bytes
    expect_contains "$(cat stdout)" "[rank0]: ready"
  done
}

# write_hopper_rank: rank.sh starts a pid-hopping daemon (setsid, ignores
# SIGTERM, forks and lets its parent exit every 50 ms) and waits until it has
# told its session id; then it exits 0 (argument "exit") or sleeps on.
write_hopper_rank() {
  cat >rank.sh <<SH
#!/bin/sh
"$F/pid_hopper" "\$PWD/sid.\$RANK" "$MARK" >/dev/null 2>&1
"$F/wait_for_file" "\$PWD/sid.\$RANK" 0
sleep 1.5 # a scan of air-run's sees the daemon
[ "\$1" = exit ] && exit 0
exec "$F/sleep_forever" "$MARK"
SH
  chmod +x rank.sh
}

# hoppers_alive: how many of the daemons still beat (touch their sid.* file
# every 50 ms). A scan of /proc (pgrep, ps) on a busy host can miss a process
# whose pid changes that often; the file's time cannot.
hoppers_alive() {
  local f n=0 before
  for f in sid.*; do
    before=$(stat -c %y "$f")
    sleep 0.3
    [[ $(stat -c %y "$f") != "$before" ]] && n=$((n + 1))
  done
  echo "$n"
}

test_pid_hopping_daemon_ends_with_a_run_without_cgroup() {
  new_mark
  write_hopper_rank
  AIR_RUN_CGROUP=off run_air --accelerator-type CPU -n 2 --grace-period 1s --no-python ./rank.sh exit
  expect_rc 0
  local alive
  alive=$(hoppers_alive)
  [[ $alive == 0 ]] || fail "$alive pid-hopping daemon(s) outlived a successful run without a cgroup"
  expect_contains "$err" "that the ranks left running"
  for f in sid.*; do kill -KILL -- "-$(cat "$f")" 2>/dev/null; done # a failure leaks nothing
}

test_pid_hopping_daemon_ends_after_kill_9_without_cgroup() {
  new_mark
  write_hopper_rank
  AIR_RUN_CGROUP=off "$AIR_RUN" --accelerator-type CPU -n 2 --grace-period 1s --no-python ./rank.sh >stdout 2>stderr &
  air=$!
  if ! wait_for "[[ \$(pgrep -c -f -- \"sleep_forever $MARK\") == 2 ]]" 30; then
    fail "the ranks did not start: $(tail -3 stderr)"
    kill -KILL "$air" $(marked) 2>/dev/null
    return 1
  fi
  [[ $(hoppers_alive) == 2 ]] || fail "the daemons did not start"
  kill -9 "$air"
  finish_air 5
  wait_for "[[ \$(hoppers_alive) == 0 ]]" 10 || fail "a pid-hopping daemon outlived kill -9 of air-run without a cgroup"
  for f in sid.*; do kill -KILL -- "-$(cat "$f")" 2>/dev/null; done # a failure leaks nothing
}

test_failed_run_ends_setsid_grandchild() {
  new_mark
  cat >rank.sh <<SH
#!/bin/sh
setsid "$F/ignore_term" "$MARK" >/dev/null 2>&1 &
if [ "\$RANK" = 1 ]; then sleep 0.3; exit 3; fi
exec "$F/sleep_forever"
SH
  chmod +x rank.sh
  run_air --accelerator-type CPU -n 2 --grace-period 1s --no-python ./rank.sh
  expect_rc 3
  expect_none_left 0 "processes outlived the teardown"
}

test_all_of_the_above_where_no_cgroup_file_system_is_visible() {
  # A chroot, or a container given a plain /sys: air-run finds no cgroup2 and
  # must do what AIR_RUN_CGROUP=off does, kill -9 soon after the start
  # included. Here: this file again, in a mount namespace whose
  # /sys/fs/cgroup is unmounted (or, failing that, an empty tmpfs).
  [[ -z ${AIR_ORPHANS_WITHOUT_CGROUP_FS:-} ]] || return 0 # the inner run itself
  if ! unshare -m true 2>/dev/null; then
    echo "  skipped: no mount namespace here (needs root)"
    return 0
  fi
  # shellcheck disable=SC2016
  unshare -m --propagation private bash -c '
    umount -R /sys/fs/cgroup 2>/dev/null || mount -t tmpfs none /sys/fs/cgroup || exit 77
    [[ -e /sys/fs/cgroup/cgroup.procs || -d /sys/fs/cgroup/unified ]] && exit 77
    AIR_ORPHANS_WITHOUT_CGROUP_FS=1 E2E_ONLY= bash "$0"' "$AIR_SOURCE_DIR/tests/e2e/test_orphans.sh" >inner.txt 2>&1
  local inner=$?
  if ((inner == 77)); then
    echo "  skipped: /sys/fs/cgroup cannot be hidden here"
  elif ((inner != 0)); then
    fail "without a visible cgroup file system: $(grep -E '^(FAIL|ok)' inner.txt | paste -sd ';' -)"
  fi
}

run_tests
