#!/usr/bin/env python3
"""What the rank shim's store wait saves: two gloo ranks, rank 0 reaching
init_process_group --late seconds after rank 1, timed with torch's own
connect retries ("plain") and with the shim's rendezvous patch ("wait"),
alternating, in one run.

  scripts/bench-store-wait.py [--python /usr/bin/python3] [--build build] [--late 0.3] [--rounds 5]

Both processes are started at once, meet at a common instant T0, then rank 1
calls init_process_group at once and rank 0 after --late seconds. Each prints
when its init_process_group returned, from T0. Without the wait, rank 1's
refused connection is retried after torch's back-off (torch 1.13: one second);
with it, rank 1 connects as soon as rank 0's store listens. Nothing asserts.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

RANK_SCRIPT = r"""
import os, sys, time
import torch, torch.distributed as dist
if sys.argv[2] == "wait":
    import air_run_patches
    # the module itself: `import torch.distributed.rendezvous as m` gives the function of that name
    air_run_patches._air_run_patch_rendezvous(sys.modules["torch.distributed.rendezvous"], None)
t0 = float(os.environ["BENCH_T0"])
while time.time() < t0:
    time.sleep(0.001)
time.sleep(float(sys.argv[1]))
dist.init_process_group("gloo")
print("%.4f" % (time.time() - t0), flush=True)
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_round(python, script, mode, late, pythonpath):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2",
               BENCH_T0=str(time.time() + 3.0), PYTHONPATH=pythonpath)
    env.setdefault("USE_LIBUV", "0")  # torch 2.4+ built without libuv (Debian 13's) needs the classic store
    procs = [subprocess.Popen([python, script, str(late if rank == 0 else 0.0), mode],
                              env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for rank in (0, 1)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    return max(float(o) for o in outs)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3", help="an interpreter that has torch")
    ap.add_argument("--build", default=os.path.join(root, "build"), help="a configured build (its generated/)")
    ap.add_argument("--late", type=float, default=0.3, help="seconds rank 0 arrives after rank 1")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    generated = os.path.join(args.build, "generated", "core", "run", "python")
    if not os.path.isfile(os.path.join(generated, "air_run_slots.py")):
        sys.exit(f"bench-store-wait: {generated}/air_run_slots.py not found: configure the build first")
    pythonpath = os.pathsep.join([os.path.join(root, "core", "run", "python"), generated])
    with tempfile.TemporaryDirectory(prefix="air-bench-store-wait-") as tmp:
        script = os.path.join(tmp, "rank.py")
        with open(script, "w") as f:
            f.write(RANK_SCRIPT)
        got = {"plain": [], "wait": []}
        for _ in range(args.rounds):
            for mode in got:
                got[mode].append(one_round(args.python, script, mode, args.late, pythonpath))
    version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    print(f"torch {version}: rank 0 {args.late:.2f} s late; both ranks through init_process_group after (s):")
    for mode, values in got.items():
        print(f"  {mode:5} median {statistics.median(values):.3f}   " + ", ".join(f"{v:.3f}" for v in values))


if __name__ == "__main__":
    main()
