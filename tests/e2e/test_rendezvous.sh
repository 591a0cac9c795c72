#!/usr/bin/env bash
# torchrun's rendezvous flags: c10d joins without --node-rank (node ranks in
# order of arrival, the endpoint's agent first), --nnodes MIN:MAX with a last
# call, --standalone, static endpoints, and signals during every join wait.
source "$(dirname "$0")/lib.sh"

# start_agent NAME ARGS...: one c10d agent in the background; output in NAME.{out,err}, code in NAME.rc.
start_agent() {
  local name=$1
  shift
  ("$AIR_RUN" --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$PORT" --env "AGENT=$name" "$@" \
    >"$name.out" 2>"$name.err"
  echo $? >"$name.rc") 2>/dev/null &
  eval "${name}_pid=$!"
}

write_env_rank() {
  cat >env.sh <<'SH'
#!/bin/sh
env > "env.$AGENT.$LOCAL_RANK"
SH
  chmod +x env.sh
}

var() { sed -n "s/^$2=//p" "$1"; } # var FILE NAME

# c10d with N agents started one after another: node ranks follow arrival.
join_in_order() {
  local n=$1 names=(a b c)
  PORT=$(free_port)
  write_env_rank
  local i
  for ((i = 0; i < n; i++)); do
    start_agent "${names[$i]}" --nnodes "$n" --cpu-ranks 2 --no-python ./env.sh
    # the first agent hosts the join: wait until it listens; the others until they are in
    if ((i == 0)); then
      wait_for "port_listening $PORT" 10 || fail "agent a never listened on $PORT"
    else
      sleep 0.3
    fi
  done
  wait
  for ((i = 0; i < n; i++)); do
    local who=${names[$i]}
    expect_eq "$(cat "$who.rc")" 0
    [[ -f env.$who.1 ]] || { fail "agent $who's ranks did not run: $(cat "$who.err")"; continue; }
    expect_eq "$(var "env.$who.1" GROUP_RANK)" "$i"
    expect_eq "$(var "env.$who.1" RANK)" "$((2 * i + 1))"
    expect_eq "$(var "env.$who.1" WORLD_SIZE)" "$((2 * n))"
    expect_eq "$(var "env.$who.1" GROUP_WORLD_SIZE)" "$n"
    expect_eq "$(var "env.$who.0" MASTER_ADDR)" 127.0.0.1
    # one master port, node 0's, everywhere; not the join port
    expect_eq "$(var "env.$who.0" MASTER_PORT)" "$(var env.a.0 MASTER_PORT)"
    expect_eq "$(var "env.$who.0" TORCHELASTIC_RUN_ID)" "$(var env.a.0 TORCHELASTIC_RUN_ID)"
  done
  [[ $(var env.a.0 MASTER_PORT) != "$PORT" ]] || fail "MASTER_PORT is the join port"
  expect_contains "$(cat b.err)" "node 1/$n ("
  expect_contains "$(cat b.err)" "via c10d"
}

test_c10d_two_agents_join_in_arrival_order() { join_in_order 2; }
test_c10d_three_agents_join_in_arrival_order() { join_in_order 3; }

test_c10d_rdzv_id_becomes_the_run_id() {
  PORT=$(free_port)
  write_env_rank
  start_agent a --nnodes 2 --rdzv-id job-42 --no-python ./env.sh
  wait_for "port_listening $PORT" 10 || fail "agent a never listened"
  start_agent b --nnodes 2 --rdzv-id job-42 --no-python ./env.sh
  wait
  expect_eq "$(var env.b.0 TORCHELASTIC_RUN_ID)" job-42
}

test_min_max_starts_after_the_last_call() {
  PORT=$(free_port)
  write_env_rank
  local start=$SECONDS
  start_agent a --nnodes 1:3 --rdzv-conf last_call_timeout=1,join_timeout=20 --no-python ./env.sh
  wait_for "port_listening $PORT" 10 || fail "agent a never listened"
  start_agent b --nnodes 1:3 --rdzv-conf last_call_timeout=1,join_timeout=20 --no-python ./env.sh
  wait
  expect_eq "$(cat a.rc)" 0
  expect_eq "$(cat b.rc)" 0
  # the window closed with 2 of at most 3 nodes
  expect_eq "$(var env.a.0 GROUP_WORLD_SIZE)" 2
  expect_eq "$(var env.b.0 GROUP_RANK)" 1
  expect_eq "$(var env.b.0 WORLD_SIZE)" 2
  ((SECONDS - start < 10)) || fail "took $((SECONDS - start))s"
}

test_min_max_starts_at_once_when_max_joined() {
  PORT=$(free_port)
  write_env_rank
  start_agent a --nnodes 1:2 --rdzv-conf last_call_timeout=60 --no-python ./env.sh
  wait_for "port_listening $PORT" 10 || fail "agent a never listened"
  start_agent b --nnodes 1:2 --rdzv-conf last_call_timeout=60 --no-python ./env.sh
  local start=$SECONDS
  wait
  ((SECONDS - start < 10)) || fail "waited for the last call although MAX nodes had joined"
  expect_eq "$(var env.b.0 GROUP_WORLD_SIZE)" 2
}

test_min_not_reached_is_named() {
  PORT=$(free_port)
  start_agent a --nnodes 2:3 --rdzv-conf join_timeout=1 --no-python true
  wait
  expect_eq "$(cat a.rc)" 125
  expect_contains "$(cat a.err)" "only 1 of at least 2 nodes joined within 1s"
}

# term_during_join NAME READY: once READY holds, the agent NAME is in its join
# wait; SIGTERM must end it at once with 143.
term_during_join() {
  local name=$1 ready=$2 pid agent
  eval "pid=\$${name}_pid"
  # READY holds only after the agent's signal handlers are in place; a fixed
  # sleep was too short for a sanitizer build on a loaded machine, and the
  # SIGTERM then met the default action (143, but nothing said).
  wait_for "$ready" 30 || fail "$name never reached the join"
  agent=$(pgrep -P "$pid" -f 'air-run' | head -1)
  [[ -n $agent ]] || { fail "no agent process"; return; }
  local start=$SECONDS
  kill -TERM "$agent"
  wait
  expect_eq "$(cat "$name.rc")" 143
  ((SECONDS - start < 3)) || fail "took $((SECONDS - start))s to answer SIGTERM"
}

test_sigterm_while_node_0_waits() {
  # the issue's reproduction: node 0 of a static job, alone
  local port
  port=$(free_port)
  ("$AIR_RUN" --nnodes 2 --node-rank 0 --master-port "$port" --control-port "$(free_port)" -n 1 \
    --accelerator-type CPU --no-python /bin/true >z.out 2>z.err
  echo $? >z.rc) 2>/dev/null &
  z_pid=$!
  term_during_join z "grep -q 'not authenticated' z.err 2>/dev/null"
  expect_contains "$(cat z.err)" "interrupted by SIGTERM while waiting for the other nodes"
}

test_ctrl_c_while_a_node_waits_for_node_0() {
  local port
  port=$(free_port)
  (env --default-signal=INT "$AIR_RUN" --nnodes 2 --node-rank 1 --master-port "$port" --control-port "$(free_port)" \
    --accelerator-type CPU --no-python /bin/true >z.out 2>z.err
  echo $? >z.rc) 2>/dev/null &
  z_pid=$!
  sleep 0.5
  local agent
  agent=$(pgrep -P "$z_pid" -f 'air-run' | head -1)
  kill -INT "$agent"
  wait
  expect_eq "$(cat z.rc)" 130
}

test_sigterm_while_c10d_host_waits() {
  PORT=$(free_port)
  start_agent a --nnodes 2 --no-python true
  term_during_join a "port_listening $PORT"
}

test_sigterm_of_a_joined_agent_stops_the_others() {
  PORT=$(free_port)
  start_agent a --nnodes 4 --no-python true
  wait_for "port_listening $PORT" 10 || fail "agent a never listened"
  start_agent b --nnodes 4 --no-python true
  start_agent c --nnodes 4 --no-python true
  # Both joined before b is stopped (a fixed sleep was too short on a loaded machine).
  wait_for "(( \$(connections_to $PORT) >= 2 ))" 30 || fail "b and c never reached node 0"
  sleep 0.3
  local agent
  agent=$(pgrep -P "$b_pid" -f 'air-run' | head -1)
  kill -TERM "$agent"
  wait
  expect_eq "$(cat b.rc)" 143
  # every agent ends with the interrupted one's 128+N
  expect_eq "$(cat a.rc)" 143
  expect_eq "$(cat c.rc)" 143
  expect_contains "$(cat a.err)" "was interrupted by SIGTERM while waiting for the start"
  expect_contains "$(cat c.err)" "was interrupted by SIGTERM while waiting for the start"
}

# fqdn RENDEZVOUS_HOST: the MASTER_ADDR one c10d node gives its ranks (this
# host's name, as torchrun's c10d rendezvous gives it, where it is a local address).
fqdn() { python3 "$AIR_SOURCE_DIR/tests/e2e/torchrun_lines.py" fqdn "$1"; }

test_one_c10d_node_gives_ranks_the_hosts_name() {
  # torchrun hands the ranks node 0's fully qualified name, not the endpoint's
  # host (measured against torchrun 2.11 on lines with --rdzv-endpoint 127.0.0.1:PORT).
  write_env_rank
  local port
  port=$(free_port)
  AGENT=e run_air --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --nnodes 1 --cpu-ranks 2 \
    --env AGENT=e --no-python ./env.sh
  expect_rc 0
  expect_eq "$(var env.e.0 MASTER_ADDR)" "$(fqdn 127.0.0.1)"
  expect_eq "$(var env.e.1 MASTER_ADDR)" "$(fqdn 127.0.0.1)"
  # --master-addr still wins.
  AGENT=m run_air --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --nnodes 1 --cpu-ranks 1 \
    --master-addr 127.0.0.1 --env AGENT=m --no-python ./env.sh
  expect_rc 0
  expect_eq "$(var env.m.0 MASTER_ADDR)" 127.0.0.1
}

test_standalone_runs_one_node() {
  write_env_rank
  AGENT=s run_air --standalone --cpu-ranks 2 --env AGENT=s --no-python ./env.sh
  expect_rc 0
  expect_eq "$(var env.s.1 WORLD_SIZE)" 2
  expect_eq "$(var env.s.1 MASTER_ADDR)" "$(fqdn localhost)" # as torchrun 2.x gives it
  run_air --standalone --nnodes 2 --no-python true
  expect_rc 2
  expect_contains "$err" "--standalone: runs one node, but --nnodes asks for 2"
}

test_static_endpoint_is_the_master() {
  write_env_rank
  local port
  port=$(free_port)
  run_air --rdzv-backend static --rdzv-endpoint "127.0.0.1:$port" --env AGENT=x --no-python ./env.sh
  expect_rc 0
  expect_eq "$(var env.x.0 MASTER_PORT)" "$port"
}

test_unsupported_backend_is_named() {
  run_air --rdzv-backend etcd --rdzv-endpoint h:2379 --nnodes 2 --no-python true
  expect_rc 2
  expect_contains "$err" "--rdzv-backend: 'etcd' is not supported; air-run's rendezvous backends are static and c10d"
  run_air --nnodes 1:2 --no-python true
  expect_rc 2
  expect_contains "$err" "--nnodes: MIN:MAX needs rdzv_backend c10d"
  run_air --rdzv-backend c10d --nnodes 2 --no-python true
  expect_rc 2
  expect_contains "$err" "needs rdzv_endpoint HOST[:PORT]"
  run_air --rdzv-conf join_timeout=soon --no-python true
  expect_rc 2
  expect_contains "$err" "--rdzv-conf: join_timeout"
}

run_tests
