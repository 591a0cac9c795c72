#!/usr/bin/env bash
# MLflow tracking through the built binary, against a loopback tracking server
# (tests/mlflow/golden_server.py) that answers like the recorded MLflow 2.17
# and 3.6 servers and rejects any request of another shape. One run per
# launch, created before rank 0 starts; the three variables in every rank;
# nesting; the final status after the last rank; retries; a dead server; no
# token in any output; two nodes sharing one run.
source "$(dirname "$0")/lib.sh"
unset MLFLOW_TRACKING_URI MLFLOW_RUN_ID MLFLOW_EXPERIMENT_ID MLFLOW_EXPERIMENT_NAME MLFLOW_TRACKING_TOKEN \
  MLFLOW_TRACKING_USERNAME MLFLOW_TRACKING_PASSWORD DATABRICKS_HOST DATABRICKS_TOKEN
SERVER=$AIR_SOURCE_DIR/tests/mlflow/golden_server.py

# start_server [golden_server.py OPTIONS...]: a fresh server for this test,
# stopped when the test's subshell exits. Sets $PORT and $URI.
start_server() {
  rm -f port
  python3 "$SERVER" --port-file port --log requests.jsonl --lifetime 240 "$@" 2>server.err &
  SERVER_PID=$!
  trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null' EXIT
  wait_for '[[ -s port ]]' 60 || { fail "server did not start: $(cat server.err)"; return 1; }
  PORT=$(cat port)
  URI=http://127.0.0.1:$PORT
}

# state PYTHON-EXPRESSION: evaluated on the server's whole store `d` (runs by id...).
state() {
  python3 -c "import json,sys,urllib.request; d=json.load(urllib.request.urlopen(sys.argv[1])); print(($1))" \
    "$URI/air-test/state"
}
# The one run of the store (fails the expression when there are several).
one_run() { state "(lambda r: ($1))([*d['runs'].values()][0] if len(d['runs']) == 1 else None)"; }

# Requests the server rejected for their shape: must be none in every test.
expect_no_rejected_requests() {
  local bad
  bad=$(python3 -c 'import json,sys; [print(e["method"], e["path"], e["rejected"]) for e in map(json.loads, open(sys.argv[1])) if "rejected" in e]' requests.jsonl)
  [[ -z $bad ]] || fail "the server rejected: $bad"
}

# A rank that records what it was given and whether its run existed when it started.
write_rank_script() {
  cat >r.sh <<'SH'
#!/bin/sh
echo "$MLFLOW_TRACKING_URI $MLFLOW_RUN_ID $MLFLOW_EXPERIMENT_ID" > "vars.$RANK"
python3 -c 'import json,os,urllib.request
r = json.load(urllib.request.urlopen(os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/get?run_id=" + os.environ["MLFLOW_RUN_ID"]))
print(r["run"]["info"]["status"])' > "seen.$RANK" 2>&1
exit "${EXIT_CODE:-0}"
SH
  chmod +x r.sh
}

test_run_created_before_rank_0_and_every_rank_gets_the_variables() {
  start_server || return
  write_rank_script
  run_air --mlflow-tracking-uri "$URI" --mlflow-experiment e2e --summary s.json --cpu-ranks 3 --no-python ./r.sh
  expect_rc 0
  local run exp r
  run=$(one_run 'r["run_id"]')
  exp=$(one_run 'r["experiment_id"]')
  [[ $run =~ ^[0-9a-f]{32}$ ]] || fail "no single run in the store: $run"
  for r in 0 1 2; do
    expect_eq "$(cat "vars.$r")" "$URI $run $exp"
    expect_eq "$(cat "seen.$r")" "RUNNING" # the run existed (and ran) when the rank started
  done
  expect_eq "$(state 'd["experiments"]["'"$exp"'"]["name"]')" "e2e"
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_eq "$(one_run 'r["run_name"]')" "r.sh"
  expect_eq "$(one_run 'r["params"]["ranks"] + " " + r["params"]["accelerator_type"] + " " + r["params"]["target"]')" "3 CPU ./r.sh"
  expect_eq "$(one_run 'sorted(m["key"] for m in r["metrics"])')" \
    "['duration_s', 'exit_code', 'rank_0/exit_code', 'rank_0/peak_rss_mb', 'rank_1/exit_code', 'rank_1/peak_rss_mb', 'rank_2/exit_code', 'rank_2/peak_rss_mb']"
  expect_eq "$(one_run 'r["tags"]["air.run_id"] == r["params"]["air_run_id"]')" "True"
  expect_contains "$err" "air-run: MLflow: View run at $URI/#/experiments/$exp/runs/$run"
  # once at the start, once in the final report
  expect_eq "$(grep -c 'View run at' stderr)" "2"
  expect_eq "$(json_get s.json 'd["mlflow"]["run_id"], d["mlflow"]["status"], d["mlflow"]["tracking"]')" \
    "$run FINISHED ok"
  expect_eq "$(json_get s.json 'd["mlflow"]["link"]')" "$URI/#/experiments/$exp/runs/$run"
  # the summary, as an artifact of the run
  expect_eq "$(state 'json.loads(d["artifacts"]["'"$exp/$run"'/artifacts/air-run-summary.json"])["mlflow"]["run_id"]')" "$run"
  expect_no_rejected_requests
}

test_the_runs_page_goes_beside_the_summary_whole() {
  start_server || return
  write_rank_script
  run_air --mlflow-tracking-uri "$URI" --mlflow-experiment page --html page.html --cpu-ranks 2 --no-python ./r.sh
  expect_rc 0
  local run exp a
  run=$(one_run 'r["run_id"]')
  exp=$(one_run 'r["experiment_id"]')
  a="$exp/$run/artifacts"
  expect_eq "$(state 'sorted(d["artifacts"])')" "['$a/air-run-summary.json', '$a/air-run.html']"
  expect_eq "$(state 'd["artifact_bytes"]["'"$a"'/air-run.html"]["content_type"]')" "text/html"
  # whole: the very bytes `air-run report` draws from the summary uploaded beside it
  state 'd["artifacts"]["'"$a"'/air-run-summary.json"]' >uploaded.json
  "$AIR_RUN" report uploaded.json --html redrawn.html >/dev/null 2>&1 || fail "report failed"
  expect_eq "$(state 'd["artifact_bytes"]["'"$a"'/air-run.html"]["sha256"]')" "$(sha256sum <redrawn.html | cut -d' ' -f1)"
  expect_eq "$(state 'd["artifact_bytes"]["'"$a"'/air-run.html"]["length"]')" "$(wc -c <redrawn.html)"
  expect_contains "$(state 'd["artifacts"]["'"$a"'/air-run.html"]')" "$run"
  expect_contains "$(state 'd["artifacts"]["'"$a"'/air-run.html"][-8:]')" "</html>"
  [[ -s page.html ]] || fail "no page.html on disk"
  expect_no_rejected_requests
}

test_the_page_goes_to_the_run_without_html_too() {
  start_server || return
  run_air --mlflow-tracking-uri "$URI" --mlflow-experiment page --cpu-ranks 1 --no-python true
  expect_rc 0
  local run exp
  run=$(one_run 'r["run_id"]')
  exp=$(one_run 'r["experiment_id"]')
  expect_eq "$(state 'sorted(d["artifacts"])')" "['$exp/$run/artifacts/air-run-summary.json', '$exp/$run/artifacts/air-run.html']"
  [[ -z $(ls ./*.html 2>/dev/null) ]] || fail "a page was written to disk without --html"
  expect_no_rejected_requests
}

test_existing_experiment_is_reused_and_a_second_launch_makes_a_second_run() {
  start_server || return
  run_air --mlflow-tracking-uri "$URI" --mlflow-experiment shared --cpu-ranks 1 --no-python true
  expect_rc 0
  run_air --mlflow-tracking-uri "$URI" --mlflow-experiment shared --cpu-ranks 1 --no-python true
  expect_rc 0
  expect_eq "$(state 'len(d["experiments"]), len(d["runs"]), len({r["experiment_id"] for r in d["runs"].values()})')" "(2, 2, 1)"
  expect_eq "$(grep -c experiments/create requests.jsonl)" "1"
  expect_no_rejected_requests
}

test_nested_under_callers_run() {
  start_server || return
  # the caller's own run, in an experiment of its own
  local parent_exp parent
  parent_exp=$(curl -s -H 'Content-Type: application/json' -d '{"name":"notebook"}' "$URI/api/2.0/mlflow/experiments/create" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["experiment_id"])')
  parent=$(curl -s -H 'Content-Type: application/json' -d "{\"experiment_id\":\"$parent_exp\",\"run_name\":\"cell\"}" \
    "$URI/api/2.0/mlflow/runs/create" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["info"]["run_id"])')
  write_rank_script
  MLFLOW_RUN_ID=$parent run_air --mlflow-tracking-uri "$URI" --mlflow-run-name train.distributed --summary s.json \
    --cpu-ranks 2 --no-python ./r.sh
  expect_rc 0
  local child
  child=$(state '[k for k, r in d["runs"].items() if r["tags"].get("mlflow.parentRunId") == "'"$parent"'"][0]')
  expect_eq "$(state 'd["runs"]["'"$child"'"]["experiment_id"], d["runs"]["'"$child"'"]["run_name"]')" "('$parent_exp', 'train.distributed')"
  expect_eq "$(cut -d' ' -f2 vars.1)" "$child" # ranks log into the child, not the parent
  expect_eq "$(json_get s.json 'd["mlflow"]["parent_run_id"]')" "$parent"
  expect_eq "$(state 'd["runs"]["'"$parent"'"]["status"]')" "RUNNING" # the caller's run is the caller's
  expect_no_rejected_requests
}

test_final_status_failed_overrides_what_a_rank_set() {
  start_server || return
  # Like MLflow's exit hook, rank 1 marks the run FINISHED, then fails.
  cat >r.sh <<'SH'
#!/bin/sh
if [ "$RANK" = 1 ]; then
  python3 -c 'import json,os,urllib.request
req = urllib.request.Request(os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/update", method="POST",
    data=json.dumps({"run_id": os.environ["MLFLOW_RUN_ID"], "status": "FINISHED", "end_time": 1}).encode(),
    headers={"Content-Type": "application/json"})
urllib.request.urlopen(req).read()'
  exit 3
fi
exec sleep 30
SH
  chmod +x r.sh
  run_air --mlflow-tracking-uri "$URI" --summary s.json --grace-period 2s --cpu-ranks 2 --no-python ./r.sh
  expect_rc 3
  expect_eq "$(one_run 'r["status_history"]')" "['FINISHED', 'FAILED']"
  expect_eq "$(one_run '[m["value"] for m in r["metrics"] if m["key"] in ("exit_code", "rank_1/exit_code")]')" "[3.0, 3.0]"
  expect_eq "$(one_run 'r["tags"]["air.status"], r["tags"]["air.exit_code"]')" "('failed', '3')"
  expect_eq "$(json_get s.json 'd["mlflow"]["status"]')" "FAILED"
  expect_no_rejected_requests
}

test_timeout_is_killed() {
  start_server || return
  run_air --mlflow-tracking-uri "$URI" --timeout 1s --grace-period 1s --cpu-ranks 2 --no-python sleep 30
  expect_rc 124
  expect_eq "$(one_run 'r["status"], r["tags"]["air.status"]')" "('KILLED', 'timed_out')"
  expect_no_rejected_requests
}

test_ctrl_c_is_killed() {
  start_server || return
  env --default-signal=INT "$AIR_RUN" --mlflow-tracking-uri "$URI" --cpu-ranks 2 --no-python \
    sh -c 'echo $$ > pid.$RANK; exec sleep 30' >stdout 2>stderr &
  local air=$!
  wait_for '[[ -s pid.0 && -s pid.1 ]]' 20 || fail "ranks did not start"
  kill -INT $air
  finish_air 30
  expect_rc 130
  expect_eq "$(one_run 'r["status"], r["tags"]["air.status"]')" "('KILLED', 'interrupted')"
  expect_no_rejected_requests
}

test_target_that_cannot_start_fails_the_run() {
  start_server || return
  run_air --mlflow-tracking-uri "$URI" --cpu-ranks 2 --no-python ./no-such-program
  expect_rc 127
  expect_eq "$(one_run 'r["status"], r["tags"]["air.status"], r["tags"]["air.exit_code"]')" \
    "('FAILED', 'launch_failed', '127')"
  expect_no_rejected_requests
}

test_503_then_success_is_retried() {
  start_server --fail-first 3 --fail-status 503 || return
  run_air --mlflow-tracking-uri "$URI" --summary s.json --cpu-ranks 1 --no-python true
  expect_rc 0
  expect_eq "$(python3 -c 'import json,sys; print([e["status"] for e in map(json.loads, open(sys.argv[1]))][:4])' requests.jsonl)" \
    "[503, 503, 503, 200]"
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_eq "$(json_get s.json 'd["mlflow"]["tracking"]')" "ok"
  expect_not_contains "$err" "warning"
  expect_no_rejected_requests
}

test_429_at_the_end_is_retried() {
  start_server --fail-first 2 --fail-status 429 --fail-endpoint runs/update || return
  run_air --mlflow-tracking-uri "$URI" --cpu-ranks 1 --no-python true
  expect_rc 0
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_eq "$(grep -c '"status": 429' requests.jsonl)" "2"
}

test_dead_server_not_required_runs_untracked_with_one_warning() {
  start_server || return
  kill $SERVER_PID # nothing listens on $PORT any more
  wait $SERVER_PID 2>/dev/null
  run_air --mlflow-tracking-uri "$URI" --mlflow-timeout 1s --summary s.json --cpu-ranks 2 --no-python \
    sh -c 'echo "${MLFLOW_RUN_ID:-none}" > ran.$RANK'
  expect_rc 0
  expect_eq "$(cat ran.0 ran.1)" $'none\nnone'
  expect_eq "$(grep -c 'warning' stderr)" "1"
  expect_contains "$err" "air-run: warning: MLflow: no run could be created in the tracking server at $URI"
  expect_contains "$err" "air-run: MLflow: not tracked:"
  expect_eq "$(json_get s.json 'd["mlflow"]["tracking"], d["mlflow"]["run_id"]')" "failed None"
  expect_contains "$(json_get s.json 'd["mlflow"]["errors"][0]')" "Couldn't connect"
}

test_dead_server_required_launches_nothing() {
  start_server || return
  kill $SERVER_PID
  wait $SERVER_PID 2>/dev/null
  run_air --mlflow-tracking-uri "$URI" --mlflow-timeout 1s --mlflow-required --cpu-ranks 2 --no-python \
    sh -c 'touch ran.$RANK'
  expect_rc 2
  [[ ! -e ran.0 && ! -e ran.1 ]] || fail "a rank was launched"
  expect_contains "$err" "air-run: error: mlflow.required is true and no MLflow run could be created"
  expect_contains "$err" "nothing was launched"
}

test_required_via_yaml_and_variables() {
  start_server || return
  printf 'mlflow:\n  experiment: from-yaml\n  required: true\n  tags:\n    team: vision\n    mlflow.note.content: hello world\ncommand: [true]\nno_python: true\ncpu_ranks: 1\n' >job.yaml
  AIR_RUN_MLFLOW_TRACKING_URI=$URI AIR_RUN_MLFLOW_TAGS='owner=me,stage=test' run_air -f job.yaml --dry-run
  expect_rc 0
  expect_contains "$out" "mlflow.tracking_uri = $URI  (env AIR_RUN_MLFLOW_TRACKING_URI)"
  expect_contains "$out" "mlflow.experiment = from-yaml  (job.yaml:2:3)"
  expect_contains "$out" "mlflow.required = true  (job.yaml:3:3)"
  # tags merge per tag, like env
  expect_contains "$out" "mlflow.tags = {mlflow.note.content=hello world, owner=me, stage=test, team=vision}  (env AIR_RUN_MLFLOW_TAGS)"
  MLFLOW_TRACKING_URI=$URI run_air -f job.yaml
  expect_rc 0
  expect_eq "$(one_run 'r["tags"]["team"], r["tags"]["mlflow.note.content"]')" "('vision', 'hello world')"
  expect_eq "$(state '[e["name"] for e in d["experiments"].values()]')" "['Default', 'from-yaml']"
}

test_bad_mlflow_values_are_usage_errors() {
  run_air --mlflow-tag 'bad*name=1' --no-python true
  expect_rc 2
  expect_contains "$err" "--mlflow-tag: invalid tag name 'bad*name'"
  printf 'mlflow:\n  tags:\n    "a b": 1\n    "x=": 2\n' >bad.yaml
  run_air -f bad.yaml --no-python true
  expect_rc 2
  expect_contains "$err" "bad.yaml:4:5: mlflow.tags: invalid tag name"
  run_air --mlflow-tracking-uri databricks --no-python true
  expect_rc 2
  expect_contains "$err" "set DATABRICKS_HOST and DATABRICKS_TOKEN"
}

test_no_token_in_any_output() {
  local token=tok-$RANDOM$RANDOM-secret
  start_server --token "$token" || return
  MLFLOW_TRACKING_TOKEN=$token run_air --mlflow-tracking-uri "$URI" --dry-run --cpu-ranks 1 --no-python true
  expect_rc 0
  expect_not_contains "$out$err" "$token"
  MLFLOW_TRACKING_TOKEN=$token run_air --mlflow-tracking-uri "$URI" --json --summary s.json --env SHOW=1 \
    --cpu-ranks 1 --no-python true
  expect_rc 0
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_not_contains "$out$err$(cat s.json)" "$token"
  expect_eq "$(python3 -c 'import json,sys; print({e["auth"] for e in map(json.loads, open(sys.argv[1]))})' requests.jsonl)" "{'ok'}"
  # a wrong token: every call is refused; the launch goes on untracked
  MLFLOW_TRACKING_TOKEN=wrong run_air --mlflow-tracking-uri "$URI" --summary s2.json --cpu-ranks 1 --no-python true
  expect_rc 0
  expect_contains "$(json_get s2.json 'd["mlflow"]["errors"][0]')" "HTTP 401 UNAUTHENTICATED"
}

test_password_in_the_uri_is_never_shown() {
  start_server || return
  local uri=http://me:pw-$RANDOM-hidden@127.0.0.1:$PORT
  run_air --mlflow-tracking-uri "$uri" --dry-run --no-python true
  expect_contains "$out" "mlflow.tracking_uri = $URI"
  run_air --mlflow-tracking-uri "$uri" --summary s.json --cpu-ranks 1 --no-python true
  expect_rc 0
  expect_not_contains "$out$err$(cat s.json)" "hidden"
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
}

test_password_in_the_uri_reaches_the_ranks_as_variables_only() {
  start_server --basic 'me:p@ss-hidden' || return
  local uri=http://me:p%40ss-hidden@127.0.0.1:$PORT
  # Like MLflow's client, each rank prints its run's link built from the URI it was given.
  cat >r.sh <<'SH'
#!/bin/sh
echo "View run at $MLFLOW_TRACKING_URI/#/experiments/$MLFLOW_EXPERIMENT_ID/runs/$MLFLOW_RUN_ID"
echo "$MLFLOW_TRACKING_URI|$MLFLOW_TRACKING_USERNAME|$MLFLOW_TRACKING_PASSWORD" > "vars.$RANK"
python3 -c 'import base64,json,os,urllib.request
e = os.environ
auth = base64.b64encode((e["MLFLOW_TRACKING_USERNAME"] + ":" + e["MLFLOW_TRACKING_PASSWORD"]).encode()).decode()
req = urllib.request.Request(e["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/get?run_id=" + e["MLFLOW_RUN_ID"],
    headers={"Authorization": "Basic " + auth})
print(json.load(urllib.request.urlopen(req))["run"]["info"]["status"])' > "seen.$RANK" 2>&1
SH
  chmod +x r.sh
  run_air --mlflow-tracking-uri "$uri" --summary s.json --cpu-ranks 2 --no-python ./r.sh
  expect_rc 0
  expect_eq "$(cat vars.0)" "$URI|me|p@ss-hidden" # percent-decoded
  expect_eq "$(cat seen.1)" "RUNNING"             # the ranks' own client gets in with them
  expect_contains "$out" "View run at $URI/#/experiments/"
  expect_not_contains "$out$err$(cat s.json)" "hidden"
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_eq "$(python3 -c 'import json,sys; print({e["auth"] for e in map(json.loads, open(sys.argv[1]))})' requests.jsonl)" "{'ok'}"
  expect_no_rejected_requests
}

test_ctrl_c_ends_the_final_retries_at_once() {
  start_server || return
  env --default-signal=INT "$AIR_RUN" --mlflow-tracking-uri "$URI" --mlflow-timeout 60s --summary s.json \
    --cpu-ranks 1 --no-python sh -c 'touch started; while [ ! -e go ]; do sleep 0.05; done' >stdout 2>stderr &
  local air=$!
  wait_for '[[ -e started ]]' 20 || fail "the rank did not start"
  # The server goes bad while the rank runs: every final request is answered 503 and retried.
  python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1] + "/air-test/fail-all")' "$URI"
  touch go
  wait_for 'grep -q "runs/update.*\"status\": 503" requests.jsonl' 20 || fail "no retried runs/update"
  kill -INT $air
  finish_air 10 # not the 60 s of --mlflow-timeout: every step still waiting is dropped
  expect_rc 0   # the run itself succeeded
  expect_contains "$(json_get s.json 'd["mlflow"]["errors"]')" "interrupted"
  expect_eq "$(json_get s.json 'd["mlflow"]["tracking"]')" "failed"
}

test_lost_reply_to_runs_create_adopts_the_run_instead_of_making_another() {
  start_server --drop-replies 1 --drop-endpoint runs/create || return
  write_rank_script
  run_air --mlflow-tracking-uri "$URI" --mlflow-experiment lost --summary s.json --cpu-ranks 2 --no-python ./r.sh
  expect_rc 0
  local run
  run=$(one_run 'r["run_id"]') # one run, not two
  [[ $run =~ ^[0-9a-f]{32}$ ]] || fail "not exactly one run in the store: $(state 'list(d["runs"])')"
  expect_eq "$(grep -c 'runs/create' requests.jsonl)" "1"
  expect_eq "$(grep -c 'runs/search' requests.jsonl)" "1"
  expect_eq "$(cut -d' ' -f2 vars.0)" "$run"
  expect_eq "$(one_run 'r["status"], r["params"]["ranks"]')" "('FINISHED', '2')"
  expect_eq "$(json_get s.json 'd["mlflow"]["run_id"], d["mlflow"]["tracking"]')" "$run ok"
  expect_no_rejected_requests
}

test_dead_server_ranks_get_no_tracking_variables() {
  start_server || return
  kill $SERVER_PID
  wait $SERVER_PID 2>/dev/null
  # The caller's environment names the dead server, a run and an experiment: none of it may
  # reach the ranks, whose own client would wait on the server, then fail.
  MLFLOW_TRACKING_URI=$URI MLFLOW_RUN_ID=0123456789abcdef0123456789abcdef MLFLOW_EXPERIMENT_ID=7 \
    run_air --mlflow-timeout 1s --cpu-ranks 2 --no-python \
    sh -c 'echo "${MLFLOW_TRACKING_URI:-none} ${MLFLOW_RUN_ID:-none} ${MLFLOW_EXPERIMENT_ID:-none}" > ran.$RANK'
  expect_rc 0
  expect_eq "$(cat ran.0 ran.1)" $'none none none\nnone none none'
  expect_eq "$(grep -c 'warning' stderr)" "1"
  expect_contains "$err" "the ranks get no MLFLOW_TRACKING_URI or MLFLOW_RUN_ID"
}

# A Python rank's user code records when its process was born (epoch seconds,
# from its age in /proc) and the MLflow variables it was given.
write_python_rank() {
  cat >rank.py <<'PY'
import json, os, sys, time
started = float(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
born = time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - started)
env = {k: v for k, v in os.environ.items() if k.startswith(("MLFLOW_", "AIR_RUN_MLFLOW_"))}
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
with open("seen.%s.%s" % (os.environ["RANK"], attempt), "w") as f:
    json.dump({"born": born, "env": sorted(env.items())}, f)
sys.exit(int(os.environ.get("FAIL_ATTEMPT") == attempt and os.environ["RANK"] == "0"))
PY
}

# Time of the first request to ENDPOINT in the server's log (epoch seconds).
request_time() {
  python3 -c 'import json,sys; print(next(e["time"] for e in map(json.loads, open("requests.jsonl")) if e["path"].endswith(sys.argv[1])))' "$1"
}

test_python_rank_starts_before_the_run_exists_and_gets_it_before_user_code() {
  # runs/create is answered 2 s late: a rank that starts only once the run exists starts 2 s after it arrived.
  start_server --delay-ms 2000 --delay-endpoint runs/create || return
  write_python_rank
  run_air --mlflow-tracking-uri "$URI" --mlflow-experiment early --cpu-ranks 2 rank.py
  expect_rc 0
  local run exp created r
  run=$(one_run 'r["run_id"]')
  exp=$(one_run 'r["experiment_id"]')
  [[ $run =~ ^[0-9a-f]{32}$ ]] || fail "no single run in the store: $run"
  created=$(request_time runs/create)
  for r in 0 1; do
    expect_eq "$(json_get "seen.$r.0" 'd["env"]')" \
      "[['MLFLOW_EXPERIMENT_ID', '$exp'], ['MLFLOW_RUN_ID', '$run'], ['MLFLOW_TRACKING_URI', '$URI']]"
    expect_eq "$(json_get "seen.$r.0" "d['born'] < $created + 1.5")" "True"
  done
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_no_rejected_requests
}

test_python_rank_code_runs_on_until_it_looks_for_the_run() {
  # runs/create is answered 4 s late. The rank's code starts at once (as it
  # would import torch); its first child process waits for the run, and
  # inherits it, like the rank's own environment.
  start_server --delay-ms 4000 --delay-endpoint runs/create || return
  cat >lazy.py <<'PY'
import json, os, subprocess, time
began = time.time()
child = subprocess.run(["sh", "-c", 'echo "$MLFLOW_RUN_ID"'], stdout=subprocess.PIPE, universal_newlines=True)
looked = time.time()
with open("lazy.%s" % os.environ["RANK"], "w") as f:
    json.dump({"began": began, "looked": looked, "child": child.stdout.strip(),
               "own": os.environ.get("MLFLOW_RUN_ID")}, f)
PY
  run_air --mlflow-tracking-uri "$URI" --cpu-ranks 2 lazy.py
  expect_rc 0
  local run created r
  run=$(one_run 'r["run_id"]')
  created=$(request_time runs/create)
  for r in 0 1; do
    expect_eq "$(json_get "lazy.$r" 'd["child"], d["own"]')" "$run $run"
    expect_eq "$(json_get "lazy.$r" "d['began'] < $created + 3.0")" "True"  # ran before the answer
    expect_eq "$(json_get "lazy.$r" "d['looked'] > $created + 3.5")" "True" # the child waited for it
  done
  expect_no_rejected_requests
}

test_python_rank_with_the_server_down_starts_at_once_and_gets_no_tracking_variables() {
  start_server || return
  kill $SERVER_PID # nothing listens on $PORT any more
  wait $SERVER_PID 2>/dev/null
  write_python_rank
  local began r
  began=$(date +%s.%N)
  # The caller's variables name the dead server: none of them may reach user code.
  MLFLOW_TRACKING_URI=$URI MLFLOW_RUN_ID=0123456789abcdef0123456789abcdef MLFLOW_EXPERIMENT_ID=7 \
    run_air --mlflow-timeout 4s --summary s.json --cpu-ranks 2 rank.py
  expect_rc 0
  for r in 0 1; do
    expect_eq "$(json_get "seen.$r.0" 'd["env"]')" "[]"
    # born while air-run still tried the server (4 s), not once it had given up
    expect_eq "$(json_get "seen.$r.0" "d['born'] < $began + 2.5")" "True"
  done
  expect_eq "$(grep -c 'warning' stderr)" "1"
  expect_eq "$(json_get s.json 'd["mlflow"]["tracking"], d["mlflow"]["run_id"]')" "failed None"
}

test_non_python_rank_starts_once_the_run_exists() {
  start_server --delay-ms 1000 --delay-endpoint runs/create || return
  write_rank_script
  run_air --mlflow-tracking-uri "$URI" --cpu-ranks 2 --no-python ./r.sh
  expect_rc 0
  local run r
  run=$(one_run 'r["run_id"]')
  for r in 0 1; do
    expect_eq "$(cat "vars.$r")" "$URI $run 0"
    expect_eq "$(cat "seen.$r")" "RUNNING" # in its environment when it started
  done
  expect_no_rejected_requests
}

test_python_rank_restarted_gets_the_same_run() {
  start_server --delay-ms 1000 --delay-endpoint runs/create || return
  write_python_rank
  # Rank 0 fails its first attempt (rank 1 may be stopped before its user code runs).
  FAIL_ATTEMPT=0 run_air --mlflow-tracking-uri "$URI" --max-restarts 1 --cpu-ranks 2 rank.py
  expect_rc 0
  local run
  run=$(one_run 'r["run_id"]')
  expect_contains "$(json_get seen.0.0 'd["env"]')" "['MLFLOW_RUN_ID', '$run']"
  expect_contains "$(json_get seen.0.1 'd["env"]')" "['MLFLOW_RUN_ID', '$run']"
  expect_contains "$(json_get seen.1.1 'd["env"]')" "['MLFLOW_RUN_ID', '$run']"
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_no_rejected_requests
}

test_python_rank_gets_the_uris_credentials_as_variables_from_the_run_file() {
  start_server --basic 'me:p@s3=w0rd' --delay-ms 500 --delay-endpoint runs/create || return
  write_python_rank
  run_air --mlflow-tracking-uri "http://me:p%40s3%3Dw0rd@127.0.0.1:$PORT" --cpu-ranks 1 rank.py
  expect_rc 0
  local run
  run=$(one_run 'r["run_id"]')
  expect_eq "$(json_get seen.0.0 'd["env"]')" \
    "[['MLFLOW_EXPERIMENT_ID', '0'], ['MLFLOW_RUN_ID', '$run'], ['MLFLOW_TRACKING_PASSWORD', 'p@s3=w0rd'], ['MLFLOW_TRACKING_URI', '$URI'], ['MLFLOW_TRACKING_USERNAME', 'me']]"
  expect_no_rejected_requests
}

test_stale_run_id_of_the_caller_starts_a_top_level_run() {
  start_server || return
  write_rank_script
  # a run that does not exist
  MLFLOW_RUN_ID=0123456789abcdef0123456789abcdef run_air --mlflow-tracking-uri "$URI" --summary s.json \
    --cpu-ranks 2 --no-python ./r.sh
  expect_rc 0
  local run
  run=$(one_run 'r["run_id"]')
  [[ $run =~ ^[0-9a-f]{32}$ ]] || fail "no run created"
  expect_eq "$(one_run '"mlflow.parentRunId" in r["tags"]')" "False"
  expect_eq "$(cut -d' ' -f2 vars.1)" "$run"
  expect_eq "$(cat seen.0)" "RUNNING"
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_contains "$err" "warning: MLflow: MLFLOW_RUN_ID 0123456789abcdef0123456789abcdef is not a run to nest under"
  expect_eq "$(json_get s.json 'd["mlflow"]["parent_run_id"], d["mlflow"]["tracking"]')" "None ok"
  # a finished one: not nested under either
  MLFLOW_RUN_ID=$run run_air --mlflow-tracking-uri "$URI" --cpu-ranks 1 --no-python ./r.sh
  expect_rc 0
  expect_eq "$(state 'sum("mlflow.parentRunId" in r["tags"] for r in d["runs"].values())')" "0"
  expect_contains "$err" "is FINISHED"
  expect_no_rejected_requests
}

test_databricks_uses_host_and_token() {
  start_server --token dapi-e2e-secret || return
  DATABRICKS_HOST=$URI DATABRICKS_TOKEN=dapi-e2e-secret MLFLOW_EXPERIMENT_NAME=/Users/me@example.com/exp \
    MLFLOW_TRACKING_URI=databricks run_air --summary s.json --cpu-ranks 1 --no-python true
  expect_rc 0
  local run exp
  run=$(one_run 'r["run_id"]')
  exp=$(one_run 'r["experiment_id"]')
  expect_contains "$err" "View run at $URI/ml/experiments/$exp/runs/$run"
  expect_not_contains "$out$err$(cat s.json)" "dapi-e2e-secret"
  expect_no_rejected_requests
}

# Plain http:// goes straight to the server through air-run's own client
# (nothing to load); with a proxy variable set, libcurl takes the requests and
# sends them to the proxy, which here is the test server itself.
test_plain_http_goes_direct_and_a_proxy_goes_through_libcurl() {
  start_server || return
  run_air --mlflow-tracking-uri "$URI" --cpu-ranks 1 --no-python true
  expect_rc 0
  expect_eq "$(grep -c proxied_to requests.jsonl)" "0"
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  : >requests.jsonl
  http_proxy=$URI run_air --mlflow-tracking-uri http://tracking.invalid:5000 --summary s.json --cpu-ranks 1 \
    --no-python true
  expect_rc 0
  expect_eq "$(json_get s.json 'd["mlflow"]["tracking"]')" "ok"
  local through_proxy
  through_proxy=$(python3 -c 'import json,sys; print(sorted({e.get("proxied_to", "direct") for e in map(json.loads, open(sys.argv[1]))}))' requests.jsonl)
  expect_eq "$through_proxy" "['tracking.invalid:5000']"
  expect_no_rejected_requests
}

test_recorded_3_6_server_too() {
  start_server --version 3.6.1.dev0 || return
  write_rank_script
  run_air --mlflow-tracking-uri "$URI" --mlflow-experiment v3 --cpu-ranks 2 --no-python ./r.sh
  expect_rc 0
  expect_eq "$(cat seen.0)" "RUNNING"
  expect_eq "$(one_run 'r["status"]')" "FINISHED"
  expect_no_rejected_requests
}

test_no_tracking_uri_no_mlflow() {
  run_air --summary s.json --cpu-ranks 1 --no-python sh -c 'echo "${MLFLOW_RUN_ID:-unset}" > ran'
  expect_rc 0
  expect_eq "$(cat ran)" "unset"
  expect_not_contains "$err" "MLflow"
  expect_eq "$(json_get s.json 'd["mlflow"]')" "None"
}

test_file_store_without_mlflow_package_says_what_to_install() {
  local py=python3
  if "$py" -c 'import mlflow' 2>/dev/null; then
    echo "  (skipped: $py can import mlflow)"
    return 0
  fi
  run_air --mlflow-tracking-uri file:./mlruns --python "$py" --cpu-ranks 1 --no-python sh -c 'touch ran'
  expect_rc 0
  [[ -e ran ]] || fail "the launch did not go on"
  expect_contains "$err" "a file store is written through the mlflow Python package, which $py cannot import"
  expect_contains "$err" "pip install mlflow"
  run_air --mlflow-tracking-uri sqlite:///m.db --mlflow-required --python "$py" --no-python sh -c 'touch ran2'
  expect_rc 2
  [[ ! -e ran2 ]] || fail "launched without a required run"
  expect_contains "$err" "a SQLite store is written through the mlflow Python package"
}

test_summary_with_mlflow_validates_against_schema() {
  python3 -c 'import jsonschema' 2>/dev/null || { echo "  (skipped: no jsonschema)"; return 0; }
  start_server || return
  run_air --mlflow-tracking-uri "$URI" --summary s.json --cpu-ranks 1 --no-python true
  python3 -c 'import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), cls=jsonschema.Draft202012Validator)' \
    s.json "$AIR_SOURCE_DIR/docs/summary.schema.json" || fail "summary does not validate"
}

test_two_nodes_share_one_run() {
  start_server || return
  local mport
  mport=$(free_port_pair)
  write_rank_script
  local n
  for n in 0 1; do
    (MLFLOW_TRACKING_URI=$URI "$AIR_RUN" --nnodes 2 --node-rank $n --master-addr 127.0.0.1 --master-port "$mport" \
      --join-timeout 30s --summary "s$n.json" --cpu-ranks 2 --no-python ./r.sh >"node$n.out" 2>"node$n.err"
    echo $? >"node$n.rc") &
  done
  wait_for '[[ -s node0.rc && -s node1.rc ]]' 60 || fail "nodes did not finish"
  expect_eq "$(cat node0.rc node1.rc)" $'0\n0'
  expect_eq "$(grep -c runs/create requests.jsonl)" "1"
  local run
  run=$(one_run 'r["run_id"]')
  for n in 0 1 2 3; do expect_eq "$(cut -d' ' -f2 "vars.$n")" "$run"; done
  expect_eq "$(one_run 'r["status"], r["params"]["ranks"], r["params"]["nodes"]')" "('FINISHED', '4', '2')"
  # every node logs its own ranks
  expect_eq "$(one_run 'sorted(m["key"] for m in r["metrics"] if m["key"].endswith("exit_code"))')" \
    "['exit_code', 'rank_0/exit_code', 'rank_1/exit_code', 'rank_2/exit_code', 'rank_3/exit_code']"
  expect_eq "$(json_get s1.json 'd["mlflow"]["run_id"], d["mlflow"]["status"]')" "$run None"
  # node 0's summary and page only
  expect_eq "$(state 'sorted(k.split("/")[-1] for k in d["artifacts"])')" "['air-run-summary.json', 'air-run.html']"
  expect_no_rejected_requests
}

run_tests
