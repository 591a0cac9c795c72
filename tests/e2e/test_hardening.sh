#!/usr/bin/env bash
# Hostile input and hostile neighbours through the built binary: spec files
# that used to eat memory or block, result files that overflowed the stack,
# reused and planted log directories, secrets in --dry-run, a shared cache
# another user can write, and a stranger on the multi-node control port.
# Runs as root in CI: "another user" is uid 12345 (chown), never "not root".
source "$(dirname "$0")/lib.sh"


test_spec_holding_just_a_comma_is_refused() {
  printf ',' >comma.yaml
  # yaml-cpp's LoadAll never ended here and ate memory without limit. The
  # memory cap cannot apply to a sanitizer build (ASan reserves terabytes of
  # address space for its shadow at start); the time limit still does.
  local cap=1000000
  grep -q __asan_init "$AIR_RUN" && cap=unlimited
  (ulimit -v $cap; timeout 20 "$AIR_RUN" --dry-run -f comma.yaml --no-python true >out 2>err)
  rc=$?
  expect_rc 2
  # libyaml's syntax check refuses it first; without libyaml, yaml-cpp's document check does.
  [[ $(cat err) == *"comma.yaml:1:1: invalid YAML: did not find expected node content"* ||
    $(cat err) == *"comma.yaml:1:1: expected one YAML document, found another"* ]] || fail "$(cat err)"
}

test_deeply_nested_specs_are_refused_at_the_first_level_too_deep() {
  # A line of 100,000 '[' took 21 s to refuse, a flow mapping nested 20,000
  # deep 2 s (libyaml's scanner and yaml-cpp's tree cost more with every open
  # level); scripts/bench-yaml-bombs.py times them. Both are refused at the
  # 65th level: the top-level mapping is the first, the value's first '[' or
  # '{' (column 10) the second.
  python3 -c "print('command: ' + '[' * 100000)" >seq.yaml
  python3 -c "print('command: ' + '{a: ' * 20000 + '1' + '}' * 20000)" >map.yaml
  run_air --dry-run -f seq.yaml --no-python true
  expect_rc 2
  expect_contains "$err" "air-run: error: seq.yaml:1:73: invalid YAML: nested deeper than 64 levels"
  [[ -z $out ]] || fail "a refused spec printed a plan: $out"
  run_air --dry-run -f map.yaml --no-python true
  expect_rc 2
  expect_contains "$err" "air-run: error: map.yaml:1:262: invalid YAML: nested deeper than 64 levels"
  [[ -z $out ]] || fail "a refused spec printed a plan: $out"
  # Not only under --dry-run: nothing is launched (the target would leave a file).
  run_air -f seq.yaml --no-python touch launched
  expect_rc 2
  [[ ! -e launched ]] || fail "a refused spec launched its target"
}

test_huge_rank_count_is_a_clear_error() {
  run_air --dry-run --cpu-ranks 2147483647 --no-python true
  expect_rc 2
  expect_contains "$err" "--cpu-ranks: must be between 1 and 4096, got 2147483647"
}

test_spec_from_a_device_or_fifo_is_refused_at_once() {
  timeout 20 "$AIR_RUN" --dry-run -f /dev/zero --no-python true >out 2>err
  rc=$?
  expect_rc 2
  expect_contains "$(cat err)" "cannot read spec file /dev/zero: not a regular file"
  mkfifo spec.fifo
  local start=$SECONDS
  timeout 20 "$AIR_RUN" --dry-run -f spec.fifo --no-python true >out 2>err
  rc=$?
  expect_rc 2
  expect_contains "$(cat err)" "cannot read spec file spec.fifo: not a regular file"
  ((SECONDS - start < 5)) || fail "-f FIFO took $((SECONDS - start))s"
}

test_deeply_nested_result_file_is_a_rank_error_not_a_crash() {
  python3 -c "print('[' * 100000 + ']' * 100000)" >deep.json
  printf '#!/bin/sh\ncp deep.json "$AIR_RESULT_FILE"\n' >r.sh
  chmod +x r.sh
  run_air --cpu-ranks 1 --no-python --summary s.json ./r.sh
  expect_rc 0
  expect_eq "$(json_get s.json 'd["ranks"][0]["result"]["state"]')" "invalid"
  expect_contains "$(json_get s.json 'd["ranks"][0]["result"]["error"]')" "deeper than 128 levels"
}

test_reused_log_dir_does_not_report_the_previous_run() {
  cat >first.sh <<'SH'
#!/bin/sh
echo '{"loss": 0.5}' > "$AIR_RESULT_FILE"
echo '{"message": "ValueError: from the first run", "timestamp": 1}' > "$TORCHELASTIC_ERROR_FILE"
exit 1
SH
  printf '#!/bin/sh\nexit 3\n' >second.sh
  chmod +x first.sh second.sh
  run_air --cpu-ranks 1 --no-python --log-dir logs --summary s1.json ./first.sh
  expect_rc 1
  expect_eq "$(json_get s1.json 'd["ranks"][0]["result"]["state"]')" "ok"
  run_air --cpu-ranks 1 --no-python --log-dir logs --summary s2.json ./second.sh
  expect_rc 3
  expect_eq "$(json_get s2.json 'd["ranks"][0]["result"]["state"]')" "missing"
  expect_not_contains "$(cat s2.json)" "from the first run"
  expect_not_contains "$err" "from the first run"
}

test_planted_symlinks_in_log_dir_are_not_followed() {
  # A known run id makes the run's folder (<log dir>/<run id>) predictable, so
  # files can be planted where the run will look.
  mkdir -p logs/r1
  echo 'TOP-SECRET' >secret.txt
  echo 'precious' >victim.txt
  ln -s "$PWD/secret.txt" logs/r1/rank0.result.json
  ln -s "$PWD/secret.txt" logs/r1/rank0.error.json
  printf '#!/bin/sh\nexit 0\n' >quiet.sh
  chmod +x quiet.sh
  run_air --cpu-ranks 1 --no-python --run-id r1 --log-dir logs --summary s.json ./quiet.sh
  expect_rc 0
  expect_not_contains "$(cat s.json)" "TOP-SECRET"
  [[ -L logs/r1/rank0.result.json ]] && fail "the planted result symlink is still there"
  mkdir -p logs2/r2
  ln -s "$PWD/victim.txt" logs2/r2/rank0.log
  run_air --cpu-ranks 1 --no-python --run-id r2 --log-dir logs2 ./quiet.sh
  expect_rc 125 # nothing launched
  expect_contains "$err" "logs2/r2/rank0.log is a symlink"
  expect_eq "$(cat victim.txt)" "precious"
}

test_log_dir_others_can_write_is_refused() {
  printf '#!/bin/sh\nexit 0\n' >quiet.sh
  chmod +x quiet.sh
  mkdir open sticky theirs
  chmod 0777 open
  chmod 1777 sticky
  chown 12345 theirs
  run_air --cpu-ranks 1 --no-python --log-dir open ./quiet.sh
  expect_rc 2
  expect_contains "$err" "log directory open is writable by other users (mode 0777)"
  run_air --cpu-ranks 1 --no-python --log-dir theirs ./quiet.sh
  expect_rc 2
  expect_contains "$err" "is owned by uid 12345"
  run_air --cpu-ranks 1 --no-python --log-dir sticky ./quiet.sh
  expect_rc 0
}

test_dry_run_redacts_secrets_like_the_summary() {
  run_air --dry-run --no-python --env API_TOKEN=hunter2 --env DB_URL=postgres://app:dbpass@db/x \
    --index-url https://bob:pw123@example.com/simple true
  expect_rc 0
  expect_not_contains "$out" "hunter2"
  expect_not_contains "$out" "dbpass"
  expect_not_contains "$out" "pw123"
  expect_contains "$out" "API_TOKEN=<redacted>"
  expect_contains "$out" "https://bob:<redacted>@example.com/simple"
}

test_shared_cache_others_can_write_is_refused() {
  printf 'environment:\n  dependencies: [six]\n' >deps.yaml
  mkdir cache
  chmod 0777 cache
  run_air --dry-run --no-python --env-cache-dir cache -f deps.yaml true
  expect_rc 2
  expect_contains "$err" "environment cache directory"
  expect_contains "$err" "writable by other users (mode 0777)"
  chmod 0755 cache
  chown 12345 cache
  run_air --dry-run --no-python --env-cache-dir cache -f deps.yaml true
  expect_rc 2
  expect_contains "$err" "is owned by uid 12345"
}

# stranger PORT: connects to node 0's control port like an attacker on the
# network: a bare hello, a hello after a made-up proof, an escape sequence,
# a flood; then reports what node 0 answered.
stranger() {
  python3 - "$1" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
def connect():
    for _ in range(200):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.05)
    sys.exit("node 0 never listened")
answers = []
for attempt in (b"hello 1 1 2 1 intruder\n",
                b"auth " + b"0" * 32 + b" " + b"f" * 64 + b"\nhello 1 1 2 1 intruder\n",
                b"fail 1 1 42 intruder \x1b[2Jpwned\n",
                b"x" * 100000):
    s = connect()
    s.settimeout(5)
    challenge = s.recv(4096)
    assert challenge.startswith(b"challenge "), challenge
    try:
        s.sendall(attempt)
        answers.append(s.recv(4096).decode(errors="replace").strip())
    except OSError as e:
        answers.append("closed: %s" % e)
    s.close()
print("\n".join(answers))
PY
}

test_stranger_on_the_control_port_cannot_join_or_abort() {
  local port
  port=$(free_port_pair)
  [[ -n $port ]] || { fail "no free port pair"; return; }
  printf '#!/bin/sh\necho "rank $RANK ran"\n' >ok.sh
  chmod +x ok.sh
  export AIR_RUN_JOIN_TOKEN=e2e-shared-secret
  local common=(--nnodes 2 --master-addr 127.0.0.1 --master-port "$port" --join-timeout 30s --cpu-ranks 1 --no-python)
  "$AIR_RUN" "${common[@]}" --node-rank 0 ./ok.sh >node0.out 2>node0.err &
  local node0=$!
  stranger $((port + 1)) >stranger.out 2>stranger.err || fail "stranger: $(cat stranger.err)"
  expect_contains "$(cat stranger.out)" "refuse 2 node 0's agent refused the connection: wrong join token"
  kill -0 "$node0" 2>/dev/null || fail "node 0 stopped after a stranger's line: $(cat node0.err)"
  # The real node 1, with the token, still joins and the job succeeds.
  timeout 60 "$AIR_RUN" "${common[@]}" --node-rank 1 ./ok.sh >node1.out 2>node1.err
  local rc1=$?
  wait "$node0"
  local rc0=$?
  expect_eq "$rc0" 0
  expect_eq "$rc1" 0
  expect_contains "$(cat node0.out)" "rank 0 ran"
  expect_contains "$(cat node1.out)" "rank 1 ran"
  expect_not_contains "$(cat node0.err node0.out)" "intruder"
  expect_not_contains "$(cat node0.err node0.out)" "pwned"
  # A node with another token is told so, and exits 2.
  port=$(free_port_pair)
  common=(--nnodes 2 --master-addr 127.0.0.1 --master-port "$port" --join-timeout 3s --cpu-ranks 1 --no-python)
  "$AIR_RUN" "${common[@]}" --node-rank 0 ./ok.sh >node0.out 2>node0.err &
  node0=$!
  AIR_RUN_JOIN_TOKEN=wrong timeout 60 "$AIR_RUN" "${common[@]}" --node-rank 1 ./ok.sh >node1.out 2>node1.err
  rc=$?
  expect_rc 2
  expect_contains "$(cat node1.err)" "wrong join token"
  wait "$node0"
  expect_contains "$(cat node0.err)" "failed authentication"
  unset AIR_RUN_JOIN_TOKEN
}

test_join_token_file_must_be_private() {
  local port
  port=$(free_port_pair)
  echo secret >token
  chmod 0644 token
  AIR_RUN_JOIN_TOKEN_FILE=token run_air --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 \
    --master-port "$port" --join-timeout 2s --cpu-ranks 1 --no-python true
  expect_rc 2
  expect_contains "$err" "join token file token is readable by other users (mode 0644)"
}

# A rank owns its progress file's path: truncating it made air-run's mapping
# fault (SIGBUS, exit 135: no summary, the run folder left behind). Now the
# page is read, not mapped, and the rank's counts are said to be lost.
test_a_rank_that_truncates_its_progress_file_cannot_take_air_run_down() {
  cat >truncate.py <<'PY'
import os, sys, time
path = os.environ["AIR_RUN_PROGRESS_FILE"]
time.sleep(0.3)
if os.environ["RANK"] == "1":
    os.truncate(path, 0)
time.sleep(2.5)
print("rank %s done" % os.environ["RANK"], flush=True)
PY
  run_air --cpu-ranks 2 --python /usr/bin/python3 --summary s.json truncate.py
  expect_rc 0
  expect_contains "$err" "rank 1's step counts are lost: its progress file was truncated"
  expect_eq "$(json_get s.json 'd["outcome"]["status"]')" "succeeded"
  expect_contains "$out" "rank 1 done"
}

# air-run blocks its signals from the start, for the signalfd: anything that
# blocks before the supervisor's loop must have the signals in its wait, or a
# SIGTERM (Slurm's, timeout's) and Ctrl-C are never heard.

test_a_fifo_as_the_script_or_module_does_not_hang_air_run() {
  # The warm start's choice opened the script with a blocking open(2): still
  # blocked 55 minutes later, deaf to SIGTERM and SIGINT.
  mkfifo t.py
  mkdir -p pkg
  : >pkg/__init__.py
  mkfifo pkg/mod.py
  local start
  for target in t.py "-m pkg.mod"; do
    start=$SECONDS
    # shellcheck disable=SC2086 # "-m pkg.mod" is two words
    timeout -k 5 10 "$AIR_RUN" --dry-run --python /usr/bin/python3 $target >out 2>err
    rc=$?
    expect_rc 0
    ((SECONDS - start < 8)) || fail "--dry-run $target took $((SECONDS - start)) s"
  done
}

# Starts `$@` (air-run) in the background with SIGINT at its default (a
# background job's is ignored), sends `signal` after 1 s, and expects air-run
# to have ended of it within 5 s.
expect_ended_by() {
  local signal=$1 code=$2
  shift 2
  env --default-signal=INT "$@" <&0 & # explicit: an async command's stdin is /dev/null otherwise
  local pid=$! waited=0
  sleep 1
  kill -"$signal" "$pid"
  while kill -0 "$pid" 2>/dev/null && ((waited < 50)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    fail "air-run ignored SIG$signal for 5 s: $*"
  fi
  wait "$pid"
  rc=$?
  expect_rc "$code"
}

test_sigterm_and_sigint_end_a_spec_read_from_a_pipe_that_stays_open() {
  for pair in TERM:143 INT:130; do
    mkfifo spec.fifo
    exec 3<>spec.fifo # a writer that never closes the pipe
    expect_ended_by "${pair%:*}" "${pair#*:}" "$AIR_RUN" --dry-run -f - --no-python true <spec.fifo
    exec 3>&-
    rm spec.fifo
  done
}

test_sigterm_ends_check_while_torch_is_imported() {
  # The torch probe may take 60 s; --check ignored SIGTERM for all of it.
  cat >slow-python <<'SH'
#!/bin/sh
case "$*" in *torch*) exec sleep 120 ;; esac
exec /usr/bin/python3 "$@"
SH
  chmod +x slow-python
  expect_ended_by TERM 143 "$AIR_RUN" --check --cpu-ranks 1 --python ./slow-python
  expect_ended_by INT 130 "$AIR_RUN" --check --cpu-ranks 1 --python ./slow-python
}

run_tests
