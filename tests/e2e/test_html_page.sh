#!/usr/bin/env bash
# The run as a picture (docs/html.md): --html however the run ends, its
# placeholders, spec key and variable, `air-run report` drawing the same page
# from the summaries, and its refusals. What a browser shows is checked in
# test_html_browser.sh.
source "$(dirname "$0")/lib.sh"

count() { grep -o "$2" "$1" | wc -l | tr -d ' '; }

test_clean_run_page_matches_report_from_its_summary() {
  run_air --cpu-ranks 2 --summary s.json --html page.html --no-python sh -c 'echo hello; sleep 0.2'
  expect_rc 0
  [[ -s page.html ]] || fail "no page written"
  expect_eq "$(count page.html '<g class="lane')" 2
  expect_eq "$(count page.html 'data-kind="exit"')" 2
  expect_contains "$(cat page.html)" 'data-status="succeeded"'
  expect_eq "$(json_get s.json 'd["timeline"]["version"]')" 1
  expect_eq "$(json_get s.json 'len(d["timeline"]["ranks"])')" 2
  # Later, from the summary alone: the very same page.
  "$AIR_RUN" report s.json --html again.html 2>report.err || fail "report failed: $(cat report.err)"
  cmp -s page.html again.html || fail "air-run report drew another page than --html"
  # Without --html, the page goes to stdout.
  "$AIR_RUN" report s.json >stdout.html || fail "report to stdout failed"
  cmp -s page.html stdout.html || fail "air-run report on stdout differs"
}

test_steps_and_quiet_stretches_are_recorded() {
  cat >steps.py <<'PY'
import sys, time
sys.path.insert(0, sys.argv[1])
import air
for _ in range(25):
    air.step()
    time.sleep(0.1)
print("quiet now", flush=True)
time.sleep(6.5)
PY
  run_air --cpu-ranks 1 --python python3 --summary s.json --html page.html steps.py "$AIR_SOURCE_DIR/python"
  expect_rc 0
  # Readings once a second: the count rose to 25, the first step came, one quiet stretch of 5 s or more.
  expect_eq "$(json_get s.json 'd["timeline"]["ranks"][0]["steps"][-1][1]')" 25.0
  expect_eq "$(json_get s.json 'len(d["timeline"]["ranks"][0]["steps"]) >= 3')" True
  expect_eq "$(json_get s.json 'd["timeline"]["ranks"][0]["spans"][0]["first_step_s"] is not None')" True
  expect_eq "$(json_get s.json '[q[1] - q[0] >= 5 for q in d["timeline"]["ranks"][0]["quiet"]]')" "[True]"
  expect_eq "$(count page.html 'data-kind="quiet"')" 1
  expect_eq "$(count page.html 'class="rate"')" 1
}

test_crash_and_restart_draw_two_attempts() {
  cat >rank.sh <<'SH'
#!/bin/sh
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 1 ]; then echo "boom at step 3" >&2; exit 3; fi
sleep 0.3
SH
  chmod +x rank.sh
  run_air --cpu-ranks 2 --max-restarts 1 --summary s.json --html page.html --no-python ./rank.sh
  expect_rc 0
  expect_eq "$(count page.html '<g class="attempt ')" 2
  expect_contains "$(cat page.html)" 'data-attempt="0" data-status="failed"'
  expect_contains "$(cat page.html)" 'rank 1 exited with exit code 3'
  # Each rank's lane holds both attempts' spans.
  expect_eq "$(json_get s.json '[len(r["spans"]) for r in d["timeline"]["ranks"]]')" "[2, 2]"
  expect_eq "$(count page.html 'class="span"')" 4
}

test_timeout_and_interrupt_still_write_the_page() {
  run_air --cpu-ranks 2 --timeout 1 --grace-period 1 --html t.html --no-python sleep 30
  expect_rc 124
  expect_contains "$(cat t.html)" 'data-status="timed_out"'
  env --default-signal=INT "$AIR_RUN" --cpu-ranks 2 --html i.html --no-python sleep 30 >/dev/null 2>&1 &
  local air=$!
  sleep 1
  kill -INT "$air"
  wait "$air"
  expect_contains "$(cat i.html)" 'data-status="interrupted"'
}

test_a_failed_rank_is_named_on_its_lane() {
  run_air --cpu-ranks 3 --html f.html --no-python sh -c '[ $RANK = 2 ] && { echo "ValueError: bad shape" >&2; exit 7; }; sleep 5'
  expect_rc 7
  expect_contains "$(cat f.html)" 'data-exit="failed"'
  expect_contains "$(cat f.html)" 'exit code 7'
  expect_contains "$(cat f.html)" 'rank 2 exited with exit code 7'
}

test_placeholders_spec_key_and_variable() {
  run_air --cpu-ranks 1 --run-id pic --html 'out/{run_id}-{node_rank}.html' --no-python true
  expect_rc 0
  [[ -s out/pic-0.html ]] || fail "placeholders not filled: $(ls -R)"
  AIR_RUN_HTML=env.html run_air --cpu-ranks 1 --no-python true
  [[ -s env.html ]] || fail "AIR_RUN_HTML not honoured"
  printf 'cpu_ranks: 1\nhtml: spec.html\nno_python: true\ncommand: [true]\n' >job.yaml
  run_air -f job.yaml
  [[ -s spec.html ]] || fail "spec key html not honoured"
  run_air --cpu-ranks 1 --html 'x/{nope}.html' --no-python true
  expect_rc 2
  expect_contains "$err" "html (--html)"
}

test_page_goes_onto_a_stream_or_device_in_place() {
  run_air --cpu-ranks 1 --html /dev/stdout --no-python true
  expect_rc 0
  expect_contains "$out" "<!DOCTYPE html>"
  run_air --cpu-ranks 1 --html /dev/null --no-python true
  expect_rc 0
  [[ -c /dev/null ]] || fail "/dev/null replaced"
  mkdir folder
  run_air --cpu-ranks 1 --html folder --no-python true
  expect_rc 2
  expect_contains "$err" "HTML page folder: is a directory"
}

test_report_refuses_what_is_not_one_job() {
  echo 'not json' >bad.json
  run_air report bad.json --html x.html
  expect_rc 2
  expect_contains "$err" "bad.json: not JSON"
  run_air report missing.json
  expect_rc 2
  expect_contains "$err" "missing.json: no such file"
  run_air --cpu-ranks 1 --run-id one --summary one.json --no-python true
  run_air --cpu-ranks 1 --run-id two --summary two.json --no-python true
  run_air report one.json two.json --html x.html
  expect_rc 2
  expect_contains "$err" "one page draws one job"
  [[ ! -e x.html ]] || fail "a page was written for two runs"
}

test_two_nodes_summaries_make_one_page() {
  PORT=$(free_port_pair)
  start_node 0 --cpu-ranks 2 --run-id job --summary n0.json --no-python sh -c 'sleep 0.5'
  start_node 1 --cpu-ranks 2 --run-id job --summary n1.json --no-python sh -c 'sleep 0.5'
  wait "$node0_pid" "$node1_pid"
  expect_eq "$(cat node0.rc) $(cat node1.rc)" "0 0"
  "$AIR_RUN" report n1.json n0.json --html job.html 2>/dev/null || fail "report of two nodes failed"
  expect_eq "$(count job.html '<g class="lane')" 4
  expect_contains "$(cat job.html)" "(1)"
}

test_github_step_summary_says_where_the_page_lies() {
  GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY=$PWD/step.md GITHUB_SERVER_URL=https://github.com \
    GITHUB_REPOSITORY=org/repo GITHUB_RUN_ID=42 run_air --cpu-ranks 1 --html page.html --no-python true
  expect_rc 0
  expect_contains "$(cat step.md)" 'The run as a picture: `page.html`'
  expect_contains "$(cat step.md)" "https://github.com/org/repo/actions/runs/42#artifacts"
}

run_tests
