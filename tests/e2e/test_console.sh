#!/usr/bin/env bash
# What the console shows while a run is stopped or stuck: the teardown's
# notice and its killed ranks, and the Python stacks of ranks that hung
# (taken by faulthandler through air-run's sitecustomize shim). The stack
# tests run a real Python rank under /usr/bin/python3 (Debian's interpreter).
source "$(dirname "$0")/lib.sh"

# Ranks that ignore SIGINT and SIGTERM: only SIGKILL ends them.
stubborn() {
  printf '#!/bin/sh\ntrap "" INT TERM\necho "up $RANK"\nexec sleep 60\n' >stubborn.sh
  chmod +x stubborn.sh
}

test_ctrl_c_says_what_happens_and_names_killed_ranks() {
  stubborn
  env --default-signal=INT "$AIR_RUN" --cpu-ranks 2 --grace-period 1s --no-python ./stubborn.sh >stdout 2>stderr &
  air=$!
  wait_for '[[ $(grep -c "up " stdout) -ge 2 ]]' 10 || fail "ranks did not start"
  kill -INT $air
  wait_for 'grep -q "air-run: stopping" stderr' 2 || fail "no teardown notice within 2 s: $(cat stderr)"
  expect_contains "$(cat stderr)" "air-run: stopping 2 ranks (SIGINT), up to 1s; Ctrl-C again to kill now"
  finish_air 10
  expect_rc 130
  expect_contains "$(cat stderr)" "  still running after the 1.0s grace period, killed (SIGKILL): ranks 0-1"
}

test_second_ctrl_c_skips_the_grace_period() {
  stubborn
  env --default-signal=INT "$AIR_RUN" --cpu-ranks 2 --grace-period 60s --summary s.json --no-python ./stubborn.sh \
    >stdout 2>stderr &
  air=$!
  wait_for '[[ $(grep -c "up " stdout) -ge 2 ]]' 10 || fail "ranks did not start"
  kill -INT $air
  wait_for 'grep -q "air-run: stopping" stderr' 2 || fail "no teardown notice"
  kill -INT $air # within the first one's burst (a second): the same request
  sleep 1.2      # a person presses again after reading the notice
  kill -INT $air
  finish_air 10 # well inside the 60 s grace period
  expect_rc 130
  expect_contains "$(cat stderr)" "  killed (SIGKILL) at the second interrupt: ranks 0-1"
  expect_eq "$(/usr/bin/python3 -c 'import json; print([r["killed"] for r in json.load(open("s.json"))["ranks"]])')" \
    "[True, True]"
}

write_stuck_rank() {
  cat >stuck.py <<'PY'
import threading, time

def background_loader_waits():
    time.sleep(600)

def wait_for_peer_in_allreduce():
    time.sleep(600)

threading.Thread(target=background_loader_waits, daemon=True).start()
print("ready", flush=True)
wait_for_peer_in_allreduce()
PY
}

test_timeout_shows_each_python_ranks_stack() {
  [[ -x $TORCH_PYTHON ]] || { echo "skip: no $TORCH_PYTHON"; return 0; }
  write_stuck_rank
  run_air --accelerator-type CPU --cpu-ranks 2 --timeout 3s --grace-period 2s --python "$TORCH_PYTHON" --summary s.json stuck.py
  expect_rc 124
  expect_contains "$err" "  stacks when the run timed out:"
  expect_contains "$err" "    rank 1, last output "
  expect_contains "$err" " ago: ready"
  expect_contains "$err" "in wait_for_peer_in_allreduce"
  expect_contains "$err" "in background_loader_waits"
  local stack
  stack=$(/usr/bin/python3 -c 'import json; r = json.load(open("s.json"))["ranks"][0]; print(r["last_line"], r["last_output_age_s"] >= 2.0); print(r["stack"])')
  expect_contains "$stack" "ready True"
  expect_contains "$stack" "wait_for_peer_in_allreduce"
  # The dump did not kill the rank: air-run stopped it (SIGTERM), after the stacks.
  expect_eq "$(/usr/bin/python3 -c 'import json; print(json.load(open("s.json"))["ranks"][0]["exit"]["signal_name"])')" "SIGTERM"
}

test_sigquit_prints_stacks_and_the_run_goes_on() {
  [[ -x $TORCH_PYTHON ]] || { echo "skip: no $TORCH_PYTHON"; return 0; }
  write_stuck_rank
  # a non-interactive shell starts background jobs with SIGINT and SIGQUIT ignored
  env --default-signal=INT,QUIT "$AIR_RUN" --cpu-ranks 1 --grace-period 2s --python "$TORCH_PYTHON" stuck.py \
    >stdout 2>stderr &
  air=$!
  wait_for 'grep -q ready stdout' 20 || fail "rank did not start"
  kill -QUIT $air
  wait_for 'grep -q "^\[rank0 stack\]: .*in wait_for_peer_in_allreduce" stderr' 5 || fail "no stack: $(cat stderr)"
  pid_alive $air || fail "air-run ended on SIGQUIT"
  kill -INT $air
  finish_air 10
  expect_rc 130
}

test_user_sitecustomize_still_runs() {
  [[ -x $TORCH_PYTHON ]] || { echo "skip: no $TORCH_PYTHON"; return 0; }
  mkdir user
  echo 'print("user sitecustomize ran")' >user/sitecustomize.py
  echo 'import sys, faulthandler; print("path", sys.path[1:2] != [])' >t.py
  PYTHONPATH=$PWD/user run_air --cpu-ranks 1 --python "$TORCH_PYTHON" t.py
  expect_rc 0
  expect_contains "$out" "user sitecustomize ran"
}

test_shell_ranks_are_not_armed() {
  printf '#!/bin/sh\necho "AIR_RUN_STACK_FILE=${AIR_RUN_STACK_FILE:-unset}"\nsleep 60\n' >r.sh
  chmod +x r.sh
  run_air --cpu-ranks 1 --timeout 1s --grace-period 1s --no-python ./r.sh
  expect_rc 124
  expect_contains "$out" "AIR_RUN_STACK_FILE=unset"
  expect_not_contains "$err" "stacks when the run timed out"
}

test_placeholders_keep_runs_apart() {
  local i
  for i in 1 2; do
    run_air --cpu-ranks 2 --log-dir 'logs/{run_id}/{rank}' --summary 'out/{run_id}.json' --no-python \
      sh -c 'echo "hi $RANK"'
    expect_rc 0
  done
  expect_eq "$(ls out | wc -l)" "2"
  local id
  for id in $(ls out); do
    id=${id%.json}
    expect_eq "$(cat "logs/$id/1/rank1.log")" "hi 1"
    expect_eq "$(/usr/bin/python3 -c "import json; print(json.load(open('out/$id.json'))['run_id'])")" "$id"
  done
}

test_unknown_placeholder_is_a_usage_error() {
  run_air --cpu-ranks 1 --log-dir 'logs/{runid}' --no-python sh -c 'touch started'
  expect_rc 2
  expect_contains "$err" "log_dir (--log-dir): unknown placeholder {runid} in \"logs/{runid}\"; known here: {run_id}, {node_rank}, {rank}"
  [[ ! -e started && ! -e logs ]] || fail "something was launched or created"
  run_air --cpu-ranks 1 --summary 's-{rank}.json' --no-python sh -c 'touch started'
  expect_rc 2
  expect_contains "$err" "unknown placeholder {rank}"
}

test_report_path_checked_before_launch() {
  echo x >afile # a file where the summary's folder should be: even root cannot write there
  run_air --cpu-ranks 1 --summary afile/s.json --no-python sh -c 'touch started'
  expect_rc 2
  expect_contains "$err" "summary file afile/s.json: afile is not a directory"
  [[ ! -e started ]] || fail "the rank ran"
}

test_run_ids_sort_by_time() {
  local a b
  run_air --cpu-ranks 1 --json --no-python true
  a=$(echo "$out" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["run_id"])')
  sleep 1.1
  run_air --cpu-ranks 1 --json --no-python true
  b=$(echo "$out" | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["run_id"])')
  [[ $a =~ ^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$ ]] || fail "run id $a"
  [[ $a < $b ]] || fail "run ids do not sort by time: $a then $b"
}

# The CI examples in docs/ci parse as YAML, and every air-run flag they use
# (up to the target script) is one that air-run --help lists.
test_ci_examples_lint() {
  local file flags flag help py=""
  for py in /usr/bin/python3 "$TORCH_PYTHON" python3 ""; do
    [[ -n $py ]] && has_module "$py" yaml && break
  done
  if [[ -z $py ]]; then
    echo "  (no interpreter here has PyYAML: the CI examples are not parsed; Debian: python3-yaml)"
    return
  fi
  help=$("$AIR_RUN" --help)
  for file in "$AIR_SOURCE_DIR"/docs/ci/github-actions.yml "$AIR_SOURCE_DIR"/docs/ci/gitlab-ci.yml; do
    flags=$("$py" - "$file" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
def strings(node):
    if isinstance(node, dict):
        for v in node.values(): yield from strings(v)
    elif isinstance(node, list):
        for v in node: yield from strings(v)
    elif isinstance(node, str):
        yield node
found = False
for text in strings(doc):
    words = text.split()
    if "air-run" not in words: continue
    found = True
    for word in words[words.index("air-run") + 1:]:
        if word.endswith(".py"): break
        if word.startswith("--"): print(word.split("=")[0])
if not found: sys.exit("no air-run command")
PY
    ) || fail "$file: not YAML, or no air-run command"
    [[ -n $flags ]] || fail "$file names no air-run flag"
    for flag in $flags; do
      [[ $help == *"$flag "* || $help == *"$flag,"* ]] || fail "$file uses $flag, which air-run --help does not list"
    done
  done
}
test_github_annotation_points_at_the_failing_line() {
  mkdir -p ws/pkg
  printf 'def step():\n    raise ValueError("bad shape")\n' >ws/pkg/model.py
  printf 'import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\nfrom pkg.model import step\nif os.environ["RANK"] == "1":\n    step()\n' >ws/train.py
  GITHUB_ACTIONS=true GITHUB_WORKSPACE=$PWD/ws GITHUB_STEP_SUMMARY=$PWD/step.md \
    run_air --cpu-ranks 2 --junit j.xml ws/train.py
  expect_rc 1
  expect_contains "$out" "::error file=pkg/model.py,line=2,title=air-run rank 1::rank 1 failed with exit code 1: ValueError: bad shape%0A"
  expect_contains "$(cat step.md)" "| 1 | failed (root cause): exit code 1 |"
  expect_contains "$(cat step.md)" '| `ValueError: bad shape` |'
  expect_contains "$(cat j.xml)" '<testcase classname="air-run.train" name="rank 1"'
  expect_contains "$(cat j.xml)" '<failure message="ValueError: bad shape (exit code 1)"'
}

# in_pty COMMAND: runs COMMAND in a real pseudo-terminal (util-linux script); its output in pty.out.
in_pty() {
  command -v script >/dev/null || return 77
  TERM=xterm-256color timeout 30 script -qfec "$1" /dev/null >pty.out 2>&1 </dev/null
}

test_colour_on_a_terminal_only_and_never_with_no_color() {
  command -v script >/dev/null || { echo "skip: no script(1)"; return 0; }
  local esc=$'\x1b'
  in_pty "\"$AIR_RUN\" --cpu-ranks 2 --no-python sh -c 'echo hi \$RANK'"
  expect_contains "$(cat pty.out)" "${esc}[36m[rank0]:${esc}[0m hi 0"
  expect_contains "$(cat pty.out)" "${esc}[32m[rank1]:${esc}[0m hi 1"
  NO_COLOR=1 in_pty "\"$AIR_RUN\" --cpu-ranks 2 --no-python sh -c 'echo hi \$RANK'"
  expect_contains "$(cat pty.out)" "[rank1]: hi 1"
  [[ $(cat pty.out) != *"$esc"* ]] || fail "NO_COLOR output holds escape codes: $(cat -v pty.out)"
  run_air --cpu-ranks 2 --no-python sh -c 'echo hi $RANK'
  [[ "$out$err" != *"$esc"* ]] || fail "escape codes off a terminal"
  FORCE_COLOR=1 run_air --cpu-ranks 2 --no-python sh -c 'echo hi $RANK'
  expect_contains "$out" "${esc}[36m[rank0]:${esc}[0m hi 0"
  # One rank prints as is (no prefix to colour), as torchrun prints it.
  FORCE_COLOR=1 run_air --cpu-ranks 1 --no-python sh -c 'echo hi'
  expect_eq "$out" "hi"
}

test_terminal_settings_survive_a_killed_rank_and_ctrl_c() {
  command -v script >/dev/null || { echo "skip: no script(1)"; return 0; }
  printf '#!/bin/sh\n[ "$RANK" = 1 ] && kill -9 $$\nexec sleep 30\n' >r.sh
  chmod +x r.sh
  in_pty "stty -g >before; \"$AIR_RUN\" --cpu-ranks 2 --no-python ./r.sh; echo rc=\$?; stty -g >after"
  expect_contains "$(cat pty.out)" "rc=137"
  expect_eq "$(cat after)" "$(cat before)"
  # Ctrl-C typed into the terminal (the pty's interrupt character) reaches air-run.
  printf '#!/bin/sh\necho "up $RANK"\nexec sleep 30\n' >s.sh
  chmod +x s.sh
  rm -f after
  # The inner shell traps SIGINT so that it survives the Ctrl-C and reports rc (dash, the
  # usual /bin/sh, would die of it); the trap is reset to the default for air-run by exec.
  TERM=xterm timeout 30 script -qfec "trap : INT; stty -g >before; \"$AIR_RUN\" --cpu-ranks 1 --grace-period 2s --no-python ./s.sh; echo rc=\$?; stty -g >after" /dev/null \
    < <(sleep 1.5; printf '\003'; sleep 4) >pty.out 2>&1
  expect_contains "$(cat pty.out)" "air-run: stopping 1 rank (SIGINT), up to 2s; Ctrl-C again to kill now"
  expect_contains "$(cat pty.out)" "rc=130"
  expect_eq "$(cat after)" "$(cat before)"
}

run_tests
