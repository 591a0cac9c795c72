#!/usr/bin/env bash
# What a new user trips over in the first hour: paths in a spec file are
# relative to it, `-f -`, a dry run checks what a launch checks, output paths
# are checked before any rank starts, ignored settings are named, and --help,
# the man page and the completions say what they mean.
source "$(dirname "$0")/lib.sh"

write_job() { # write_job FILE: a one-rank spec that writes every output
  cat >"$1" <<'YAML'
command: [sh, -c, "exit 0"]
no_python: true
cpu_ranks: 1
log_dir: logs
summary_file: out/summary.json
junit_file: out/junit.xml
YAML
}

test_spec_file_paths_are_relative_to_the_spec_file() {
  mkdir -p proj elsewhere
  write_job proj/job.yaml
  cd elsewhere || return 1
  run_air -f ../proj/job.yaml
  expect_rc 0
  [[ -f ../proj/out/summary.json ]] || fail "no summary next to the spec: $(find .. -name summary.json)"
  [[ -f ../proj/out/junit.xml ]] || fail "no JUnit report next to the spec"
  [[ -d ../proj/logs ]] || fail "no log directory next to the spec"
  [[ ! -e out && ! -e logs ]] || fail "outputs written relative to the working directory"
}

test_flag_and_variable_paths_stay_relative_to_the_working_directory() {
  mkdir -p proj
  write_job proj/job.yaml
  AIR_RUN_JUNIT_FILE=env-junit.xml run_air -f proj/job.yaml --summary flag-summary.json
  expect_rc 0
  [[ -f flag-summary.json ]] || fail "--summary not relative to the working directory"
  [[ -f env-junit.xml ]] || fail "AIR_RUN_JUNIT_FILE not relative to the working directory"
  [[ -d proj/logs ]] || fail "log_dir of the file not relative to it"
}

test_spec_from_standard_input() {
  write_job job.yaml
  run_air -f - <job.yaml
  expect_rc 0
  [[ -f out/summary.json ]] || fail "-f -: paths not relative to the working directory"
  printf 'command: [sh]\ntimout: 5m\n' >bad.yaml
  run_air -f - --dry-run <bad.yaml
  expect_rc 2
  expect_contains "$err" "air-run: error: <stdin>:2:1: unknown key 'timout' (did you mean 'timeout'?)"
}

test_dry_run_refuses_a_missing_script() {
  run_air --dry-run missing.py
  expect_rc 127
  expect_contains "$err" "script missing.py: no such file"
  expect_not_contains "$out" "Plan:"
  run_air --dry-run --python /nonexistent/python3 -m json.tool
  expect_rc 127
  expect_contains "$err" "Python interpreter"
}

test_dry_run_refuses_what_a_launch_refuses() {
  mkdir d
  run_air --dry-run --summary d --no-python /bin/true
  expect_rc 2
  # The limit in force comes first (air-run's first line), then the refusal, once.
  expect_contains "$err" "air-run: error: summary file d: is a directory"
  expect_eq "$(grep -c 'air-run: error' "$TESTDIR/stderr")" "1"
  [[ -z $(ls d) ]] || fail "the dry run wrote into d"
  touch afile
  run_air --dry-run --junit afile/j.xml --no-python /bin/true
  expect_rc 2
  expect_contains "$err" "JUnit file afile/j.xml: afile is not a directory"
  run_air --dry-run --log-dir afile --no-python /bin/true
  expect_rc 2
  expect_contains "$err" "log directory afile/"
  expect_contains "$err" ": afile is not a directory"
  run_air --dry-run --summary new/dir/s.json --no-python /bin/true
  expect_rc 0
  [[ ! -e new ]] || fail "the dry run made a directory"
}

test_summary_naming_a_directory_is_refused_before_any_rank() {
  mkdir d
  run_air --summary d --no-python sh -c 'touch ran'
  expect_rc 2
  expect_contains "$err" "air-run: error: summary file d: is a directory"
  expect_eq "$(grep -c 'air-run: error' "$TESTDIR/stderr")" "1"
  [[ ! -e ran ]] || fail "a rank ran before the summary path was checked"
}

test_an_unwritable_report_path_is_refused_once() {
  run_air --summary /proc/nope/s.json --no-python sh -c 'touch ran'
  [[ $rc == 2 || $rc == 125 ]] || fail "exit $rc"
  expect_eq "$(grep -c 'air-run: error' "$TESTDIR/stderr")" "1"
  expect_contains "$err" "summary file /proc/nope/s.json"
  [[ ! -e ran ]] || fail "a rank ran"
}

test_a_directory_as_target_says_so() {
  mkdir train
  run_air --no-python ./train
  expect_rc 126
  expect_contains "$err" "./train: is a directory, not a program"
  run_air train
  expect_rc 127
  expect_contains "$err" "train here is a directory"
  mkdir model.py
  run_air --dry-run model.py
  expect_rc 126
  expect_contains "$err" "script model.py: is a directory, not a file"
}

test_rank_filters_naming_no_rank_are_warned_about() {
  run_air --cpu-ranks 2 --ranks 5 --no-python sh -c 'echo hello'
  expect_rc 0
  expect_contains "$err" "air-run: warning: --ranks: rank 5 is not in this run (ranks 0-1); no rank's output is shown"
  run_air --cpu-ranks 2 --local-ranks-filter 7 --no-python /bin/true
  expect_contains "$err" "air-run: warning: --local-ranks-filter: local rank 7 is not on this node (local ranks 0-1)"
  run_air --cpu-ranks 2 --ranks 1,5 --dry-run --no-python /bin/true
  expect_contains "$err" "air-run: warning: --ranks: rank 5 is not in this run (ranks 0-1)"
  expect_not_contains "$err" "no rank's output is shown"
}

test_unknown_air_run_variable_gets_a_hint() {
  AIR_RUN_TIMOUT=5m run_air --dry-run --no-python /bin/true
  expect_rc 0
  expect_contains "$err" "air-run: warning: environment variable AIR_RUN_TIMOUT is not one air-run reads (did you mean AIR_RUN_TIMEOUT?); it is ignored"
  AIR_RUN_STACK_SIGNAL=1 run_air --dry-run --no-python /bin/true
  expect_not_contains "$err" "is not one air-run reads"
}

test_env_of_a_launcher_variable_is_warned_about() {
  run_air --env RANK=7 --no-python sh -c 'echo "RANK=$RANK"'
  expect_rc 0
  expect_contains "$err" "air-run: warning: --env: RANK=7 is ignored: air-run sets RANK for each rank itself"
  expect_contains "$out" "RANK=0"
}

test_help_shows_no_parser_notation_and_every_exit_code() {
  run_air --help
  expect_rc 0
  expect_not_contains "$out" "{false}"
  expect_contains "$out" "--live, --no-live"
  expect_contains "$out" "--rdzv-endpoint HOST[:PORT]"
  expect_contains "$out" "--nnodes N|MIN:MAX"
  expect_contains "$out" "-n, --num-accelerators N"
  for code in " 0 ok" " 2 bad" "124 timeout" "125 air-run could not launch" "126/127" "128+N"; do
    expect_contains "$out" "$code"
  done
  local manual page
  manual=$(grep '^Manual: man ' "$TESTDIR/stdout")
  page=${manual#Manual: man }
  page=${page%% *}
  [[ $page == air-run || -f $page ]] || fail "the manual hint names no page: $manual"
  run_air --print-man
  expect_contains "$out" "125"
  expect_not_contains "$out" "Manual: man /" # the page does not name a build tree
}

test_completions_offer_values() {
  "$AIR_RUN" --print-completion bash >air-run.bash || fail "--print-completion bash failed"
  local words
  words=$(bash -c 'source air-run.bash; COMP_WORDS=(air-run --rdzv-backend ""); COMP_CWORD=2; _air_run; echo "${COMPREPLY[*]}"')
  expect_eq "$words" "static c10d"
  words=$(bash -c 'source air-run.bash; COMP_WORDS=(air-run --accelerator-type GPU_8xH); COMP_CWORD=2; _air_run; echo "${COMPREPLY[*]}"')
  expect_eq "$words" "GPU_8xH100 GPU_8xH200"
  run_air --print-completion zsh
  expect_contains "$out" "'*--rdzv-backend["
  expect_contains "$out" ":BACKEND:(static c10d)'"
  expect_contains "$out" "(CPU GPU_1xA10"
}

test_an_unsupported_shell_is_named() {
  run_air --print-completion fish
  expect_rc 2
  expect_eq "$err" "air-run: error: no completion for fish; supported: bash, zsh"
}

# Two ways to count a node's ranks at once were taken silently (2 ranks for
# --cpu-ranks 3 --nproc-per-node 2); a duration written with a space made its
# unit the command ("min: command not found").
test_conflicting_rank_counts_and_a_spaced_duration_are_named() {
  run_air --dry-run --cpu-ranks 3 --nproc-per-node 2 --no-python true
  expect_rc 2
  expect_contains "$err" "--nproc-per-node: give either it or cpu_ranks (flag --cpu-ranks)"
  run_air --cpu-ranks 1 --hang-timeout 5 min
  expect_rc 127
  expect_contains "$err" "min: command not found (durations take no space: 5min, not 5 min)"
}

run_tests
