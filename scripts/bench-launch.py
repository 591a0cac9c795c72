#!/usr/bin/env python3
"""Launch benchmark for air-run, as ratios against baselines measured in the same run.

  scripts/bench-launch.py [--air-run build/cli/air-run] [--baseline build/fixtures/baseline_launcher]
                          [--ranks 8,128,1024] [--repeat 5] [--json out.json]

Measures, for each rank count, the wall time of `air-run --no-python /bin/true`
against a plain fork/exec-and-wait of the same ranks; the time from one rank's
failure to the launcher's exit while the others sleep; and the launcher's own
peak RSS. Nothing here asserts: it prints a table. The comparison with torchrun
is scripts/bench-vs-torchrun.py.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

from benchlib import median_of, own_peak_rss_kb, teardown_time


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default=os.path.join(root, "build/cli/air-run"))
    ap.add_argument("--baseline", default=os.path.join(root, "build/fixtures/baseline_launcher"))
    ap.add_argument("--ranks", default="8,128,1024")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    counts = [int(x) for x in args.ranks.split(",")]
    true = shutil.which("true") or "/bin/true"
    cpu = ["--accelerator-type", "CPU", "-n"]  # N CPU ranks even on a GPU machine, no GPU probe
    rows = []

    print(f"{'ranks':>6} {'baseline s':>11} {'air-run s':>10} {'ratio':>6}")
    for n in counts:
        base, _ = median_of([args.baseline, str(n), true], args.repeat)
        air, codes = median_of(
            [args.air_run, *cpu, str(n), "--grace-period", "5s", "--no-python", true], args.repeat)
        rows.append({"ranks": n, "baseline_s": base, "air_run_s": air, "ratio": air / base,
                     "air_run_exit_codes": sorted(codes)})
        print(f"{n:>6} {base:>11.4f} {air:>10.4f} {air / base:>6.2f}")

    with tempfile.TemporaryDirectory() as tmp:
        air_td = statistics.median(
            teardown_time(lambda n, s: [args.air_run, *cpu, str(n), "--no-python", s], 4, tmp)
            for _ in range(3))
    print(f"teardown (1 of 4 ranks fails, others honour SIGTERM): air-run {air_td * 1000:.1f} ms")
    result = {"launch": rows, "teardown_air_run_s": air_td, "air_run_own_peak_rss_kb": {}}
    for n in counts:
        own = own_peak_rss_kb([args.air_run, *cpu, str(n), "--no-python", "sleep", "1"])
        result["air_run_own_peak_rss_kb"][n] = own
        print(f"air-run own peak RSS with {n} ranks: {own / 1024:.1f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
