#!/usr/bin/env bash
# Slurm's own stop signals against the stop protocol, with no simulated
# signal: a private Slurm (munged, slurmctld and two slurmd, node1 and node2,
# each in a network namespace of its own), KillWait 10 s,
# partition preemption with requeue. Each job runs one air-run per node and 2
# gloo ranks each (4 ranks, /usr/bin/python3 with torch) that poll
# air.should_stop() and save with air.data.save. Each case must end with every
# rank stopped at one step with a complete checkpoint, and the next run
# resumes from it (AIR_RESUME_FROM, air.steps()):
#
# - the time limit (`--time=1`: slurmd's SIGTERM, SIGCONT, SIGTERM);
# - `--signal=B:USR1@60 --requeue` with `exec srun` (air-run requeues the job,
#   only once node 1's ranks, 5 s slower to finish their save, have exited);
# - a partition preemption with PreemptMode=REQUEUE (SIGTERM, SIGCONT, SIGTERM);
# - scancel;
# - a node that vanishes (link down, frozen): the other ends the job within the
#   heartbeat timeout, and the frozen one, thawed, names itself as lost.
#
# Each node's slurmd runs in a network namespace of its own, joined to the
# others by a bridge (needs iproute2's ip and nsenter). Each case
# prints its times, the job states (jobcomp/filetxt, no slurmdbd needed) and
# what the summaries said. Needs root and Debian's slurm-wlm and munge
# (scripts/install-deps.sh); skips with the reason otherwise (77).
source "$(dirname "$0")/lib.sh"

skip() {
  if [[ ${AIR_REQUIRE_SLURM:-0} == 1 ]]; then
    echo "FAIL: Slurm required (AIR_REQUIRE_SLURM=1) but: $*" >&2
    exit 1
  fi
  echo "skip: $*"
  exit 77
}

for tool in munged slurmctld slurmd srun sbatch scontrol scancel squeue ip nsenter; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (install Debian's slurm-wlm and munge)"
done
[[ $(id -u) == 0 ]] || skip "needs root to run slurmd"
"$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null || skip "$TORCH_PYTHON has no torch"

SLURM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/air-slurm-real-XXXXXX")
CONF=$SLURM_DIR/slurm.conf
W=$SLURM_DIR/work # the jobs' files: both nodes are this machine, so it is shared
DAEMON_PIDS=()
KILL_WAIT=10

sl() { SLURM_CONF=$CONF "$@"; }

cleanup() {
  local pid
  if [[ -f $CONF ]]; then
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
  for pid in "${DAEMON_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  for pid in $(grep -lzxF "SLURM_CONF=$CONF" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [[ $pid != "$$" ]] && kill -KILL "$pid" 2>/dev/null
  done
  drop_netns
  if ((failures > 0)); then
    echo "Slurm logs and job files kept in $SLURM_DIR" >&2
  else
    rm -rf "$SLURM_DIR"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_ports() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Each node's slurmd (and so its steps) in a network namespace of its own,
# joined by a bridge where slurmctld listens: a node's link can go down
# (`ip link set air0 down` in its namespace) as a real machine's does. The
# namespaces are entered with nsenter: slurmd 22.05 dies at start under
# `ip netns exec`, which remounts /sys. The ranks' gloo uses air0
# (GLOO_SOCKET_IFNAME): the host name may resolve to 127.0.0.1 in each. The
# addresses are in 198.18.0.0/15, kept for benchmarks, where no real network is.
NS1=air-$$-n1 NS2=air-$$-n2 BRIDGE=airbr$$ SUBNET=198.$((RANDOM % 2 + 18)).$((RANDOM % 250))
make_netns() {
  ip link add "$BRIDGE" type bridge && ip link set "$BRIDGE" up &&
    ip addr add "$SUBNET.1/24" dev "$BRIDGE" || return
  local n ns
  for n in 1 2; do
    ns=$NS1
    ((n == 2)) && ns=$NS2
    ip netns add "$ns" &&
      ip link add "airv$$n$n" type veth peer name air0 netns "$ns" &&
      ip link set "airv$$n$n" master "$BRIDGE" up &&
      ip -n "$ns" addr add "$SUBNET.$((n + 1))/24" dev air0 &&
      ip -n "$ns" link set air0 up && ip -n "$ns" link set lo up || return
  done
}
drop_netns() {
  ip netns del "$NS1" 2>/dev/null
  ip netns del "$NS2" 2>/dev/null
  ip link del "$BRIDGE" 2>/dev/null
  true
}

start_cluster() {
  mkdir -p "$SLURM_DIR"/{state,log,munge,spool/node1,spool/node2} "$W"
  chmod 700 "$SLURM_DIR/munge"
  head -c 1024 /dev/urandom >"$SLURM_DIR/munge/munge.key"
  chmod 600 "$SLURM_DIR/munge/munge.key"
  local socket=$SLURM_DIR/munge/munge.socket
  munged --foreground --force --key-file="$SLURM_DIR/munge/munge.key" --socket="$socket" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/log/munged.log" \
    --seed-file="$SLURM_DIR/munge/seed" >"$SLURM_DIR/log/munged.out" 2>&1 &
  DAEMON_PIDS+=($!)

  local ctld_port port1 port2
  read -r ctld_port port1 port2 <<<"$(free_ports 3)"
  cat >"$CONF" <<EOF
ClusterName=airreal
SlurmctldHost=localhost($SUBNET.1)
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
JobCompType=jobcomp/filetxt
JobCompLoc=$SLURM_DIR/jobcomp.txt
ReturnToService=2
KillWait=$KILL_WAIT
OverTimeLimit=0
InactiveLimit=0
JobRequeue=1
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=node1 NodeAddr=$SUBNET.2 Port=$port1 CPUs=2 State=UNKNOWN
NodeName=node2 NodeAddr=$SUBNET.3 Port=$port2 CPUs=2 State=UNKNOWN
PartitionName=low Nodes=ALL Default=YES PriorityTier=1 PreemptMode=REQUEUE MaxTime=INFINITE State=UP
PartitionName=high Nodes=ALL PriorityTier=2 PreemptMode=OFF MaxTime=INFINITE State=UP
EOF
  : >"$SLURM_DIR/plugstack.conf"

  wait_for "[[ -S $socket ]]" 10 || return 1
  sl slurmctld -D >"$SLURM_DIR/log/slurmctld.out" 2>&1 &
  DAEMON_PIDS+=($!)
  sl nsenter --net="/run/netns/$NS1" slurmd -D -N node1 >"$SLURM_DIR/log/slurmd-node1.out" 2>&1 &
  DAEMON_PIDS+=($!)
  sl nsenter --net="/run/netns/$NS2" slurmd -D -N node2 >"$SLURM_DIR/log/slurmd-node2.out" 2>&1 &
  DAEMON_PIDS+=($!)
  wait_for "[[ \$(sl sinfo -h -N -o '%N %T' 2>/dev/null | sort -u | grep -c ' idle') == 2 ]]" 30
}

started=$SECONDS
make_netns 2>"$SLURM_DIR/netns.err" || skip "no network namespaces with a bridge here: $(head -1 "$SLURM_DIR/netns.err")"
if ! start_cluster; then
  tail -n 5 "$SLURM_DIR"/log/* >&2 2>/dev/null
  failures=1 # keep the logs
  skip "the Slurm daemons did not come up in 30s (logs in $SLURM_DIR/log)"
fi
echo "Slurm cluster up in $((SECONDS - started))s"

# The training loop of every job: a DDP model, a step every ~50 ms, a stop at
# the agreed step with a checkpoint. A run that finds a checkpoint to resume
# (AIR_RESUME_FROM) loads it, says at which step it goes on, and ends.
cat >"$W/train.py" <<'PY'
import os, sys, time
import torch, torch.distributed as dist
import air, air.data
dist.init_process_group("gloo")
rank = dist.get_rank()
tag = os.environ["CASE"]
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
if os.environ.get("AIR_RESUME_FROM"):
    air.data.load({"weight": model.module.weight.data})
    print("%s rank %d resumed from %s at step %d" % (tag, rank, os.environ["AIR_RESUME_FROM"], air.steps()),
          flush=True)
    dist.barrier()
    sys.exit(0)
while True:
    optimizer.zero_grad()
    model(torch.ones(4, 8)).sum().backward()  # DDP's all-reduce
    optimizer.step()                          # counted: air.steps()
    time.sleep(0.05)
    if air.steps() == 10:
        print("%s rank %d at step 10" % (tag, rank), flush=True)
    if air.should_stop():
        air.data.save({"weight": model.module.weight.data})
        if os.environ.get("SLOW_SAVE_NODE") == os.environ["GROUP_RANK"]:
            time.sleep(float(os.environ["SLOW_SAVE_S"]))  # this node's copy of its shard to slow storage
        print("%s rank %d stopped at step %d" % (tag, rank, air.steps()), flush=True)
        sys.exit(0)
PY

# job_script CASE [SBATCH LINES...]: the batch script of a case, as a user
# writes it (`exec srun`, one air-run per node), to $W/CASE.sbatch. A line
# `export NAME=VALUE` goes into the script instead.
job_script() {
  local case=$1
  shift
  {
    echo "#!/bin/bash"
    echo "#SBATCH --job-name=$case"
    echo "#SBATCH --nodes=2"
    echo "#SBATCH --ntasks-per-node=1"
    echo "#SBATCH --output=$W/$case.out"
    echo "#SBATCH --open-mode=append"
    local line
    for line in "$@"; do [[ $line == export\ * ]] || echo "#SBATCH $line"; done
    for line in "$@"; do [[ $line == export\ * ]] && echo "$line"; done
    cat <<SH
export CASE=$case PYTHONPATH=$AIR_SOURCE_DIR/python
export AIR_RUN_JOIN_TOKEN=$case-$RANDOM$RANDOM GLOO_SOCKET_IFNAME=air0
exec srun $AIR_RUN --cpu-ranks 2 --python $TORCH_PYTHON --checkpoint-dir $W/$case-ckpt \\
  --summary "$W/$case-summary-\${SLURM_RESTART_COUNT:-0}-{node_rank}.json" $W/train.py
SH
  } >"$W/$case.sbatch"
}

# submit CASE: submits $W/CASE.sbatch; prints the job id.
submit() { sl sbatch --parsable --chdir="$W" "$W/$1.sbatch"; }

# job_state ID: the job's state as slurmctld has it now ("" once it forgot it).
job_state() { sl scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }

# completed_states ID: every end jobcomp recorded for the job (a requeued job has several).
completed_states() {
  sed -n "s/.*JobId=$1 .*JobState=\([A-Z_]*\).*/\1/p" "$SLURM_DIR/jobcomp.txt" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'
}

# wait_out CASE TEXT COUNT SECONDS: until the case's output has COUNT lines with TEXT.
wait_out() {
  wait_for "[[ \$(grep -c '$2' $W/$1.out 2>/dev/null) -ge $3 ]]" "$4"
}

# expect_stopped_at_one_step CASE: every rank of both nodes stopped at one
# step and saved; prints that step. Checks the summaries of run 0.
expect_stopped_at_one_step() {
  local case=$1 steps
  steps=$(sed -n "s/^.*$case rank [0-3] stopped at step \([0-9]*\)$/\1/p" "$W/$case.out" | sort -u)
  [[ $(grep -c "$case rank [0-3] stopped at step" "$W/$case.out") == 4 ]] ||
    fail "$case: not every rank stopped: $(grep -E 'stopped|killed|did not|air-run:' "$W/$case.out" | tail -12)" || return
  [[ $(echo "$steps" | wc -l) == 1 ]] || fail "$case: ranks stopped at different steps: $steps" || return
  [[ -f $W/$case-ckpt/checkpoint-000001/.metadata ]] || [[ -d $W/$case-ckpt/checkpoint-000001 ]] ||
    fail "$case: no checkpoint in $W/$case-ckpt" || return
  echo "$steps"
}

# summary CASE NODE EXPR: a Python expression over run 0's summary of NODE.
summary() {
  wait_for "[[ -s $W/$1-summary-0-$2.json ]]" 30 || fail "no summary $W/$1-summary-0-$2.json" || return
  json_get "$W/$1-summary-0-$2.json" "$3"
}

# say_case CASE ID: what the case took, as Slurm and air-run saw it: the
# job's start and end (jobcomp), and air-run's stop and end lines.
say_case() {
  sed -n "s/.*JobId=$2 .*JobState=\([A-Z_]*\) .*StartTime=\([^ ]*\) EndTime=\([^ ]*\) .*/    jobcomp: \1 \2 -> \3/p" \
    "$SLURM_DIR/jobcomp.txt"
  grep -E "^air-run( \(node [0-9]+\))?: (SIG|run |Slurm job)" "$W/$1.out" | sed 's/^/    /'
}

# expect_resumed CASE STEP: the job's next run went on from STEP on every rank.
expect_resumed() {
  local r
  for r in 0 1 2 3; do
    expect_contains "$(cat "$W/$1.out")" "$1 rank $r resumed from $W/$1-ckpt/checkpoint-000001 at step $2"
  done
}

# release ID: a requeued job is held for 120 s before it may start again:
# let it start now.
release() {
  wait_for "[[ \$(job_state $1) == PENDING ]]" 60 || return 1
  sl scontrol update JobId="$1" StartTime=now >/dev/null 2>&1
  sl scontrol release "$1" >/dev/null 2>&1 || true
}

# The time limit and the warning need slurmctld's periodic check (every 30 s
# or so), so both cases start together and are judged by their tests below.
job_script timelimit "--time=1" "--cpus-per-task=1"
# The warning comes at slurmctld's first check with 60 s or less left: 60-90 s
# in, once the ranks poll even on a loaded machine. Node 1's ranks take 5 s
# more than node 0's to finish their save (a grace period of 30 s allows it):
# the requeue must come after they exit, with the checkpoint complete. (Here
# rank 0's TCPStore also holds node 0's ranks until node 1's have gone, up to
# 30 s: node 0's own wait for every node's `stopped` is what holds beyond
# that; tests/unit/cluster_control_test.cpp shows it without a store.)
job_script usr1 "--time=2" "--cpus-per-task=1" "--signal=B:USR1@60" "--requeue" \
  "export SLOW_SAVE_NODE=1 SLOW_SAVE_S=5 AIR_RUN_GRACE_PERIOD=30s"
# E2E_ONLY (lib.sh) submits only the jobs of the tests it runs.
only() { [[ -z ${E2E_ONLY:-} || $1 == *"$E2E_ONLY"* ]]; }
only test_time_limit_stops_every_rank_at_one_step && TIMELIMIT_JOB=$(submit timelimit)
only test_usr1_warning_with_exec_srun_stops_saves_and_requeues && USR1_JOB=$(submit usr1)
SUBMITTED=$SECONDS

test_time_limit_stops_every_rank_at_one_step() {
  wait_out timelimit "at step 10" 4 120 || fail "the ranks did not start: $(tail -5 "$W/timelimit.out")" || return
  wait_for "[[ -n \$(completed_states $TIMELIMIT_JOB) ]]" 200 || fail "the job did not end" || return
  local took=$((SECONDS - SUBMITTED)) step
  step=$(expect_stopped_at_one_step timelimit) || return
  local states
  states=$(completed_states "$TIMELIMIT_JOB")
  echo "  time limit: job $TIMELIMIT_JOB ended ${took}s after sbatch (--time=1), jobcomp: $states; stop step $step"
  echo "  summaries: node 0 $(summary timelimit 0 'd["outcome"]["status"], d["outcome"]["reason"]'); node 1 $(summary timelimit 1 'd["outcome"]["status"], d["outcome"]["preemption"]["stopped_ranks"]')"
  say_case timelimit "$TIMELIMIT_JOB"
  expect_eq "$states" "TIMEOUT"
  expect_eq "$(summary timelimit 0 'd["outcome"]["status"], d["outcome"]["preemption"]["stopped_ranks"], d["outcome"]["preemption"]["cause"]')" \
    "preempted [0, 1] time_limit"
  expect_not_contains "$(cat "$W/timelimit.out")" "second interrupt"
  expect_eq "$(summary timelimit 1 'd["outcome"]["status"], d["outcome"]["preemption"]["stopped_ranks"]')" "preempted [2, 3]"
  # The next run (a new job on the same checkpoint directory) resumes there.
  job_script timelimit "--cpus-per-task=1"
  local next
  next=$(submit timelimit)
  wait_for "[[ -n \$(completed_states $next) ]]" 120 || fail "the next run did not end" || return
  expect_eq "$(completed_states "$next")" "COMPLETED"
  expect_resumed timelimit "$step"
}

test_usr1_warning_with_exec_srun_stops_saves_and_requeues() {
  wait_out usr1 "at step 10" 4 120 || fail "the ranks did not start: $(tail -5 "$W/usr1.out")" || return
  wait_out usr1 "stopped at step" 4 200 || fail "the ranks did not stop: $(grep air-run "$W/usr1.out" | tail -8)" || return
  local took=$((SECONDS - SUBMITTED)) step
  step=$(expect_stopped_at_one_step usr1) || return
  release "$USR1_JOB" || fail "job $USR1_JOB was not requeued: $(job_state "$USR1_JOB"), $(grep air-run "$W/usr1.out" | tail -5)" || return
  # Node 0 asked for the requeue only after node 1's slower ranks were done.
  local requeued_at slow_done_at
  requeued_at=$(grep -n "Slurm job $USR1_JOB requeued" "$W/usr1.out" | head -1 | cut -d: -f1)
  slow_done_at=$(grep -n "usr1 rank [23] stopped at step" "$W/usr1.out" | tail -1 | cut -d: -f1)
  [[ -n $requeued_at && -n $slow_done_at ]] && ((requeued_at > slow_done_at)) ||
    fail "the requeue (line ${requeued_at:-none}) came before node 1's ranks finished (line ${slow_done_at:-none})"
  expect_contains "$(cat "$W/usr1.out")" "air-run (node 0): Slurm job $USR1_JOB requeued (scontrol requeue)"
  wait_for "[[ \$(job_state $USR1_JOB) == COMPLETED || \$(job_state $USR1_JOB) == FAILED ]]" 120 ||
    fail "the requeued run did not end: $(job_state "$USR1_JOB")" || return
  echo "  B:USR1@60: job $USR1_JOB stopped ${took}s after sbatch at step $step, jobcomp: $(completed_states "$USR1_JOB"), then $(job_state "$USR1_JOB")"
  echo "  summary: node 0 $(summary usr1 0 'd["outcome"]["status"], d["outcome"]["preemption"]["signal"], d["outcome"]["preemption"]["cause"], d["outcome"]["preemption"]["requeue"]')"
  expect_eq "$(summary usr1 0 'd["outcome"]["status"], d["outcome"]["preemption"]["signal"], d["outcome"]["preemption"]["stopped_ranks"], d["outcome"]["preemption"]["cause"], d["outcome"]["preemption"]["requeue"]')" \
    "preempted SIGUSR1 [0, 1] time_limit_warning requeued"
  say_case usr1 "$USR1_JOB"
  expect_eq "$(job_state "$USR1_JOB")" "COMPLETED"
  expect_resumed usr1 "$step"
}

test_partition_preemption_requeues_and_resumes() {
  job_script preempt "--exclusive"
  local job start
  job=$(submit preempt)
  wait_out preempt "at step 10" 4 150 || fail "the ranks did not start: $(tail -5 "$W/preempt.out")" || return
  start=$SECONDS
  # A job of the higher partition needs both nodes: Slurm requeues this one.
  sl sbatch --parsable --chdir="$W" --partition=high --nodes=2 --exclusive --output="$W/high.out" \
    --wrap "srun true" >/dev/null
  wait_out preempt "stopped at step" 4 60 || fail "the ranks did not stop: $(grep air-run "$W/preempt.out" | tail -8)" || return
  local step
  step=$(expect_stopped_at_one_step preempt) || return
  echo "  preemption: job $job stopped $((SECONDS - start))s after the high job came, at step $step, jobcomp: $(completed_states "$job")"
  echo "  summary: node 0 $(summary preempt 0 'd["outcome"]["status"], d["outcome"]["reason"]')"
  expect_eq "$(summary preempt 0 'd["outcome"]["status"], d["outcome"]["preemption"]["stopped_ranks"]')" \
    "preempted [0, 1]"
  expect_eq "$(summary preempt 1 'd["outcome"]["status"], d["outcome"]["preemption"]["stopped_ranks"]')" \
    "preempted [2, 3]"
  expect_not_contains "$(cat "$W/preempt.out")" "second interrupt"
  release "$job" || fail "job $job was not requeued: $(job_state "$job")" || return
  wait_for "[[ \$(job_state $job) == COMPLETED || \$(job_state $job) == FAILED ]]" 150 ||
    fail "the requeued run did not end: $(job_state "$job")" || return
  say_case preempt "$job"
  expect_eq "$(job_state "$job")" "COMPLETED"
  expect_resumed preempt "$step"
}

test_scancel_stops_every_rank_at_one_step() {
  job_script scancel "--exclusive"
  local job start
  job=$(submit scancel)
  wait_out scancel "at step 10" 4 150 || fail "the ranks did not start: $(tail -5 "$W/scancel.out")" || return
  start=$SECONDS
  sl scancel "$job"
  # jobcomp has the job CANCELLED at once: its processes end after.
  wait_for "[[ -n \$(completed_states $job) ]]" 60 || fail "the job did not end" || return
  wait_for "! sl squeue -h -j $job 2>/dev/null | grep -q ." 60 || fail "the job's steps did not end" || return
  wait_out scancel "stopped at step" 4 30
  local step
  step=$(expect_stopped_at_one_step scancel) || return
  echo "  scancel: job $job ended $((SECONDS - start))s after scancel at step $step, jobcomp: $(completed_states "$job")"
  say_case scancel "$job"
  expect_eq "$(completed_states "$job")" "CANCELLED"
  expect_eq "$(summary scancel 0 'd["outcome"]["status"], d["outcome"]["preemption"]["stopped_ranks"]')" "preempted [0, 1]"
}

# step_pids CASE NODE: the processes of CASE's step on NODE: the agent, its
# ranks and helpers (their environment names the case and the node; that of
# slurmstepd does not, and srun runs on node1).
step_pids() {
  local pid
  for pid in $(grep -lzxF "CASE=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    grep -qzxF "SLURMD_NODENAME=$2" "/proc/$pid/environ" 2>/dev/null && echo "$pid"
  done
}

# agent_pid CASE NODE: the air-run agent of CASE's step on NODE.
agent_pid() {
  local pid
  for pid in $(step_pids "$1" "$2"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$(basename "$AIR_RUN" | cut -c1-15)" ]] && echo "$pid"
  done
}

# A node that vanishes mid-training, as a paused virtual machine: node2's
# link goes down and its agent and ranks are frozen (SIGSTOP): no FIN, no
# reset, nothing more said. Node 0 (node1) must end the job within the documented 5 s of
# silence, its ranks included although they wait in a gloo all-reduce with
# the frozen ones, and name node 1 as lost; thawed, node2's agent must name
# itself as the node that was lost, not node1.
test_vanished_node_ends_the_job_and_the_thawed_one_names_itself() {
  job_script vanish "--exclusive"
  local job
  job=$(submit vanish)
  wait_out vanish "at step 10" 4 150 || fail "the ranks did not start: $(tail -5 "$W/vanish.out")" || return
  local healthy frozen
  healthy=$(agent_pid vanish node1)
  frozen=$(step_pids vanish node2)
  [[ -n $healthy && -n $(agent_pid vanish node2) && $(echo "$frozen" | wc -w) -ge 3 ]] ||
    fail "node1's agent ($healthy) or node2's agent and 2 ranks ($frozen) not found" || return
  local froze=$EPOCHREALTIME
  ip -n "$NS2" link set air0 down
  # shellcheck disable=SC2086 # one pid a word
  kill -STOP $frozen
  local deadline=$((SECONDS + 60))
  while kill -0 "$healthy" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.05; done
  local took
  took=$(awk -v a="$froze" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  # The machine comes back 7 s after it went, past the heartbeat timeout:
  # its link, then its processes.
  sleep "$(awk -v a="$froze" -v b="$EPOCHREALTIME" 'BEGIN { d = 7 - (b - a); print (d > 0 ? d : 0) }')"
  ip -n "$NS2" link set air0 up
  # shellcheck disable=SC2086
  kill -CONT $frozen
  echo "  vanished node: node1's agent ended ${took}s after node2 froze (documented: 5 s without heartbeats)"
  kill -0 "$healthy" 2>/dev/null && fail "node1's agent still runs 60 s after node2 froze" && return
  # The thawed agent finds node 0 gone and ends the job's step.
  wait_for "[[ -n \$(completed_states $job) ]]" 60 || fail "the job did not end after the thaw" || return
  echo "  summaries: node 0 $(summary vanish 0 'd["outcome"]["status"], d["outcome"]["remote_failure"]')"
  echo "             node 1 $(summary vanish 1 'd["outcome"]["status"], d["outcome"]["remote_failure"]')"
  sed -n '/rank [0-3] at step 10/,$p' "$W/vanish.out" | grep -E '^(air-run|srun)|^  (stopped|still|root cause)' |
    sed 's/^/    /'
  awk -v t="$took" 'BEGIN { exit !(t <= 8) }' || fail "node1's agent took ${took}s, documented 5 s (+3 s margin)"
  expect_contains "$(cat "$W/vanish.out")" "stopped because node 1 (node2) failed: no word from its agent for 5s"
  expect_contains "$(cat "$W/vanish.out")" "stopped because node 1 (node2) failed: its agent was frozen for"
  expect_not_contains "$(cat "$W/vanish.out")" "node 0 (node1) failed"
  expect_eq "$(summary vanish 0 'd["outcome"]["remote_failure"]["node_rank"]')" "1"
  expect_contains "$(summary vanish 0 'd["outcome"]["remote_failure"]["reason"]')" "no word from its agent"
  expect_eq "$(summary vanish 1 'd["outcome"]["remote_failure"]["node_rank"]')" "1"
  expect_contains "$(summary vanish 1 'd["outcome"]["remote_failure"]["reason"]')" "its agent was frozen for"
  local left
  left=$(step_pids vanish node1; step_pids vanish node2)
  expect_eq "$left" ""
}

run_tests
