#!/usr/bin/env python3
"""What a restart costs users: from a rank's failure to every rank back in its
training loop, `import torch` and the process group included.

  scripts/bench-restart-to-step.py [--air-run build/cli/air-run] [--python /usr/bin/python3]
                                   [--torchrun torchrun] [--ranks 8] [--rounds 3] [--json out.json]
                                   [--other OTHER_AIR_RUN]

Each run starts N ranks of one script with --max-restarts 1. Every rank
imports torch, joins a gloo process group and does one all_reduce (its first
step), and stamps the time. On the first attempt the last rank then stamps
its failure and exits 1 (after a barrier: every stamp is written), while the
others wait in a second all_reduce (they are torn down). On the second attempt every rank stamps its first step and
exits 0. Two figures per run:

- first start: the last rank's first step of attempt 0, from the launch;
- restart to first step: the last rank's first step of attempt 1, from the
  failure.

Launchers, alternating within each round so that load on a shared machine
hits all alike: air-run --no-preload (a fresh interpreter each: the
baseline of every ratio), air-run as it starts ranks by default (preload:
auto: restarts fork from one interpreter that imported torch once; the first
attempt forks too only when the ranks are at least as many as the CPUs),
air-run --preload torch (every attempt forked), and torchrun when one is found that runs (Debian's
1.13 torchrun does not run on every Python; the GPU machine's 2.x does).
--other adds another air-run binary (a build of an earlier commit), fresh
and warm, to compare two builds in one run.
Medians over the rounds, and each launcher's ratio to fresh air-run (below
1: faster). Nothing asserts: it is a benchmark.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RANK_SCRIPT = r"""
import os, sys, time
d = sys.argv[1]
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
rank = dist.get_rank()
with open(os.path.join(d, "step.%s.%d" % (attempt, rank)), "w") as f:
    f.write(str(time.time_ns()))
if attempt == "0":
    dist.barrier()  # every stamp written before the failure (a slow rank is not torn down mid-write)
    if rank == dist.get_world_size() - 1:
        with open(os.path.join(d, "fail"), "w") as f:
            f.write(str(time.time_ns()))
        os._exit(1)
    dist.all_reduce(t)  # never completes: the failed rank is gone
"""


def read_ns(path):
    with open(path) as f:
        return int(f.read())


def one_run(cmd, workdir, ranks, env, limit):
    for name in os.listdir(workdir):
        if name == "fail" or name.startswith("step."):
            os.remove(os.path.join(workdir, name))
    launched = time.time_ns()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=limit, env=env)
    except subprocess.TimeoutExpired:
        return None, "timeout after %d s" % limit
    try:
        failed = read_ns(os.path.join(workdir, "fail"))
        first = max(read_ns(os.path.join(workdir, "step.0.%d" % r)) for r in range(ranks))
        again = max(read_ns(os.path.join(workdir, "step.1.%d" % r)) for r in range(ranks))
    except (OSError, ValueError):
        return None, proc.returncode
    return ((first - launched) / 1e9, (again - failed) / 1e9), proc.returncode


def torchrun_works(torchrun, env):
    if not torchrun:
        return False
    try:
        out = subprocess.run([torchrun, "--help"], capture_output=True, timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default="build/cli/air-run")
    ap.add_argument("--python", default="/usr/bin/python3", help="an interpreter that has torch")
    ap.add_argument("--torchrun", default="torchrun", help="torchrun executable; skipped when it does not run")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the figures as JSON here")
    ap.add_argument("--run-timeout", type=int, default=300, help="seconds one launch may take")
    ap.add_argument("--other", help="another air-run binary, timed fresh and warm alongside")
    args = ap.parse_args()

    workdir = tempfile.mkdtemp(prefix="air-bench-restart-step-")
    script = os.path.join(workdir, "rank.py")
    with open(script, "w") as f:
        f.write(RANK_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1", AIR_RUN_TIMEOUT="none")
    air = os.path.abspath(args.air_run)
    # CPU ranks on every machine: on a GPU machine --cpu-ranks alone would give one rank per GPU.
    flags = ["--quiet", "--python", args.python, "--accelerator-type", "CPU", "-n", str(args.ranks),
             "--max-restarts", "1", "--hang-timeout", "none"]
    launchers = {
        "air-run --no-preload": [air, *flags, "--no-preload", script, workdir],
        "air-run (auto, default)": [air, *flags, script, workdir],
        "air-run --preload torch": [air, *flags, "--preload", "torch", script, workdir],
    }
    if args.other:
        other = os.path.abspath(args.other)
        launchers["other"] = [other, *flags, "--no-preload", script, workdir]
        launchers["other --preload torch"] = [other, *flags, "--preload", "torch", script, workdir]
    torchrun = shutil.which(args.torchrun) if args.torchrun else None
    if torchrun_works(torchrun, env):
        launchers["torchrun"] = [torchrun, "--standalone", "--nproc-per-node", str(args.ranks), "--max-restarts", "1",
                                 script, workdir]
    else:
        print(f"torchrun: not measured ({args.torchrun} not found or does not run here)", file=sys.stderr)

    figures = {name: {"first_start_s": [], "restart_to_step_s": []} for name in launchers}
    for round_no in range(args.rounds):
        for name, cmd in launchers.items():
            got, rc = one_run(cmd, workdir, args.ranks, env, args.run_timeout)
            if got is None:
                print(f"round {round_no + 1}: {name}: no figures (exit {rc})", file=sys.stderr)
                continue
            figures[name]["first_start_s"].append(got[0])
            figures[name]["restart_to_step_s"].append(got[1])
            print(f"round {round_no + 1}: {name}: first start {got[0]:.2f} s, restart to first step {got[1]:.2f} s",
                  file=sys.stderr, flush=True)

    def median(values):
        return statistics.median(values) if values else None

    base_first = median(figures["air-run --no-preload"]["first_start_s"])
    base_restart = median(figures["air-run --no-preload"]["restart_to_step_s"])
    print(f"{args.ranks} ranks, import torch + gloo init_process_group + one all_reduce; "
          f"medians of {args.rounds} rounds")
    print(f"{'launcher':26} {'first start':>12} {'ratio':>6} {'restart to step':>16} {'ratio':>6}   all")
    for name, f in figures.items():
        first, restart = median(f["first_start_s"]), median(f["restart_to_step_s"])
        if first is None or restart is None:
            print(f"{name:26} {'-':>12} {'-':>6} {'-':>16} {'-':>6}")
            continue
        r1 = first / base_first if base_first else float("nan")
        r2 = restart / base_restart if base_restart else float("nan")
        every = ", ".join(f"{x:.2f}" for x in f["restart_to_step_s"])
        print(f"{name:26} {first:>10.2f} s {r1:>6.2f} {restart:>14.2f} s {r2:>6.2f}   {every}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"ranks": args.ranks, "rounds": args.rounds, "figures": figures}, out, indent=2)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
