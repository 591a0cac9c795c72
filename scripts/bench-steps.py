#!/usr/bin/env python3
"""Cost of air-run's step and collective counting, per step, and what it does
to a training loop's speed.

  scripts/bench-steps.py [--air-run build/cli/air-run] [--python /usr/bin/python3]
                         [--steps 20000] [--rounds 3] [--device cpu|cuda] [--json out.json]

One rank runs the same script twice per round, alternating: once under
air-run (its shim counts every optimizer step and times every collective)
and once with plain Python (nothing counted). The script times, in one
process:

- `optimizer.step()` of a small SGD optimizer (grads set once), STEPS times;
- `dist.all_reduce` of one element on a one-rank gloo group, STEPS times;
- a small training loop (forward, backward, all_reduce of the gradients,
  optimizer step): the speed a user feels, with the hooks in place;
- a DistributedDataParallel training loop (gloo on CPU, NCCL on a GPU),
  which passes through the shim's DDP forward and backward wrappers; and,
  inside the counted rank, the same loop in alternating blocks with the
  wrappers in place and taken out (the ratio without the noise between
  two processes).

Reported: microseconds per call with and without counting, the difference
(the cost of counting), and the training loop's ratio (counted / plain; 1.00
is no cost); and, measured inside the counted rank without torch around it,
the cost of counting one step and of timing one collective call (the
figures that do not drown in the noise of a shared machine). Medians over
the rounds. Nothing asserts: it is a benchmark.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SCRIPT = r"""
import os, sys, time, torch, torch.distributed as dist
steps = int(sys.argv[1])
device = sys.argv[2]
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
os.environ.setdefault("RANK", "0")
os.environ.setdefault("WORLD_SIZE", "1")
dist.init_process_group("gloo")
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=1e-6)
for p in model.parameters():
    p.grad = torch.zeros_like(p)
for _ in range(200):
    opt.step()
t0 = time.perf_counter()
for _ in range(steps):
    opt.step()
step_us = (time.perf_counter() - t0) / steps * 1e6
t = torch.ones(1)
for _ in range(200):
    dist.all_reduce(t)
t0 = time.perf_counter()
for _ in range(steps):
    dist.all_reduce(t)
coll_us = (time.perf_counter() - t0) / steps * 1e6
x = torch.randn(256, 64, device=device)
y = torch.randn(256, 1, device=device)
loop_steps = max(steps // 10, 100)
def train(n):
    for _ in range(n):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
train(50)
t0 = time.perf_counter()
train(loop_steps)
loop_us = (time.perf_counter() - t0) / loop_steps * 1e6
from torch.nn.parallel import DistributedDataParallel as DDP
width = 2048 if device == "cuda" else 256
group = dist.new_group(backend="nccl") if device == "cuda" else None
net = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                          torch.nn.ReLU(), torch.nn.Linear(width, 1)).to(device)
ddp = DDP(net, process_group=group)
ddp_opt = torch.optim.SGD(ddp.parameters(), lr=1e-9)
xb = torch.randn(512, width, device=device)
def train_ddp(n):
    for _ in range(n):
        ddp_opt.zero_grad()
        ddp(xb).sum().backward()
        ddp_opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
ddp_steps = max(steps // 20, 50)
train_ddp(20)
t0 = time.perf_counter()
train_ddp(ddp_steps)
ddp_us = (time.perf_counter() - t0) / ddp_steps * 1e6
counted = getattr(sys, "_air_run_progress", None)
ab_on_us = ab_off_us = 0.0
if counted is not None:
    # The same DDP loop in this one process, in blocks with air-run's
    # wrappers in place and taken out (DDP.forward, autograd.backward and the
    # optimizer's step counting), alternating: one GPU, one process, one
    # warm state, so the ratio is the wrappers' cost and not the noise
    # between two processes.
    import torch.autograd
    import torch.optim.optimizer as optim_mod
    wrapped = [(torch.autograd, "backward"), (DDP, "forward"), (type(ddp_opt), "step")]
    originals = [(owner, name, getattr(owner, name)) for owner, name in wrapped]
    post_hooks = getattr(optim_mod, "_global_optimizer_post_hooks", None)
    saved_hooks = dict(post_hooks) if post_hooks is not None else {}
    def hooks(on):
        for owner, name, fn in originals:
            setattr(owner, name, fn if on else getattr(fn, "__wrapped__", fn))
        if post_hooks is not None:
            post_hooks.clear()
            if on:
                post_hooks.update(saved_hooks)
    on_blocks, off_blocks = [], []
    block = max(ddp_steps // 5, 20)
    for _ in range(10):
        for on, blocks in ((True, on_blocks), (False, off_blocks)):
            hooks(on)
            t0 = time.perf_counter()
            train_ddp(block)
            blocks.append((time.perf_counter() - t0) / block * 1e6)
    hooks(True)
    import statistics
    ab_on_us, ab_off_us = statistics.median(on_blocks), statistics.median(off_blocks)
count_us = wrap_us = 0.0
if counted is not None:
    # The counting itself, without torch around it: one step counted, and one
    # collective call through the timing wrapper (minus the bare call).
    n = 200000
    base = counted.steps
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        counted.count("bench", base + i)
    count_us = (time.perf_counter() - t0) / n * 1e6
    noop = lambda: None
    timed = counted.timed(noop, 1)
    t0 = time.perf_counter()
    for _ in range(n):
        timed()
    wrapped = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        noop()
    wrap_us = (wrapped - (time.perf_counter() - t0)) / n * 1e6
print("RESULT %.3f %.3f %.3f %d %.3f %.3f %.3f %.3f %.3f" % (
    step_us, coll_us, loop_us, counted.steps if counted else -1, count_us, wrap_us, ddp_us, ab_on_us, ab_off_us))
"""


def run(cmd, env):
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if "RESULT" in line:
            parts = line.split("RESULT", 1)[1].split()
            return [float(p) for p in parts[:3]] + [int(parts[3])] + [float(p) for p in parts[4:9]]
    raise SystemExit("no result from %s:\n%s" % (" ".join(cmd), out.stdout[-2000:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default="build/cli/air-run")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "steps.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        plain, counted = [], []
        for _ in range(args.rounds):
            counted.append(run([args.air_run, "--cpu-ranks", "1", "--python", args.python, "-q", "--timeout", "10m",
                                script, str(args.steps), args.device], env))
            plain.append(run([args.python, script, str(args.steps), args.device], env))
    med = lambda rows, i: statistics.median(r[i] for r in rows)
    names = ["optimizer.step()", "dist.all_reduce (1 rank, gloo)", "training step (fwd, bwd, all_reduce, step)",
             None, None, None, "DDP training step (%s)" % ("NCCL" if args.device == "cuda" else "gloo")]
    result = {"steps": args.steps, "rounds": args.rounds, "device": args.device,
              "counted_steps_seen": counted[-1][3], "rows": []}
    print("%-44s %10s %10s %10s %7s" % ("per call", "plain us", "counted us", "cost us", "ratio"))
    for i, name in enumerate(names):
        if name is None:
            continue
        p, c = med(plain, i), med(counted, i)
        result["rows"].append({"what": name, "plain_us": p, "counted_us": c, "cost_us": c - p, "ratio": c / p})
        print("%-44s %10.2f %10.2f %10.2f %7.3f" % (name, p, c, c - p, c / p))
    result["count_step_us"] = med(counted, 4)
    result["time_collective_us"] = med(counted, 5)
    print("counting one step: %.3f us; timing one collective call: %.3f us (in-process, median of rounds)"
          % (result["count_step_us"], result["time_collective_us"]))
    on, off = med(counted, 7), med(counted, 8)
    result["ddp_same_process"] = {"with_wrappers_us": on, "without_us": off, "ratio": on / off}
    print("DDP training step in one process, wrappers in / out (10 alternating blocks each, median): "
          "%.2f / %.2f us, ratio %.4f" % (on, off, on / off))
    print("steps counted in the last air-run round: %d" % counted[-1][3])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
