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

test_a_torchrun_line_has_no_timeout_and_air_runs_says_its_limit_first() {
  # torchrun stops a run only when it ends: its command line gets no 3 h limit.
  touch train.py # a dry run checks the script as a launch does
  run_air --dry-run --standalone --nproc_per_node=2 train.py
  expect_rc 0
  expect_contains "$out" "timeout = none  (default, torchrun command line (--standalone))"
  "$AIR_SOURCE_DIR/scripts/install-torchrun-alias.sh" "$PWD/bin" "$AIR_RUN" >/dev/null || fail "alias install failed"
  bin/torchrun --dry-run --nnodes 1 train.py >stdout 2>stderr
  expect_contains "$(cat stdout)" "timeout = none  (default, torchrun command line (started as torchrun))"
  run_air --dry-run --nnodes 1 --node-rank 0 train.py # air-run's own words: the 3 h default
  expect_contains "$out" "timeout = 3h  (default)"
  # A run says its limit before anything else, and how to lift it; a torchrun line has none.
  run_air --nproc-per-node 2 --timeout 2h --no-python true
  expect_rc 0
  expect_eq "$(head -1 stderr)" "air-run: this run stops after 2h (timeout, flag --timeout); --timeout none lifts it"
  run_air --cpu-ranks 2 --no-python true
  expect_eq "$(head -1 stderr)" "air-run: this run stops after 3h (timeout, default); --timeout none lifts it"
  run_air --standalone --nproc-per-node 2 --no-python true
  expect_rc 0
  expect_not_contains "$err" "stops after"
  run_air -q --cpu-ranks 2 --no-python true
  expect_not_contains "$err" "stops after"
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
  [[ $dir == logs/*_* ]] || fail "files in '$dir', expected logs/<run id>_XXXXXX"
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
  expect_contains "$err" "ambiguous option: --no could match --no-index, --no-live, --no-prefix, --no-python, --node-rank"
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

run_tests
