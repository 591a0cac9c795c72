#!/usr/bin/env bash
# A real Slurm on this one machine: munged, slurmctld and two slurmd daemons
# (node1, node2, both 127.0.0.1 on their own ports), all private to a temp
# directory and stopped at the end even when a test fails. Then
# `srun -N2 --ntasks-per-node=1 air-run ...`: a 2x2 gloo DDP job with global
# ranks 0..3, and a job whose rank on the second node fails.
#
# Needs Debian's slurm-wlm and munge packages, and root (slurmd runs steps as
# their user). Skips with the reason when they are missing or the daemons
# cannot start here; AIR_REQUIRE_SLURM=1 turns such a skip into a failure.
source "$(dirname "$0")/lib.sh"

skip() {
  if [[ ${AIR_REQUIRE_SLURM:-0} == 1 ]]; then
    echo "FAIL: Slurm required (AIR_REQUIRE_SLURM=1) but: $*" >&2
    exit 1
  fi
  echo "skip: $*"
  exit 0
}

for tool in munged slurmctld slurmd srun sinfo scontrol scancel squeue; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (install Debian's slurm-wlm and munge)"
done
[[ $(id -u) == 0 ]] || skip "needs root to run slurmd"

SLURM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/air-slurm-XXXXXX")
CONF=$SLURM_DIR/slurm.conf
DAEMON_PIDS=()
KILL_WAIT=5 # seconds between Slurm's SIGTERM and SIGKILL to a step

# Every Slurm command goes through here: the test shell itself never exports
# SLURM_CONF, so the processes that carry it in their environment are exactly
# the daemons, step daemons and tasks of this private cluster.
sl() { SLURM_CONF=$CONF "$@"; }

cleanup() {
  local pid
  if [[ -f $CONF ]]; then
    # Cancel what is left (a test that failed mid-job), then stop the daemons.
    timeout 10 env SLURM_CONF="$CONF" scancel --full --quiet $(timeout 5 env SLURM_CONF="$CONF" squeue -h -o %i 2>/dev/null) \
      >/dev/null 2>&1 || true
  fi
  for pid in "${DAEMON_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${DAEMON_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${DAEMON_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  for pid in "${DAEMON_PIDS[@]}"; do wait "$pid" 2>/dev/null; done # reap them: no zombies left behind
  # slurmstepd and any task of this cluster: their environment names our slurm.conf.
  for pid in $(grep -lzxF "SLURM_CONF=$CONF" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [[ $pid != "$$" ]] && kill -KILL "$pid" 2>/dev/null
  done
  if ((failures > 0)); then
    echo "Slurm logs kept in $SLURM_DIR/log" >&2
  else
    rm -rf "$SLURM_DIR"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_ports N: N distinct free TCP ports on loopback.
free_ports() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

start_cluster() {
  mkdir -p "$SLURM_DIR"/{state,log,munge,spool/node1,spool/node2}
  chmod 700 "$SLURM_DIR/munge"
  head -c 1024 /dev/urandom >"$SLURM_DIR/munge/munge.key"
  chmod 600 "$SLURM_DIR/munge/munge.key"
  local socket=$SLURM_DIR/munge/munge.socket
  munged --foreground --force --key-file="$SLURM_DIR/munge/munge.key" --socket="$socket" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/log/munged.log" \
    --seed-file="$SLURM_DIR/munge/seed" >"$SLURM_DIR/log/munged.out" 2>&1 &
  DAEMON_PIDS+=($!)

  local ports ctld_port port1 port2
  read -r ctld_port port1 port2 <<<"$(free_ports 3)"
  cat >"$CONF" <<EOF
ClusterName=airtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd-%n.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd-%n.log
PlugStackConfig=$SLURM_DIR/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=$KILL_WAIT
InactiveLimit=0
NodeName=node1 NodeAddr=127.0.0.1 Port=$port1 CPUs=$(nproc) State=UNKNOWN
NodeName=node2 NodeAddr=127.0.0.1 Port=$port2 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$SLURM_DIR/plugstack.conf"

  wait_for "[[ -S $socket ]]" 10 || return 1
  sl slurmctld -D >"$SLURM_DIR/log/slurmctld.out" 2>&1 &
  DAEMON_PIDS+=($!)
  sl slurmd -D -N node1 >"$SLURM_DIR/log/slurmd-node1.out" 2>&1 &
  DAEMON_PIDS+=($!)
  sl slurmd -D -N node2 >"$SLURM_DIR/log/slurmd-node2.out" 2>&1 &
  DAEMON_PIDS+=($!)
  wait_for "[[ \$(sl sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle') == 2 ]]" 30
}

started=$SECONDS
if ! start_cluster; then
  tail -n 5 "$SLURM_DIR"/log/* >&2 2>/dev/null
  failures=1 # keep the logs
  skip "the Slurm daemons did not come up in 30s (logs in $SLURM_DIR/log)"
fi
echo "Slurm cluster up in $((SECONDS - started))s: $(sl sinfo -h -N -o '%N %T' | tr '\n' ' ')"

# srun_air ARGS...: one air-run per node on both nodes; output in $out/$err, code in $rc.
srun_air() {
  sl timeout 300 srun -N2 --ntasks-per-node=1 --kill-on-bad-exit=1 "$AIR_RUN" "$@" \
    >"$TESTDIR/stdout" 2>"$TESTDIR/stderr"
  rc=$?
  out=$(cat "$TESTDIR/stdout")
  err=$(cat "$TESTDIR/stderr")
}

test_ranks_get_global_environment_from_slurm() {
  cat >env.sh <<'SH'
#!/bin/sh
env > "env.$RANK"
SH
  chmod +x env.sh
  srun_air --cpu-ranks 2 --no-python ./env.sh
  expect_rc 0
  local r e port
  for r in 0 1 2 3; do
    [[ -f env.$r ]] || { fail "rank $r did not run"; continue; }
    e=$(cat "env.$r")
    expect_two_nodes_of_two_ranks_env "$r" "$e"
    expect_contains "$e" "SLURMD_NODENAME=node$((r / 2 + 1))"
    # node1's NodeAddr, asked of scontrol: the name node1 is not in DNS here
    expect_contains "$e" "MASTER_ADDR=127.0.0.1"
  done
  # MASTER_PORT from the job id, the same on both nodes; one run id
  port=$(grep '^MASTER_PORT=' env.0)
  expect_eq "$(grep '^MASTER_PORT=' env.3)" "$port"
  local job=${port#MASTER_PORT=}
  ((job >= 15000 && job <= 29998 && job % 2 == 0)) || fail "master port $job outside the documented range"
  expect_eq "$(grep '^TORCHELASTIC_RUN_ID=' env.3)" "$(grep '^TORCHELASTIC_RUN_ID=' env.0)"
  expect_contains "$(cat env.0)" "TORCHELASTIC_RUN_ID=slurm-"
  expect_contains "$err" "air-run (node 0): node 0/2 (node1), ranks 0-1 of 4"
  expect_contains "$err" "air-run (node 1): node 1/2 (node2), ranks 2-3 of 4"
}

test_two_by_two_gloo_ddp_trains_under_srun() {
  if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
    echo "  (skipped: $TORCH_PYTHON has no torch)"
    return 0
  fi
  local start=$SECONDS
  srun_air --cpu-ranks 2 --python "$TORCH_PYTHON" --timeout 5m \
    "$AIR_SOURCE_DIR/configs/examples/simple_mlp_ddp.py" --epochs 2 --samples 2000
  echo "  2x2 DDP job took $((SECONDS - start))s"
  expect_rc 0
  local r
  for r in 0 1 2 3; do
    expect_contains "$out" "[rank$r]: rank $r/4 epoch 1: loss"
    expect_contains "$out" "[rank$r]: rank $r: done in"
  done
  expect_not_contains "$out" "weights in sync: False"
}

# Rank 3 (node2) exits 5 while every other rank sleeps. The control connection
# stops node1 within a second; Slurm's own path (--kill-on-bad-exit: SIGTERM
# to the step, SIGKILL after KillWait) bounds it even without air-run's help,
# so the whole job must end within KillWait + 3 s of slack for srun and slurmd.
test_failure_on_second_node_ends_the_job() {
  # The sleep's argument marks this test's ranks: nothing else on the machine matches it.
  local mark="300.$$$RANDOM"
  cat >rank.sh <<SH
#!/bin/sh
if [ "\$RANK" = 3 ]; then sleep 2; date +%s%3N > fail.ms; exit 5; fi
exec sleep $mark
SH
  chmod +x rank.sh
  srun_air --cpu-ranks 2 --no-python ./rank.sh
  local ended
  ended=$(date +%s%3N)
  expect_rc 5
  [[ -f fail.ms ]] || { fail "rank 3 never ran"; return; }
  local took=$((ended - $(cat fail.ms)))
  echo "  job ended ${took}ms after rank 3 failed on node2"
  ((took < (KILL_WAIT + 3) * 1000)) || fail "job ended ${took}ms after the failure"
  expect_contains "$err" "(exit code 5): rank 3 exited with exit code 5"
  expect_contains "$err" "(exit code 5): stopped because node 1 (node2) failed: rank 3 exited with exit code 5"
  if ! wait_for "! pgrep -f 'sleep $mark' >/dev/null" 10; then
    fail "a rank outlived the job by 10 s: $(ps -o pid,ppid,pgid,etime,stat,args -p "$(pgrep -d, -f "sleep $mark")")"
    pkill -KILL -f "sleep $mark"
  fi
}

# The documented batch script, as a user would submit it.
test_sbatch_cpu_smoke_script() {
  if ! "$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null; then
    echo "  (skipped: $TORCH_PYTHON has no torch)"
    return 0
  fi
  local bindir
  bindir=$(cd "$(dirname "$AIR_RUN")" && pwd)
  PATH=$bindir:$PATH AIR_SRC=$AIR_SOURCE_DIR PYTHON=$TORCH_PYTHON \
    sl timeout 300 sbatch --wait --quiet --chdir="$TESTDIR" "$AIR_SOURCE_DIR/configs/slurm/cpu_smoke.sbatch" \
    >"$TESTDIR/stdout" 2>"$TESTDIR/stderr"
  rc=$?
  expect_rc 0
  local log
  log=$(cat air-cpu-smoke-*.out 2>/dev/null)
  local r
  for r in 0 1 2 3; do
    expect_contains "$log" "[rank$r]: rank $r/4 epoch 1: loss"
  done
  expect_contains "$log" "air-run (node 1): node 1/2 (node2), ranks 2-3 of 4"
  # per-rank logs of both nodes in the one (shared) log directory
  [[ -f $(echo runs/*/logs/*/rank3.log) ]] || fail "no rank3.log under runs/*/logs/<run_id>"
}

test_dry_run_in_a_step_shows_slurm_s_values_and_origins() {
  # What the placement took from Slurm, as docs/multinode.md promises: not
  # the defaults the spec had before.
  srun_air --dry-run --no-python true
  expect_rc 0
  expect_contains "$out$err" "nnodes = 2  (env SLURM_STEP_NUM_NODES)"
  expect_contains "$out$err" "node_rank = 1  (env SLURM_NODEID)"
  expect_contains "$out$err" "master_addr = 127.0.0.1  (env SLURM_STEP_NODELIST)"
  expect_contains "$out$err" "grace_period = 3.333s  (env Slurm KillWait (2/3 of it))"
}

test_two_agents_on_one_node_is_an_error() {
  sl timeout 60 srun -N1 --ntasks-per-node=2 "$AIR_RUN" --no-python true >"$TESTDIR/stdout" 2>"$TESTDIR/stderr"
  rc=$?
  err=$(cat "$TESTDIR/stderr")
  expect_rc 2
  expect_contains "$err" "air-run: error: srun started 2 air-run tasks on node1 (SLURM_STEP_TASKS_PER_NODE=2); run one air-run per node with \`srun --ntasks-per-node=1\`"
}

run_tests
