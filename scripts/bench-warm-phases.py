#!/usr/bin/env python3
"""Where a rank's first start goes, fresh against warm (--preload torch):
one figure per phase of a DDP rank's start, to find what makes the warm
start slower than a fresh one on a GPU host.

  scripts/bench-warm-phases.py [--air-run build/cli/air-run] [--python /usr/bin/python3]
                               [--device auto|cuda|cpu] [--ranks 1] [--rounds 3]
                               [--preload torch] [--json out.json]

Each rank of a small DDP script (a Linear model, as in PyTorch's DDP
tutorial: NCCL on CUDA, else gloo on the CPU) stamps, at each phase, the wall
clock, its own CPU time (user and system) and its page faults (minor and
major). The phases:

  start        the script's first line runs (from the launch)
  import       `import torch` and torch.distributed, nn, optim
  device       the device is ready (CUDA: torch.cuda.set_device and a first tensor)
  group        init_process_group and a barrier
  model        the model built on the device and wrapped in DDP
  first step   one forward, backward and optimizer step, synchronised

Launches alternate (fresh, warm, fresh, ...) so that load that comes and goes
falls on both alike; the table gives each phase's median duration (the
slowest rank's) and, beside it, its CPU time and minor faults. A phase whose
wall time grows warm while its CPU time does not is waiting (a lock, a
device, a peer); one whose faults grow is copying the zygote's pages. The
rank also reports what it inherits that a fresh interpreter decides for
itself (CPUs, threads, torch's thread count). Nothing asserts: it prints.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SAID = set()  # air-run's --preload lines already shown
PHASES = ["start", "import", "device", "group", "model", "first step"]

RANK_SCRIPT = r"""
import json, os, resource, sys, time

stamps = []
def stamp(name):
    r = resource.getrusage(resource.RUSAGE_SELF)
    stamps.append({"phase": name, "ns": time.time_ns(), "cpu": r.ru_utime + r.ru_stime,
                   "minflt": r.ru_minflt, "majflt": r.ru_majflt})

stamp("start")
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
stamp("import")
cuda = sys.argv[2] == "cuda"
local_rank = int(os.environ["LOCAL_RANK"])
if cuda:
    torch.cuda.set_device(local_rank % torch.cuda.device_count())
    device = torch.device("cuda", torch.cuda.current_device())
    torch.ones(1, device=device)
    torch.cuda.synchronize()
else:
    device = torch.device("cpu")
stamp("device")
dist.init_process_group("nccl" if cuda else "gloo")
dist.barrier()
stamp("group")
model = DDP(nn.Linear(20, 1).to(device), device_ids=[device.index] if cuda else None)
opt = optim.SGD(model.parameters(), lr=0.01)
stamp("model")
x, y = torch.randn(32, 20, device=device), torch.randn(32, 1, device=device)
loss = nn.functional.mse_loss(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
if cuda:
    torch.cuda.synchronize()
stamp("first step")
inherited = {"cpus": len(os.sched_getaffinity(0)), "threads": len(os.listdir("/proc/self/task")),
             "torch_threads": torch.get_num_threads(), "omp": os.environ.get("OMP_NUM_THREADS"),
             "torch": torch.__version__}
with open(os.path.join(sys.argv[1], "phases.%d.json" % dist.get_rank()), "w") as f:
    json.dump({"stamps": stamps, "inherited": inherited}, f)
dist.destroy_process_group()
"""


def one_launch(cmd, workdir, ranks, limit):
    """Runs one launch; returns per-phase (wall s, cpu s, minor faults) of the
    slowest rank in each phase, and what rank 0 inherited; or None."""
    for name in os.listdir(workdir):
        if name.startswith("phases."):
            os.remove(os.path.join(workdir, name))
    launched = time.time_ns()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=limit, text=True)
    except subprocess.TimeoutExpired:
        return None, "timeout after %d s" % limit
    for line in proc.stderr.splitlines():  # a warm start refused or given up says so: show it once
        if "--preload" in line and line not in SAID:
            SAID.add(line)
            print(line, file=sys.stderr, flush=True)
    if proc.returncode != 0:
        return None, "exit %d: %s" % (proc.returncode, proc.stderr.strip().splitlines()[-1:] or "")
    per_rank = []
    for r in range(ranks):
        with open(os.path.join(workdir, "phases.%d.json" % r)) as f:
            per_rank.append(json.load(f))
    phases = {}
    for i, name in enumerate(PHASES):
        walls, cpus, faults = [], [], []
        for got in per_rank:
            s = got["stamps"]
            before_ns = launched if i == 0 else s[i - 1]["ns"]
            walls.append((s[i]["ns"] - before_ns) / 1e9)
            cpus.append(s[i]["cpu"] - (0.0 if i == 0 else s[i - 1]["cpu"]))
            faults.append(s[i]["minflt"] - (0 if i == 0 else s[i - 1]["minflt"]))
        slowest = max(range(ranks), key=lambda k: walls[k])
        phases[name] = (walls[slowest], cpus[slowest], faults[slowest])
    return {"phases": phases, "inherited": per_rank[0]["inherited"]}, 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default="build/cli/air-run")
    ap.add_argument("--python", default="/usr/bin/python3", help="an interpreter that has torch")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--preload", default="torch", help="the modules of the warm launch")
    ap.add_argument("--json", help="write the figures as JSON here")
    ap.add_argument("--run-timeout", type=int, default=300, help="seconds one launch may take")
    args = ap.parse_args()

    device = args.device
    if device == "auto":
        probe = subprocess.run([args.python, "-c", "import torch; print(torch.cuda.is_available())"],
                               capture_output=True, text=True)
        device = "cuda" if probe.stdout.strip() == "True" else "cpu"
    workdir = tempfile.mkdtemp(prefix="air-bench-warm-phases-")
    script = os.path.join(workdir, "rank.py")
    with open(script, "w") as f:
        f.write(RANK_SCRIPT)
    air = os.path.abspath(args.air_run)
    ranks = (["--num-accelerators", str(args.ranks)] if device == "cuda"
             else ["--accelerator-type", "CPU", "-n", str(args.ranks)])
    base = [air, "--quiet", "--python", args.python, *ranks, "--hang-timeout", "none"]
    launches = {"fresh": base + ["--no-preload", "--", script, workdir, device],
                "warm": base + ["--preload", args.preload, "--", script, workdir, device]}
    runs = {name: [] for name in launches}
    for round_no in range(args.rounds):
        for name, cmd in launches.items():
            got, why = one_launch(cmd, workdir, args.ranks, args.run_timeout)
            if got is None:
                print(f"round {round_no + 1}: {name}: no figures ({why})", file=sys.stderr, flush=True)
                continue
            runs[name].append(got)
            total = sum(w for w, _, _ in got["phases"].values())
            print(f"round {round_no + 1}: {name}: first step {total:.2f} s after the launch", file=sys.stderr,
                  flush=True)

    print(f"{args.ranks} rank(s) on {device}, {args.python}; medians of {args.rounds} rounds "
          "(wall s / cpu s / minor faults of the slowest rank)")
    print(f"{'phase':12}" + "".join(f" {name + ' wall':>11} {'cpu':>6} {'faults':>8}" for name in launches))
    for phase in PHASES + ["total"]:
        row = f"{phase:12}"
        for name in launches:
            if not runs[name]:
                row += f" {'-':>11} {'-':>6} {'-':>8}"
                continue
            if phase == "total":
                vals = [[sum(p[k] for p in r["phases"].values()) for r in runs[name]] for k in range(3)]
            else:
                vals = [[r["phases"][phase][k] for r in runs[name]] for k in range(3)]
            wall, cpu, faults = (statistics.median(v) for v in vals)
            row += f" {wall:>11.3f} {cpu:>6.2f} {faults:>8.0f}"
        print(row)
    for name in launches:
        if runs[name]:
            print(f"{name}: rank 0 inherited {runs[name][-1]['inherited']}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"ranks": args.ranks, "device": device, "runs": runs}, out, indent=2)


if __name__ == "__main__":
    main()
