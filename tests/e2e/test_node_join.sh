#!/usr/bin/env bash
# A node that joins later under c10d --nnodes MIN:MAX: node 0 admits it while
# the job runs, ends the attempt everywhere (a membership change, which does
# not count against --max-restarts), and the group restarts with it at the
# larger world size, as torchrun's elastic agent does; beyond MAX an agent is
# refused at once (docs/multinode.md, "A node that joins later").
source "$(dirname "$0")/lib.sh"

# Each rank notes what it runs as, then works in small steps: attempt 0 until
# the file `stop` appears, a later attempt for a few steps.
write_worker() {
  cat >work.sh <<'SH'
#!/bin/sh
echo "$TORCHELASTIC_RESTART_COUNT $GROUP_RANK $RANK $WORLD_SIZE $GROUP_WORLD_SIZE" >>"seen.$AGENT"
steps=5
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && steps=1200
while [ "$steps" -gt 0 ] && [ ! -e stop ]; do sleep 0.1; steps=$((steps - 1)); done
[ "$TORCHELASTIC_RESTART_COUNT" = "${FAIL_IN_ATTEMPT:-none}" ] && [ "$AGENT" = c ] && exit 3
exit 0
SH
  chmod +x work.sh
}

# attempts_of FILE EXPRESSION: EXPRESSION of each attempt `a` in the summary, space-separated.
attempts_of() {
  /usr/bin/python3 -c 'import json,sys; print(" ".join(str(eval(sys.argv[2])) for a in json.load(open(sys.argv[1]))["outcome"]["attempts"]))' "$1" "$2"
}

ARGS=(--nnodes 2:3 --max-restarts 2 --rdzv-conf last_call_timeout=1 --cpu-ranks 1 --grace-period 2s
  --timeout 2m --no-python ./work.sh)

test_a_node_that_joins_later_is_admitted_at_the_next_restart() {
  PORT=$(free_port)
  write_worker
  start_agent a "${ARGS[@]}"
  wait_for "port_listening $PORT" 10 || fail "agent a never listened on $PORT"
  start_agent b "${ARGS[@]}"
  wait_for "[ -s seen.a ] && [ -s seen.b ]" 30 || fail "attempt 0 did not start on 2 nodes: $(cat a.err)"
  expect_eq "$(cat seen.b)" "0 1 1 2 2"
  start_agent c "${ARGS[@]}"
  wait_for "[ -f a.rc ] && [ -f b.rc ] && [ -f c.rc ]" 60 || fail "the agents did not finish: $(tail -5 a.err)"
  expect_eq "$(cat a.rc)" 0
  expect_eq "$(cat b.rc)" 0
  expect_eq "$(cat c.rc)" 0
  # attempt 1: three nodes, the new one last, world size 3
  expect_eq "$(tail -1 seen.a)" "1 0 0 3 3"
  expect_eq "$(tail -1 seen.b)" "1 1 1 3 3"
  expect_eq "$(cat seen.c)" "1 2 2 3 3"
  expect_contains "$(cat c.err)" "joins at the next restart"
  expect_contains "$(cat a.err)" "not counted against --max-restarts"
  expect_eq "$(attempts_of a.json 'len(a["nodes"])')" "2 3"
  expect_eq "$(attempts_of b.json 'len(a["nodes"])')" "2 3"
  expect_eq "$(attempts_of c.json 'a["attempt"]')" "1"
  expect_eq "$(attempts_of c.json '",".join(a["nodes"])')" "$(attempts_of a.json '",".join(a["nodes"])' | cut -d' ' -f2)"
  expect_eq "$(attempts_of a.json 'a["status"]')" "membership_change succeeded"
  expect_eq "$(attempts_of b.json 'a["status"]')" "membership_change succeeded"
  expect_contains "$(attempts_of a.json 'a["reason"]')" "joined; the worker group restarts with 3 nodes"
  wait
}

test_a_membership_change_leaves_the_restarts_for_failures() {
  # --max-restarts 1: the restart that admits c is not one, so the failure
  # on c in attempt 1 still gets its restart.
  PORT=$(free_port)
  write_worker
  local args=("${ARGS[@]}")
  args[3]=1 # --max-restarts 1
  start_agent a --env FAIL_IN_ATTEMPT=1 "${args[@]}"
  wait_for "port_listening $PORT" 10 || fail "agent a never listened on $PORT"
  start_agent b --env FAIL_IN_ATTEMPT=1 "${args[@]}"
  wait_for "[ -s seen.a ] && [ -s seen.b ]" 30 || fail "attempt 0 did not start on 2 nodes: $(cat a.err)"
  start_agent c --env FAIL_IN_ATTEMPT=1 "${args[@]}"
  wait_for "[ -f a.rc ] && [ -f b.rc ] && [ -f c.rc ]" 60 || fail "the agents did not finish: $(tail -5 a.err)"
  expect_eq "$(cat a.rc) $(cat b.rc) $(cat c.rc)" "0 0 0"
  expect_eq "$(attempts_of a.json 'a["status"]')" "membership_change failed succeeded"
  expect_eq "$(attempts_of a.json 'len(a["nodes"])')" "2 3 3"
  expect_eq "$(cat seen.c)" "1 2 2 3 3
2 2 2 3 3"
  expect_contains "$(cat a.err)" "restart 1 of 1"
  wait
}

test_an_agent_beyond_max_is_refused_and_launches_nothing() {
  PORT=$(free_port)
  write_worker
  start_agent a "${ARGS[@]}"
  wait_for "port_listening $PORT" 10 || fail "agent a never listened on $PORT"
  start_agent b "${ARGS[@]}"
  sleep 0.5 # b joins before c
  start_agent c "${ARGS[@]}"
  wait_for "[ -s seen.a ] && [ -s seen.b ] && [ -s seen.c ]" 30 || fail "attempt 0 did not start on 3 nodes: $(cat a.err)"
  start_agent d "${ARGS[@]}"
  wait_for "[ -f d.rc ]" 30 || fail "the fourth agent was not refused: $(cat d.err)"
  expect_eq "$(cat d.rc)" 2
  expect_contains "$(cat d.err)" "the job already has its 3 nodes"
  [ ! -e seen.d ] || fail "the refused agent launched a rank: $(cat seen.d)"
  touch stop
  wait_for "[ -f a.rc ] && [ -f b.rc ] && [ -f c.rc ]" 60 || fail "the agents did not finish: $(tail -5 a.err)"
  # the job went on undisturbed: one attempt of three nodes, exit 0
  expect_eq "$(cat a.rc) $(cat b.rc) $(cat c.rc)" "0 0 0"
  expect_eq "$(attempts_of a.json 'len(a["nodes"])')" "3"
  wait
}

run_tests
