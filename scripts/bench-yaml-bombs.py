#!/usr/bin/env python3
"""How long air-run takes to refuse deeply nested spec files, as ratios against a normal spec.

  scripts/bench-yaml-bombs.py [--air-run build/cli/air-run] [--repeat 5] [--timeout 120]
                              [--other OTHER_AIR_RUN ...] [--json out.json]

Times `air-run --dry-run -f SPEC` for three spec files written here: a normal
spec (a command, limits, variables, a Python environment, MLflow tags), and two
YAML bombs: `command: ` followed by 100,000 `[` (never closed), and a flow
mapping nested 20,000 deep (`{a: {a: ... 1}}`). The normal spec is measured in
the same run, one of each in turn, so that load on a shared machine falls on
all three alike; each figure is the median of --repeat runs, with the exit
code seen (2 for a refused spec, 0 for the normal one). --other times another
air-run binary (a build of an earlier commit) the same way. Nothing here
asserts: it prints a table. A run past --timeout counts as the timeout.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

NORMAL_SPEC = """\
command: [true]
accelerator_type: CPU
cpu_ranks: 2
timeout: 90m
grace_period: 10s
env:
  OMP_NUM_THREADS: "1"
  NCCL_DEBUG: WARN
environment:
  python: python3
  system_site_packages: true
mlflow:
  tags: {team: research, stage: bench}
"""


def specs():
    """(name, text) of each spec file: the normal one first."""
    return [
        ("normal", NORMAL_SPEC),
        ("100,000 '['", "command: " + "[" * 100_000 + "\n"),
        ("map 20,000 deep", "command: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n"),
    ]


def time_once(exe, spec_path, timeout):
    """Wall seconds and exit code of one refusal (or run) of spec_path; None as the code on timeout."""
    cmd = [exe, "--dry-run", "--no-python", "-f", spec_path]
    start = time.perf_counter()
    try:
        code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        code = None
    return time.perf_counter() - start, code


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default=os.path.join(root, "build/cli/air-run"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=120, help="seconds one run may take")
    ap.add_argument("--other", action="append", default=[], help="another air-run binary to time alongside")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    binaries = [args.air_run, *args.other]

    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (name, text) in enumerate(specs()):
            path = os.path.join(tmp, f"spec{i}.yaml")
            with open(path, "w") as f:
                f.write(text)
            paths.append((name, path))
        for exe in binaries:
            times = {name: [] for name, _ in paths}
            codes = {name: set() for name, _ in paths}
            for _ in range(args.repeat):
                for name, path in paths:
                    t, code = time_once(exe, path, args.timeout)
                    times[name].append(t)
                    codes[name].add(code)
            med = {name: statistics.median(ts) for name, ts in times.items()}
            normal = med["normal"]
            print(f"{exe}")
            print(f"  {'spec':<18} {'median ms':>11} {'ratio to normal':>16}  exit codes")
            rows = {}
            for name, _ in paths:
                shown = sorted("timeout" if c is None else str(c) for c in codes[name])
                print(f"  {name:<18} {med[name] * 1000:>11.1f} {med[name] / normal:>16.1f}  {','.join(shown)}")
                rows[name] = {"s": med[name], "ratio": med[name] / normal, "exit_codes": shown}
            result[exe] = rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
