#!/usr/bin/env python3
"""Restart latency: from a rank's failure to the restarted worker group running.

  scripts/bench-restart.py [--air-run build/cli/air-run] [--torchrun torchrun]
                           [--python python3] [--ranks 2,8] [--repeat 5] [--json out.json]

Each run starts N ranks with --max-restarts 1. On the first attempt rank 0
stamps the time (time.time_ns) and exits 1; the others sleep. On the second
attempt every rank stamps its start and exits 0. The latency is the last
second-attempt stamp minus the failure stamp: the launcher's teardown of the
first group, its restart decision and the start of every new rank, Python
interpreter start included (the same script under both launchers).

Both launchers are measured in the same call when torchrun is found (the GPU
machine has torchrun 2.x; the build machine may not); then the table has the
ratio torchrun/air-run (above 1: air-run restarts faster). torchrun runs with
its defaults (--monitor-interval included), as users run it; air-run with its
own. Nothing asserts: it is a benchmark, not a test.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

RANK_SCRIPT = r"""
import os, sys, time
d = sys.argv[1]
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
rank = os.environ["RANK"]
if attempt == "0":
    if rank == "0":
        with open(os.path.join(d, "fail"), "w") as f:
            f.write(str(time.time_ns()))
        sys.exit(1)
    time.sleep(60)
    sys.exit(0)
with open(os.path.join(d, "start." + rank), "w") as f:
    f.write(str(time.time_ns()))
"""


def one_run(cmd, workdir, ranks):
    for name in os.listdir(workdir):
        if name == "fail" or name.startswith("start."):
            os.remove(os.path.join(workdir, name))
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    try:
        with open(os.path.join(workdir, "fail")) as f:
            failed = int(f.read())
        starts = []
        for r in range(ranks):
            with open(os.path.join(workdir, f"start.{r}")) as f:
                starts.append(int(f.read()))
    except (OSError, ValueError):
        return None, proc.returncode
    return (max(starts) - failed) / 1e9, proc.returncode


def measure(name, cmd, workdir, ranks, repeat):
    samples, codes = [], set()
    for _ in range(repeat):
        latency, code = one_run(cmd, workdir, ranks)
        codes.add(code)
        if latency is not None:
            samples.append(latency)
    if not samples:
        print(f"  {name}: no restart observed (exit codes {sorted(codes)})", file=sys.stderr)
        return None
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples),
            "runs": len(samples), "exit_codes": sorted(codes)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default="build/cli/air-run")
    ap.add_argument("--torchrun", default="torchrun", help="torchrun executable; skipped when not found")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--ranks", default="2,8")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the figures as JSON here")
    args = ap.parse_args()

    torchrun = shutil.which(args.torchrun)
    results = []
    with tempfile.TemporaryDirectory(prefix="air-bench-restart-") as workdir:
        script = os.path.join(workdir, "rank.py")
        with open(script, "w") as f:
            f.write(RANK_SCRIPT)
        for ranks in [int(r) for r in args.ranks.split(",")]:
            row = {"ranks": ranks}
            air = [args.air_run, "--accelerator-type", "CPU", "--cpu-ranks", str(ranks), "--max-restarts", "1",
                   "--grace-period", "5s", "--python", args.python, script, workdir]
            row["air-run"] = measure("air-run", air, workdir, ranks, args.repeat)
            if torchrun:
                tr = [torchrun, "--standalone", "--nproc_per_node", str(ranks), "--max_restarts", "1", script,
                      workdir]
                row["torchrun"] = measure("torchrun", tr, workdir, ranks, args.repeat)
            results.append(row)

    print()
    print("| ranks | air-run restart (median s) | torchrun restart (median s) | torchrun / air-run |")
    print("|---|---|---|---|")
    for row in results:
        a = row.get("air-run")
        t = row.get("torchrun")
        ratio = f"{t['median_s'] / a['median_s']:.1f}x" if a and t else "n/a"
        print(f"| {row['ranks']} | {a['median_s']:.3f}" if a else f"| {row['ranks']} | n/a", end="")
        print(f" | {t['median_s']:.3f} | {ratio} |" if t else f" | {'not run' if not torchrun else 'n/a'} | {ratio} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torchrun": torchrun, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
