#!/usr/bin/env python3
"""A restart's cost against the size of the environment, fresh and warm.

  scripts/bench-warm-env.py [--air-run [LABEL=]PATH]... [--python /usr/bin/python3]
                            [--sizes 100,20000,100000] [--repeat 5] [--ranks 2] [--json out.json]

Each run starts --ranks ranks with --max-restarts 1 and N extra variables in
air-run's environment (V1=1 ... VN=1: short, so that 100,000 fit in what
execve takes). On the first attempt rank 0 stamps the time and exits 1; the
others sleep. On the second every rank stamps its first line and exits 0.
The figure is the last second-attempt stamp minus the failure stamp: the
teardown, the restart and every new rank's start up to its first line,
fresh (--no-preload: the interpreter starts, torch not yet imported) or
warm (--preload torch: forked from the interpreter that imported it).

Give --air-run several times (a LABEL=PATH each, such as before=/tmp/air-run)
to compare builds in one call: the runs alternate between every build and
mode, so load that comes and goes on a busy machine falls on all alike, and
the table gives each cell's median (min-max) of --repeat runs. Nothing
asserts: it is a benchmark, not a test.
"""

import argparse
import json
import os
import resource
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


def bigger_stack():
    # execve takes up to a quarter of the stack limit in arguments and
    # environment: room for 100,000 variables whatever the shell's limit.
    _, hard = resource.getrlimit(resource.RLIMIT_STACK)
    want = 256 << 20
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
    except (ValueError, OSError):
        pass


def one_run(cmd, env, workdir, ranks):
    for name in os.listdir(workdir):
        if name == "fail" or name.startswith("start."):
            os.remove(os.path.join(workdir, name))
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600,
                          preexec_fn=bigger_stack)
    try:
        with open(os.path.join(workdir, "fail")) as f:
            failed = int(f.read())
        starts = []
        for r in range(ranks):
            with open(os.path.join(workdir, "start.%d" % r)) as f:
                starts.append(int(f.read()))
    except (OSError, ValueError):
        sys.stderr.write("no restart observed (exit %d): %s\n%s\n" % (proc.returncode, " ".join(cmd[:8]),
                                                                      proc.stderr.decode()[-2000:]))
        return None
    return (max(starts) - failed) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", action="append", help="[LABEL=]PATH; repeatable (default build/cli/air-run)")
    ap.add_argument("--python", default="/usr/bin/python3", help="an interpreter with torch")
    ap.add_argument("--sizes", default="100,20000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--json", help="write every sample as JSON here")
    args = ap.parse_args()

    builds = []
    for item in args.air_run or ["build/cli/air-run"]:
        label, _, path = item.rpartition("=")
        builds.append((label or path, os.path.abspath(path)))
    modes = [("fresh", ["--no-preload"]), ("warm", ["--preload", "torch"])]
    sizes = [int(s) for s in args.sizes.split(",")]
    samples = {}
    base_env = {k: v for k, v in os.environ.items() if not (k.startswith("V") and k[1:].isdigit())}
    with tempfile.TemporaryDirectory(prefix="air-bench-warm-env-") as workdir:
        script = os.path.join(workdir, "rank.py")
        with open(script, "w") as f:
            f.write(RANK_SCRIPT)
        for size in sizes:
            env = dict(base_env)
            env.update(("V%d" % i, "1") for i in range(1, size + 1))
            for _ in range(args.repeat):
                for label, path in builds:
                    for mode, flags in modes:
                        cmd = [path, "--cpu-ranks", str(args.ranks), "--max-restarts", "1", "--grace-period", "5s",
                               "--python", args.python] + flags + [script, workdir]
                        t = one_run(cmd, env, workdir, args.ranks)
                        if t is not None:
                            samples.setdefault("%s|%s|%d" % (label, mode, size), []).append(t)
                        print("%-8s %-5s %7d: %s" % (label, mode, size, "%.3f s" % t if t is not None else "-"),
                              file=sys.stderr, flush=True)

    def cell(label, mode, size):
        got = samples.get("%s|%s|%d" % (label, mode, size))
        if not got:
            return "n/a"
        return "%.2f s (%.2f-%.2f)" % (statistics.median(got), min(got), max(got))

    columns = [(label, mode) for label, _ in builds for mode, _ in modes]
    print("| Variables | " + " | ".join("%s, %s" % c for c in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for size in sizes:
        print("| {:,} | ".format(size) + " | ".join(cell(l, m, size) for l, m in columns) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"builds": builds, "repeat": args.repeat, "ranks": args.ranks, "samples": samples}, f,
                      indent=2)


if __name__ == "__main__":
    main()
