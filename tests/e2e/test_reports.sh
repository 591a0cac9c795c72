#!/usr/bin/env bash
# Results, root cause and machine-readable reports through the built binary:
# per-rank results from a real 4-rank gloo job, torch's @record traceback in the
# summary, signals, timeouts, bad result files, interrupted runs, --json, JUnit.
source "$(dirname "$0")/lib.sh"

have_torch() { "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; }

test_results_in_rank_order_from_gloo_job() {
  have_torch || { echo "skip: no torch"; return 0; }
  cat >job.py <<'PY'
import torch, torch.distributed as dist, sys
sys.path.insert(0, sys.argv[1])
import air
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
air.report({"rank": dist.get_rank(), "sum": t.item()})
PY
  run_air --cpu-ranks 4 --python "$TORCH_PYTHON" --summary s.json job.py "$AIR_SOURCE_DIR/python"
  expect_rc 0
  expect_eq "$(json_get s.json '[r["result"]["value"]["rank"] for r in d["ranks"]]')" "[0, 1, 2, 3]"
  expect_eq "$(json_get s.json '{r["result"]["value"]["sum"] for r in d["ranks"]}')" "{10.0}"
  expect_eq "$(json_get s.json 'd["outcome"]["status"]')" "succeeded"
}

test_record_exception_reaches_summary() {
  have_torch || { echo "skip: no torch"; return 0; }
  cat >boom.py <<'PY'
import os, time
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    if os.environ["RANK"] == "1":
        raise ValueError("bad batch 42")
    time.sleep(30)

main()
PY
  run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --grace-period 5s --summary s.json boom.py
  expect_rc 1
  expect_eq "$(json_get s.json 'd["outcome"]["root_cause_rank"]')" "1"
  expect_eq "$(json_get s.json 'd["ranks"][1]["error"]["source"]')" "error_file"
  expect_contains "$(json_get s.json 'd["ranks"][1]["error"]["type"] + ": " + d["ranks"][1]["error"]["message"]')" \
    "ValueError: bad batch 42"
  expect_contains "$(json_get s.json 'd["ranks"][1]["error"]["traceback"]')" 'raise ValueError("bad batch 42")'
  expect_eq "$(json_get s.json 'd["ranks"][0]["stopped_by_air_run"]')" "True"
  expect_contains "$err" "ValueError"
}

test_signal_exit_code_and_timeout_in_summary() {
  printf '#!/bin/sh\n[ "$RANK" = 1 ] && kill -KILL $$\nexec sleep 30\n' >r.sh
  chmod +x r.sh
  run_air --cpu-ranks 2 --summary s.json --no-python ./r.sh
  expect_rc 137
  expect_eq "$(json_get s.json 'd["ranks"][1]["exit"]["signal_name"]')" "SIGKILL"
  expect_eq "$(json_get s.json 'd["ranks"][1]["exit"]["code"]')" "None"
  run_air --cpu-ranks 2 --timeout 1 --grace-period 1s --summary t.json --no-python sleep 30
  expect_rc 124
  expect_eq "$(json_get t.json 'd["outcome"]["status"]')" "timed_out"
  expect_eq "$(json_get t.json 'd["outcome"]["exit_code"]')" "124"
}

test_invalid_and_oversized_results_are_recorded() {
  cat >r.sh <<'SH'
#!/bin/sh
case "$RANK" in
  0) echo '{"ok": true}' > "$AIR_RESULT_FILE" ;;
  1) echo '{not json' > "$AIR_RESULT_FILE" ;;
  2) head -c 17000000 /dev/zero | tr '\0' 'x' > "$AIR_RESULT_FILE" ;;
  3) : ;;
esac
SH
  chmod +x r.sh
  run_air --cpu-ranks 4 --summary s.json --no-python ./r.sh
  expect_rc 0
  expect_eq "$(json_get s.json '[r["result"]["state"] for r in d["ranks"]]')" "['ok', 'invalid', 'too_large', 'missing']"
  expect_eq "$(json_get s.json 'd["ranks"][0]["result"]["value"]')" "{'ok': True}"
}

test_results_kept_when_another_rank_fails() {
  printf '#!/bin/sh\necho "[$RANK]" > "$AIR_RESULT_FILE"\n[ "$RANK" = 2 ] && { sleep 0.3; exit 4; }\nexec sleep 30\n' >r.sh
  chmod +x r.sh
  run_air --cpu-ranks 3 --summary s.json --no-python ./r.sh
  expect_rc 4
  expect_eq "$(json_get s.json '[r["result"].get("value") for r in d["ranks"]]')" "[[0], [1], [2]]"
}

test_interrupted_run_writes_complete_summary() {
  env --default-signal=INT "$AIR_RUN" --cpu-ranks 2 --summary s.json --no-python sh -c 'echo $$ > pid.$RANK; exec sleep 30' >o 2>e &
  local air=$!
  wait_for '[[ -s pid.0 && -s pid.1 ]]' 10 || fail "ranks did not start"
  kill -INT $air
  wait $air
  rc=$?
  expect_rc 130
  expect_eq "$(json_get s.json 'd["outcome"]["status"]')" "interrupted"
  expect_eq "$(json_get s.json 'd["outcome"]["interrupt_signal_name"]')" "SIGINT"
  expect_eq "$(json_get s.json 'len(d["ranks"])')" "2"
}

test_json_stdout_parses_and_rank_output_goes_to_stderr() {
  printf '#!/bin/sh\necho "hello from $RANK"\n' >r.sh
  chmod +x r.sh
  run_air --cpu-ranks 2 --json --no-python ./r.sh
  expect_rc 0
  echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["schema_version"] == 1 and len(d["ranks"]) == 2' ||
    fail "stdout is not the JSON summary: $out"
  expect_contains "$err" "[rank1]: hello from 1"
}

test_summary_validates_against_schema() {
  python3 -c 'import jsonschema' 2>/dev/null || { echo "skip: no jsonschema"; return 0; }
  printf '#!/bin/sh\n[ "$RANK" = 0 ] && exit 3\nexec sleep 30\n' >r.sh
  chmod +x r.sh
  run_air --cpu-ranks 2 --summary s.json --no-python ./r.sh
  python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), cls=jsonschema.Draft202012Validator)' \
    s.json "$AIR_SOURCE_DIR/docs/summary.schema.json" || fail "summary does not validate"
}

# validate_summary FILE: the summary against docs/summary.schema.json (skipped without jsonschema).
validate_summary() {
  python3 -c 'import jsonschema' 2>/dev/null || return 0
  python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), cls=jsonschema.Draft202012Validator)' \
    "$1" "$AIR_SOURCE_DIR/docs/summary.schema.json" || fail "$1 does not validate"
}

test_refused_launch_still_writes_its_reports() {
  printf 'timeout: 10m\ntiemout: 3\n' >job.yaml
  touch marker
  run_air -f job.yaml --summary 'out/{run_id}/s.json' --junit out/j.xml --no-python sh -c 'rm marker'
  expect_rc 2
  expect_contains "$err" "air-run: error: job.yaml:2:1: unknown key 'tiemout'"
  [[ -f marker ]] || fail "a rank ran although the spec was refused"
  local summary
  summary=$(echo out/*/s.json)
  [[ -f $summary ]] || fail "no summary for the refused launch: $(ls -R out)"
  expect_eq "$(json_get "$summary" 'd["outcome"]["status"]')" "launch_failed"
  expect_eq "$(json_get "$summary" 'd["outcome"]["exit_code"]')" "2"
  expect_eq "$(json_get "$summary" 'd["outcome"]["refusal"]["kind"]')" "usage"
  expect_eq "$(json_get "$summary" 'd["spec"]["settings"], d["selection"], d["launch"], d["ranks"]')" "None None None []"
  expect_eq "$(json_get "$summary" 'd["run_id"] in sys.argv[1]')" "True" # {run_id} in the path is the summary's
  validate_summary "$summary"
  grep -q '<testsuite name="job" tests="1" failures="1"' out/j.xml || fail "JUnit: $(cat out/j.xml)"
  grep -q 'name="launch"' out/j.xml || fail "JUnit has no launch case"
  if command -v xmllint >/dev/null; then
    xmllint --noout --schema "$AIR_SOURCE_DIR/tests/data/junit.xsd" out/j.xml 2>/dev/null || fail "JUnit does not validate"
  fi

  # A hardware mismatch under GitHub Actions: JSON on stdout, annotation, step summary.
  AIR_RUN_FAKE_GPUS=2xH100 GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY=$PWD/step.md \
    run_air --accelerator-type GPU_8xH100 --json --no-python true
  expect_rc 2
  printf '%s' "$out" >s2.json
  expect_eq "$(json_get s2.json 'd["outcome"]["refusal"]["kind"], d["hardware"]["source"]')" "hardware AIR_RUN_FAKE_GPUS"
  validate_summary s2.json
  expect_contains "$err" "::error title=air-run%3A launch refused::requested GPU_8xH100"
  expect_contains "$(cat step.md)" "could not be launched (exit code 2)"
  expect_contains "$(cat step.md)" "Nothing was launched."

  # The spec file's error carries its place for the annotation; a report path with
  # an unknown placeholder is itself the error and gets no report.
  GITHUB_ACTIONS=true run_air -f job.yaml --no-python true
  expect_contains "$out" "::error file=job.yaml,line=2,title=air-run%3A launch refused::"
  run_air --summary 'out/{nope}.json' --no-python true
  expect_rc 2
  [[ ! -e out/{nope}.json ]] || fail "a summary was written to the bad path"
  run_air -f job.yaml --summary 'out/{nope}.json' --no-python true # the spec file refused as well
  expect_rc 2
  [[ ! -e out/{nope}.json ]] || fail "a summary was written to the bad path"
}

test_spec_error_annotation_is_relative_to_github_workspace() {
  # A bad spec in ci/ of the workspace, air-run run from ci/: GitHub wants the
  # file relative to GITHUB_WORKSPACE, as for a rank's traceback.
  mkdir -p ws/ci
  printf 'timeout: 10m\ntiemout: 3\n' >ws/ci/job.yaml
  cd ws/ci || fail "no ws/ci"
  GITHUB_ACTIONS=true GITHUB_WORKSPACE=$TESTDIR/ws run_air -f job.yaml --no-python true
  cd "$TESTDIR" || fail "no $TESTDIR"
  expect_rc 2
  expect_contains "$out" "::error file=ci/job.yaml,line=2,title=air-run%3A launch refused::job.yaml:2:1: unknown key 'tiemout'"
}

test_junit_validates() {
  command -v xmllint >/dev/null || { echo "skip: no xmllint"; return 0; }
  printf '#!/bin/sh\necho "out $RANK"\n[ "$RANK" = 1 ] && exit 2\nexec sleep 30\n' >r.sh
  chmod +x r.sh
  run_air --cpu-ranks 3 --junit out/junit.xml --no-python ./r.sh
  expect_rc 2
  xmllint --noout --schema "$AIR_SOURCE_DIR/tests/data/junit.xsd" out/junit.xml 2>xmllint.err || fail "JUnit invalid: $(cat xmllint.err)"
  expect_eq "$(xmllint --xpath 'count(//testcase)' out/junit.xml)" "3"
  expect_eq "$(xmllint --xpath 'count(//testcase[@name="rank 1"]/failure)' out/junit.xml)" "1"
}

test_github_annotations() {
  printf '#!/bin/sh\n[ "$RANK" = 0 ] && exit 6\nexec sleep 30\n' >r.sh
  chmod +x r.sh
  GITHUB_ACTIONS=true run_air --cpu-ranks 2 --no-python ./r.sh
  expect_rc 6
  expect_contains "$out" "::error title=air-run rank 0::"
}

test_progress_bar_then_exception_off_a_terminal() {
  # Rank 1 draws a tqdm-style bar on stderr ('\r', no newline; stderr is a
  # pipe here, as in CI) and raises: Python's traceback header lands on the
  # bar's line. The reports still name the exception, with the header on a
  # line of its own.
  have_torch || { echo "skip: no torch"; return 0; }
  cat >bar.py <<'PY'
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.all_reduce(torch.ones(1))
if dist.get_rank() == 1:
    for i in range(6):
        sys.stderr.write("\r%3d%%|%-5s| %d/10" % (i * 10, "#" * i, i))
        sys.stderr.flush()
    raise RuntimeError("boom at step 5")
dist.barrier()
PY
  run_air --cpu-ranks 2 --python "$TORCH_PYTHON" --summary s.json --junit j.xml bar.py
  expect_rc 1
  expect_eq "$(json_get s.json 'd["ranks"][1]["error"]["type"], d["ranks"][1]["last_line"]')" \
    "RuntimeError RuntimeError: boom at step 5"
  # The rank shim recorded the exception itself: its traceback, with no
  # bar glued to the header (the output-tail fallback, for ranks the shim is
  # not in, puts the header on a line of its own after the bar's last state:
  # test_rank_exceptions.sh, report_shown_tail_test.cpp).
  expect_eq "$(json_get s.json 'd["ranks"][1]["error"]["source"], d["ranks"][1]["error"]["traceback"].split("\n")[0]')" \
    "error_file Traceback (most recent call last):"
  expect_contains "$err" "rank 1 failed: RuntimeError: boom at step 5 (bar.py:8)"
  expect_contains "$(cat j.xml)" '<failure message="RuntimeError: boom at step 5 (exit code 1)" type="RuntimeError">'
  expect_contains "$err" $'\n      Traceback (most recent call last):\n'
}

test_ranks_that_all_exit_1_are_all_failed() {
  # Every rank exits 1 by itself, all at about the same moment (a barrier;
  # SIGTERM ignored, so none dies of it); whichever air-run sees first is the
  # root cause, and the others, which end just before or after its SIGTERM,
  # are failed too, never "stopped by air-run". Repeated: the moment varies.
  local i
  for i in 1 2 3 4 5 6; do
    mkdir "b$i"
    run_air --cpu-ranks 4 --summary "s$i.json" --no-python sh -c \
      "trap '' TERM; touch b$i/\$RANK; while [ \$(ls b$i | wc -l) -lt 4 ]; do sleep 0.01; done; exit 1"
    expect_rc 1
    expect_eq "$(json_get "s$i.json" '[r["stopped_by_air_run"] for r in d["ranks"]]')" "[False, False, False, False]"
    expect_eq "$(json_get "s$i.json" '[r["exit"]["code"] for r in d["ranks"]]')" "[1, 1, 1, 1]"
    expect_not_contains "$err" "stopped by air-run"
    expect_eq "$(grep -c '  also failed: rank' "$TESTDIR/stderr")" "3"
  done
}

# A memory cgroup of 300 MB for air-run and its ranks, v2 or v1, whichever
# holds the memory controller here; prints its directory, or why not.
make_memory_cgroup() {
  local name=air-e2e-oom-$$ v2 v1 own
  v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
  if [[ -n $v2 && -e $v2/cgroup.controllers ]] && grep -qw memory "$v2/cgroup.controllers"; then
    own=$(sed -n 's/^0:://p' /proc/self/cgroup)
    local parent=$v2${own%/}
    [[ $own == / ]] && parent=$v2
    if grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null && mkdir "$parent/$name" 2>/dev/null; then
      echo $((300 * 1024 * 1024)) >"$parent/$name/memory.max" && echo 0 >"$parent/$name/memory.swap.max" 2>/dev/null
      echo "$parent/$name"
      return 0
    fi
  fi
  own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; exit }' /proc/self/cgroup)
  v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ { print $2; exit }' /proc/mounts)
  if [[ -n $v1 ]] && mkdir "$v1${own%/}/$name" 2>/dev/null; then
    echo $((300 * 1024 * 1024)) >"$v1${own%/}/$name/memory.limit_in_bytes" || return 1
    echo $((300 * 1024 * 1024)) >"$v1${own%/}/$name/memory.memsw.limit_in_bytes" 2>/dev/null
    echo "$v1${own%/}/$name"
    return 0
  fi
  echo "no memory cgroup can be made here"
  return 1
}

test_a_dataloader_worker_killed_by_the_oom_killer_is_named() {
  # The rank's child (a DataLoader worker; here a plain child process, the
  # same to the kernel and to air-run) leaks memory and is OOM-killed; the
  # rank then fails of torch's "exited unexpectedly". oom_killed was false
  # and nothing named the OOM killer.
  local cg
  cg=$(make_memory_cgroup) || { echo "skip: $cg"; return 0; }
  cat >leak.py <<'PY'
import subprocess, sys
leak = "b = []\nwhile True: b.append(bytearray(16 << 20))\n"
worker = subprocess.Popen([sys.executable, "-c", leak])
worker.wait()
raise RuntimeError("DataLoader worker (pid(s) %d) exited unexpectedly" % worker.pid)
PY
  # shellcheck disable=SC2016 # $$ is the inner shell's
  sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
    "$AIR_RUN" --cpu-ranks 1 --python /usr/bin/python3 --summary s.json leak.py >stdout 2>stderr
  rc=$?
  local kills
  kills=$(sed -n 's/^oom_kill //p' "$cg/memory.events" "$cg/memory.oom_control" 2>/dev/null | head -1)
  rmdir "$cg" 2>/dev/null
  [[ ${kills:-0} -ge 1 ]] || { echo "skip: the kernel killed nothing in the cgroup (oom_kill ${kills:-?})"; return 0; }
  expect_rc 1
  expect_contains "$(cat stderr)" "exited unexpectedly (leak.py:5); the OOM killer killed one of the run's processes meanwhile (a child of a rank, such as a DataLoader worker)"
  expect_eq "$(json_get s.json 'd["ranks"][0]["oom_killed"]')" "True"
}

run_tests
