#!/usr/bin/env bash
# A run's log folder (--log-dir) is its own: a run id used again, or by two
# runs at the same time, never truncates, deletes or mixes another run's files.
source "$(dirname "$0")/lib.sh"

json() { # json FILE EXPR: one value from a JSON file
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

test_a_reused_run_id_gets_a_new_folder() {
  # The first run restarts once: rank0.log and rank0.attempt1.log.
  cat >first.sh <<'SH'
#!/bin/sh
echo "first run, attempt $TORCHELASTIC_RESTART_COUNT"
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3
exit 0
SH
  printf '#!/bin/sh\necho "second run"\n' >second.sh
  chmod +x first.sh second.sh
  run_air --cpu-ranks 1 --max-restarts 1 --run-id same --log-dir logs --no-python ./first.sh
  expect_rc 0
  run_air --cpu-ranks 1 --run-id same --log-dir logs --summary s.json --no-python ./second.sh
  expect_rc 0
  expect_contains "$err" "logs/same holds the logs of another run with run id same; this run's logs go to logs/same.1"
  # the first run's files are all there, untouched
  expect_eq "$(cat logs/same/rank0.log)" "first run, attempt 0"
  expect_eq "$(cat logs/same/rank0.attempt1.log)" "first run, attempt 1"
  # the second run's are apart, and alone
  expect_eq "$(cat logs/same.1/rank0.log)" "second run"
  [[ ! -e logs/same.1/rank0.attempt1.log ]] || fail "an earlier run's restart log sits beside the new one"
  expect_contains "$(json s.json 'd["ranks"][0]["log"]')" "logs/same.1/rank0.log"
  # a third run: the next free folder
  run_air --cpu-ranks 1 --run-id same --log-dir 'logs/{run_id}/{rank}' --no-python ./second.sh
  expect_rc 0
  expect_eq "$(cat logs/same.2/0/rank0.log)" "second run"
}

test_two_runs_at_once_with_one_run_id_keep_apart() {
  # Each rank writes its result and output at once, then waits until both runs are up.
  cat >rank.sh <<'SH'
#!/bin/sh
echo "{\"run\": \"$1\"}" >"$AIR_RESULT_FILE"
echo "output of run $1"
touch "started.$1"
while [ ! -e go ]; do sleep 0.05; done
SH
  chmod +x rank.sh
  "$AIR_RUN" --cpu-ranks 1 --run-id same --log-dir logs --summary a.json --no-python ./rank.sh a >a.out 2>a.err &
  local a=$!
  wait_for "[[ -f started.a ]]" 20 || fail "run a never started"
  "$AIR_RUN" --cpu-ranks 1 --run-id same --log-dir logs --summary b.json --no-python ./rank.sh b >b.out 2>b.err &
  local b=$!
  wait_for "[[ -f started.b ]]" 20 || fail "run b never started"
  touch go
  wait "$a"
  expect_eq "$?" 0
  wait "$b"
  expect_eq "$?" 0
  expect_eq "$(json a.json 'd["ranks"][0]["result"]')" "{'state': 'ok', 'value': {'run': 'a'}}"
  expect_eq "$(json b.json 'd["ranks"][0]["result"]')" "{'state': 'ok', 'value': {'run': 'b'}}"
  expect_eq "$(cat logs/same/rank0.log)" "output of run a"
  expect_eq "$(cat logs/same.1/rank0.log)" "output of run b"
}

test_nodes_of_one_run_share_its_folder() {
  # Two agents of one run on this host write into one folder, each with its own marker.
  local port
  port=$(free_port_pair)
  printf '#!/bin/sh\necho "rank $RANK"\n' >rank.sh
  chmod +x rank.sh
  for n in 0 1; do
    "$AIR_RUN" --nnodes 2 --node-rank $n --master-addr 127.0.0.1 --master-port "$port" --cpu-ranks 1 \
      --run-id shared --log-dir logs --no-python ./rank.sh >"node$n.out" 2>"node$n.err" &
  done
  wait
  expect_eq "$(cat logs/shared/rank0.log)" "rank 0"
  expect_eq "$(cat logs/shared/rank1.log)" "rank 1"
  [[ -f logs/shared/.air-run-node0 && -f logs/shared/.air-run-node1 ]] || fail "a node's marker is missing"
  [[ ! -e logs/shared.1 ]] || fail "a node of the run went to another folder"
}

run_tests
