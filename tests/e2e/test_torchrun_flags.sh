#!/usr/bin/env bash
# torchrun's command line through the built air-run: the `torchrun` entry
# point, PET_* variables, -r/-t files in torchrun's layout, output prefixes,
# and the flags air-run accepts without effect.
source "$(dirname "$0")/lib.sh"

test_torchrun_entry_point_runs_a_torchrun_line() {
  "$AIR_SOURCE_DIR/scripts/install-torchrun-alias.sh" "$PWD/bin" "$AIR_RUN" >/dev/null || fail "alias install failed"
  [[ $(readlink bin/torchrun) == "$(readlink -f "$AIR_RUN")" ]] || fail "bin/torchrun is not a link to air-run"
  bin/torchrun --standalone --monitor-interval=1 --nproc_per_node=2 --no_python sh -c 'echo "r=$RANK w=$WORLD_SIZE"' >stdout 2>stderr
  rc=$?
  expect_rc 0
  expect_contains "$(cat stdout)" "[rank1]: r=1 w=2"
  expect_contains "$(cat stderr)" "air-run: note: --monitor-interval 1 accepted for torchrun compatibility"
  # A real torchrun is not replaced without --force.
  rm bin/torchrun && touch bin/torchrun
  "$AIR_SOURCE_DIR/scripts/install-torchrun-alias.sh" "$PWD/bin" "$AIR_RUN" 2>err
  rc=$?
  expect_rc 2
  expect_contains "$(cat err)" "exists and is not a link"
}

test_no_command_line_has_a_timeout_unless_asked_and_a_limit_is_said_first() {
  # A wall-clock default ends a multi-day (requeued) job with 124, and a
  # timeout is never restarted: no command line has one unless asked for,
  # air-run's own as torchrun's (the hang detector is the safety net).
  touch train.py # a dry run checks the script as a launch does
  run_air --dry-run --standalone --nproc_per_node=2 train.py
  expect_rc 0
  expect_contains "$out" "timeout = none  (default)"
  "$AIR_SOURCE_DIR/scripts/install-torchrun-alias.sh" "$PWD/bin" "$AIR_RUN" >/dev/null || fail "alias install failed"
  bin/torchrun --dry-run --nnodes 1 train.py >stdout 2>stderr
  expect_contains "$(cat stdout)" "timeout = none  (default)"
  run_air --dry-run --nnodes 1 --node-rank 0 train.py
  expect_contains "$out" "timeout = none  (default)"
  run_air --dry-run --grace-period 100s --checkpoint-dir ckpt train.py # the Slurm recipe's line
  expect_contains "$out" "timeout = none  (default)"
  # A limit asked for is said before anything else, with how to lift it.
  run_air --nproc-per-node 2 --timeout 2h --no-python true
  expect_rc 0
  expect_eq "$(head -1 stderr)" "air-run: this run stops after 2h (timeout, flag --timeout); --timeout none lifts it"
  run_air --cpu-ranks 2 --no-python true
  expect_rc 0
  expect_not_contains "$err" "stops after"
  run_air -q --cpu-ranks 2 --timeout 2h --no-python true
  expect_not_contains "$err" "stops after"
  # A run that cannot start says only why, not its limit first.
  run_air --cpu-ranks 2 --timeout 2h missing.py
  expect_rc 127
  expect_not_contains "$err" "stops after"
  expect_contains "$err" "missing.py"
}

test_pet_variables_configure_it_and_flags_win() {
  PET_NPROC_PER_NODE=3 PET_ROLE=worker run_air --no-python sh -c 'echo "$RANK $WORLD_SIZE $ROLE_NAME"'
  expect_rc 0
  expect_contains "$out" "[rank2]: 2 3 worker"
  PET_NPROC_PER_NODE=3 run_air --nproc-per-node 2 --no-python sh -c 'echo "w=$WORLD_SIZE"'
  expect_eq "$(grep -c 'w=2' stdout)" 2
}

test_one_rank_prints_unprefixed_and_no_prefix_asks_for_it() {
  run_air --no-python sh -c 'echo plain'
  expect_rc 0
  expect_eq "$out" "plain"
  run_air --nproc-per-node 2 --no-prefix --no-python sh -c 'echo "r$RANK"'
  expect_eq "$(sort stdout | tr '\n' ' ')" "r0 r1 "
}

test_redirects_and_tee_write_torchruns_files() {
  TMPDIR=$PWD run_air --nproc-per-node 2 --log-dir logs -r 1 --tee 0:2 --no-python \
    sh -c 'echo "out $LOCAL_RANK"; echo "err $LOCAL_RANK" >&2; echo "$TORCHELASTIC_ERROR_FILE"'
  expect_rc 0
  local dir
  dir=$(sed -n 's/^air-run: rank output files (--redirects\/--tee) in //p' stderr)
  # torchrun's layout: straight under the log dir, not in air-run's logs/<run id>/.
  [[ $dir =~ ^logs/[^/]+_[A-Za-z0-9]{6}$ ]] || fail "files in '$dir', expected logs/<run id>_XXXXXX"
  expect_eq "$(head -1 "$dir/attempt_0/0/stdout.log")" "out 0"
  expect_eq "$(cat "$dir/attempt_0/1/stdout.log" | head -1)" "out 1"
  expect_eq "$(cat "$dir/attempt_0/0/stderr.log")" "err 0" # teed: local rank 0's stderr
  [[ ! -e $dir/attempt_0/1/stderr.log ]] || fail "local rank 1's stderr was not redirected"
  expect_contains "$(cat "$dir/attempt_0/1/stdout.log")" "$dir/attempt_0/1/error.json"
  # Redirected stdout stays off the console; teed stderr reaches it.
  expect_not_contains "$out" "out 0"
  expect_contains "$err" "[rank0]: err 0"
  expect_contains "$err" "[rank1]: err 1"
}

test_local_ranks_filter_hides_the_other_ranks() {
  run_air --nproc-per-node 3 --local-ranks-filter 0,2 --no-python sh -c 'echo "r$LOCAL_RANK"'
  expect_rc 0
  expect_contains "$out" "[rank0]: r0"
  expect_contains "$out" "[rank2]: r2"
  expect_not_contains "$out" "r1"
}

test_dropped_dash_dash_and_prefixes() {
  run_air --nproc 1 --no-python echo -- a -- b
  expect_rc 0
  expect_eq "$out" "a -- b"
  run_air --no 1 --no-python true
  expect_rc 2
  expect_contains "$err" "ambiguous option: --no could match --no-index, --no-live, --no-prefix, --no-preload, --no-python, --node-rank"
}

test_nproc_per_node_words_on_cpu() {
  run_air --nproc-per-node gpu --no-python true
  expect_rc 2
  expect_contains "$err" "nproc_per_node gpu: CUDA is not available"
  run_air --nproc-per-node auto --dry-run --no-python true
  expect_rc 0
  expect_contains "$out" "$(getconf _NPROCESSORS_ONLN) rank(s) on node 0/1"
  run_air --nproc-per-node 2 -n 2 --no-python true
  expect_rc 2
  expect_contains "$err" "--nproc-per-node: give either it or num_accelerators (flag --num-accelerators)"
}

# compact_affinity: this process's CPUs as a compact list ("0-3,8"), from Python's os.sched_getaffinity.
AFFINITY_PY='import os
c = sorted(os.sched_getaffinity(0)); parts = []; i = 0
while i < len(c):
    j = i
    while j + 1 < len(c) and c[j + 1] == c[j] + 1: j += 1
    parts.append(str(c[i]) if i == j else "%d-%d" % (c[i], c[j])); i = j + 1
print("cpus " + ",".join(parts) + " omp " + os.environ["OMP_NUM_THREADS"])'

test_numa_binding_node_binds_each_rank_as_planned() {
  # This machine has one NUMA node: every rank gets its CPUs that air-run may use.
  local node_cpus expected
  node_cpus=$(cat /sys/devices/system/node/node0/cpulist 2>/dev/null || cat /sys/devices/system/cpu/online)
  expected=$(taskset -c "$node_cpus" /usr/bin/python3 -c "$AFFINITY_PY" 2>/dev/null | sed 's/ omp.*//; s/^cpus //')
  [[ -n $expected ]] || expected=$node_cpus
  run_air --dry-run --nproc-per-node 2 --numa-binding node --no-python true
  expect_rc 0
  expect_contains "$out" "numa_binding = node  (flag --numa-binding)"
  expect_eq "$(grep -c "  numa: cpus $expected, memory node 0" stdout)" 2
  run_air --nproc-per-node 2 --numa-binding node --summary s.json --no-python /usr/bin/python3 -c "$AFFINITY_PY"
  expect_rc 0
  # OMP_NUM_THREADS: the node's physical cores shared by its two ranks, at least 1.
  local cores omp
  cores=$(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list | sort -u | wc -l)
  omp=$((cores / 2 > 0 ? cores / 2 : 1))
  expect_contains "$out" "[rank0]: cpus $expected omp $omp"
  expect_contains "$out" "[rank1]: cpus $expected omp $omp"
  expect_contains "$err" "setting OMP_NUM_THREADS=$omp for each rank: the physical cores of its --numa-binding node share"
  expect_eq "$(json_get s.json 'd["ranks"][1]["cpu_affinity"], d["ranks"][1]["numa_node"]')" "$expected 0"
  # Under a narrower affinity (taskset), the binding keeps to it: the kernel would refuse more.
  taskset -c 0 "$AIR_RUN" --nproc-per-node 2 --numa-binding exclusive --summary t.json --no-python \
    /usr/bin/python3 -c "$AFFINITY_PY" >stdout 2>stderr
  rc=$?
  expect_rc 2
  expect_contains "$(cat stderr)" "--numa-binding exclusive: NUMA node 0 has 1 physical cores for 2 ranks"
  taskset -c 0 "$AIR_RUN" --nproc-per-node 2 --numa-binding node --summary t.json --no-python \
    /usr/bin/python3 -c "$AFFINITY_PY" >stdout 2>stderr
  rc=$?
  expect_rc 0
  expect_contains "$(cat stdout)" "[rank1]: cpus 0 omp 1"
  expect_eq "$(json_get t.json 'd["ranks"][0]["cpu_affinity"]')" "0"
  # Without the flag: no binding in the summary.
  run_air --nproc-per-node 2 --summary u.json --no-python true
  expect_eq "$(json_get u.json 'd["ranks"][0]["cpu_affinity"], d["ranks"][0]["numa_node"]')" "None None"
}

test_numa_binding_and_signals_refuse_bad_values_with_their_place() {
  run_air --numa-binding gpu --no-python true
  expect_rc 2
  expect_contains "$err" "--numa-binding: expected node, socket, exclusive, core-complex or none, got 'gpu'"
  AIR_RUN_NUMA_BINDING=sockets run_air --no-python true
  expect_rc 2
  expect_contains "$err" "environment variable AIR_RUN_NUMA_BINDING: expected node"
  printf 'command: [true]\nno_python: true\nsignals_to_handle: SIGTERM,USR1\n' >job.yaml
  run_air -f job.yaml
  expect_rc 2
  expect_contains "$err" "job.yaml:3:1: signals_to_handle: 'USR1' is not a signal air-run forwards (did you mean SIGUSR1?)"
}

# A rank that says when it is ready, then waits up to 20 s for SIGUSR1 and
# carries on after it (prints, sleeps, exits 0).
USR1_RANK='import os, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
print("ready", flush=True)
deadline = time.time() + float(sys.argv[1])
while not got and time.time() < deadline: time.sleep(0.05)
print("got SIGUSR1" if got else "no signal", flush=True)
time.sleep(0.3); print("still running", flush=True)'

# start_usr1_ranks SIGNALS SECONDS: two ranks of $USR1_RANK under
# --signals-to-handle SIGNALS, each waiting SECONDS for SIGUSR1; returns once
# both are ready, with air-run's pid in $air.
start_usr1_ranks() {
  # The background shell truncates the files only when it gets to run: a
  # previous run's "ready" lines must not be read as this run's.
  rm -f stdout stderr
  "$AIR_RUN" --nproc-per-node 2 --signals-to-handle "$1" --no-python /usr/bin/python3 -c "$USR1_RANK" "$2" \
    >stdout 2>stderr &
  air=$!
  wait_for "[[ \$(grep -c ready stdout) -ge 2 ]]" 30 || fail "ranks did not start: $(tail -3 stderr)"
}

test_signals_to_handle_forwards_usr1_and_the_run_goes_on() {
  start_usr1_ranks SIGTERM,SIGUSR1 20 || return
  kill -USR1 "$air"
  finish_air 30
  expect_rc 0
  expect_eq "$(grep -c 'got SIGUSR1' stdout)" 2
  expect_eq "$(grep -c 'still running' stdout)" 2
  # Not listed: SIGUSR1 reaches no rank (and air-run is not killed by it).
  start_usr1_ranks SIGTERM 2 || return
  kill -USR1 "$air"
  finish_air 30
  expect_rc 0
  expect_eq "$(grep -c 'no signal' stdout)" 2
  # A listed SIGTERM keeps its meaning: forwarded, then the run stops.
  start_usr1_ranks SIGUSR1,SIGTERM 20 || return
  kill -TERM "$air"
  finish_air 30
  expect_rc 143
  expect_contains "$(cat stderr)" "interrupted by SIGTERM"
}

test_duplicate_filters_write_the_matching_lines_to_filtered_logs() {
  TMPDIR=$PWD run_air --nproc-per-node 2 --log-dir logs --duplicate-stdout-filters 'loss,acc' \
    --duplicate_stderr_filters Warn --no-python sh -c \
    'echo "step 1 loss=0.$RANK"; echo "nothing here"; echo "acc 9$RANK"; echo "Warning $RANK" >&2; echo "Error $RANK" >&2'
  expect_rc 0
  local file
  file=$(sed -n 's/^air-run: stdout lines matching --duplicate-stdout-filters also go to //p' stderr)
  [[ $file =~ ^logs/[^/]+_[A-Za-z0-9]{6}/attempt_0/filtered_stdout.log$ ]] || fail "filtered stdout in '$file'"
  expect_eq "$(sort "$file" | tr '\n' '|')" "[rank0]: acc 90|[rank0]: step 1 loss=0.0|[rank1]: acc 91|[rank1]: step 1 loss=0.1|"
  expect_eq "$(sort "$(dirname "$file")/filtered_stderr.log" | tr '\n' '|')" "[rank0]: Warning 0|[rank1]: Warning 1|"
  # The console still has every line.
  expect_contains "$out" "[rank1]: nothing here"
  # A dry run says where they would go.
  run_air --dry-run --nproc-per-node 2 --duplicate-stdout-filters 'loss,acc' --no-python true
  expect_rc 0
  expect_contains "$out" "stdout lines containing loss or acc also go to filtered_stdout.log in torchrun's log folder"
  expect_not_contains "$out" "stderr lines containing"
  # Without --log-dir: a temporary folder, as torchrun's.
  TMPDIR=$PWD run_air --nproc-per-node 1 --duplicate-stdout-filters loss --no-python sh -c 'echo loss 1; echo other'
  expect_rc 0
  file=$(sed -n 's/^air-run: stdout lines matching --duplicate-stdout-filters also go to //p' stderr)
  [[ $file == "$PWD"/torchelastic_*/*_*/attempt_0/filtered_stdout.log ]] || fail "filtered stdout in '$file'"
  expect_eq "$(cat "$file")" "[rank0]: loss 1"
}

test_virtual_local_rank_gives_torchruns_environment() {
  CUDA_VISIBLE_DEVICES=5,7 run_air --nproc-per-node 2 --virtual_local_rank --no-python \
    sh -c 'echo "L=$LOCAL_RANK C=$CUDA_VISIBLE_DEVICES W=$LOCAL_WORLD_SIZE R=$RANK"'
  expect_rc 0
  expect_contains "$out" "[rank0]: L=0 C=5 W=2 R=0"
  expect_contains "$out" "[rank1]: L=0 C=7 W=2 R=1"
}

test_a_listed_sigquit_stops_the_run_as_under_torchrun() {
  # torchrun's default list names SIGQUIT: forwarded, and the run stops (air-run's own
  # meaning, the Python stacks, is for an unlisted SIGQUIT: tests/e2e/test_console.sh).
  # A non-interactive shell starts background jobs with SIGQUIT ignored: restore it.
  rm -f stdout stderr
  env --default-signal=QUIT "$AIR_RUN" --nproc-per-node 2 --signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT \
    --no-python sh -c 'echo ready; exec sleep 30' >stdout 2>stderr &
  air=$!
  wait_for "[[ \$(grep -c ready stdout) -ge 2 ]]" 30 || fail "ranks did not start: $(tail -3 stderr)"
  kill -QUIT "$air"
  finish_air 20
  expect_rc 131
  expect_contains "$(cat stderr)" "interrupted by SIGQUIT"
}

run_tests
