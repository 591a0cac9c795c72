#!/usr/bin/env python3
"""Launch benchmark for air-run, as ratios against baselines measured in the same run.

  scripts/bench-launch.py [--air-run build/cli/air-run] [--baseline build/fixtures/baseline_launcher]
                          [--floor build/fixtures/floor_launcher]
                          [--ranks 8,128,1024] [--repeat 5] [--json out.json]
                          [--fork] [--other OTHER_AIR_RUN ...] [--launch-only] [--breakdown]

Measures, for each rank count, the wall time of `air-run --no-python /bin/true`
against a plain fork/exec-and-wait of the same ranks; the time from one rank's
failure to the launcher's exit while the others sleep; and the launcher's own
peak RSS. Nothing here asserts: it prints a table. The comparison with torchrun
is scripts/bench-vs-torchrun.py.

The floor (tests/fixtures/floor_launcher.cpp) is timed beside them: the
bare loop plus only the steps air-run's containment needs (a subreaper, a
watchdog process, a cgroup the ranks are born in, a process group, a
parent-death signal and two drained pipes per rank), written as tightly as
they can be. floor/bare is what those guarantees cost at the least;
air-run/floor is what air-run's own work (spec, plan, supervision, report)
adds on top. Each ratio's two sides come from the same rounds.

--breakdown also times, beside each launch, what the fixed part of it is
made of: `air-run --version` (the process's own start: loading, options),
`--dry-run` of the same line (the spec, the plan and the checks, nothing
started), and the launch with AIR_RUN_CGROUP=off (the run's cgroup left out:
its creation and removal); what the full launch adds to the dry run is the
ranks' spawn, supervision and the end of the run.

--breakdown also runs the launch once more per round with AIR_RUN_PHASES=1,
which makes air-run print how long each of its phases took (options, spec,
plan, containment, spawn, the ranks' run, the report, the cleanup), and
prints each phase's median per rank count: where the launch's own
milliseconds go on a machine with no tracer.

--fork also times the same binary with AIR_RUN_SPAWN=fork (the fork spawn,
core/os/shared_spawn.hpp), --other another air-run binary (a build of an
earlier commit). The runs are interleaved, one of each in turn, so that load
which comes and goes on a shared machine falls on every variant alike; each
figure is the median of --repeat runs.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import own_peak_rss_kb, run_timed, teardown_time


def phase_times(line):
    """One launch with AIR_RUN_PHASES=1: {phase: ms} from air-run's phases line."""
    proc = subprocess.run(line, env={**os.environ, "AIR_RUN_PHASES": "1"}, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    for text in proc.stderr.splitlines():
        if text.startswith("air-run: phases (ms): "):
            pairs = (item.strip().rsplit(" ", 1) for item in text.split(": ", 2)[2].split(","))
            return {name: float(ms) for name, ms in pairs}
    return {}


def print_phases(n, runs):
    """The median of each phase over `runs` (dicts of phase_times), in air-run's order."""
    names = list(runs[0]) if runs else []
    med = {name: statistics.median(r.get(name, 0.0) for r in runs) for name in names}
    shown = ", ".join(f"{name} {ms:.2f}" for name, ms in med.items() if ms >= 0.05)
    print(f"{n:>6} ranks, phases (median ms, those of 0.05 ms or more; total {sum(med.values()):.2f}): {shown}")
    return med


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default=os.path.join(root, "build/cli/air-run"))
    ap.add_argument("--baseline", default=os.path.join(root, "build/fixtures/baseline_launcher"))
    ap.add_argument("--floor", default=os.path.join(root, "build/fixtures/floor_launcher"),
                    help="the containment floor (tests/fixtures/floor_launcher.cpp); '' to leave it out")
    ap.add_argument("--ranks", default="8,128,1024")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--fork", action="store_true", help="also time AIR_RUN_SPAWN=fork")
    ap.add_argument("--other", action="append", default=[], help="another air-run binary to time alongside")
    ap.add_argument("--launch-only", action="store_true", help="skip the teardown and memory figures")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time --version, --dry-run and AIR_RUN_CGROUP=off of the same line")
    args = ap.parse_args()
    counts = [int(x) for x in args.ranks.split(",")]
    true = shutil.which("true") or "/bin/true"
    cpu = ["--accelerator-type", "CPU", "-n"]  # N CPU ranks even on a GPU machine, no GPU probe
    rows = []
    variants = [("air-run", args.air_run, None)]
    if args.floor:
        variants.append(("floor", args.floor, None))
    if args.fork:
        variants.append(("air-run fork", args.air_run, {**os.environ, "AIR_RUN_SPAWN": "fork"}))
    for other in args.other:
        variants.append((other, other, None))
    if args.breakdown:
        variants.append(("no cgroup", args.air_run, {**os.environ, "AIR_RUN_CGROUP": "off"}))
        variants.append(("--dry-run", args.air_run, None))
        variants.append(("--version", args.air_run, None))

    print(f"{'ranks':>6} {'baseline ms':>12}" + "".join(f"  {name[-24:]:>24} ms  ratio" for name, _, _ in variants) +
          (f"  {'air-run/floor':>14}" if args.floor else ""))
    phases = {}
    for n in counts:
        base_times, times, codes = [], {name: [] for name, _, _ in variants}, set()
        phase_runs = []
        for _ in range(args.repeat):
            if args.breakdown:
                phase_runs.append(phase_times([args.air_run, *cpu, str(n), "--grace-period", "5s",
                                               "--no-python", true]))
            base_times.append(run_timed([args.baseline, str(n), true])[0])
            for name, exe, env in variants:
                line = [exe, *cpu, str(n), "--grace-period", "5s", "--no-python", true]
                if name == "--dry-run":
                    line.insert(1, "--dry-run")
                elif name == "--version":
                    line = [exe, "--version"]
                elif name == "floor":
                    line = [exe, str(n), true]
                t, code = run_timed(line, env)
                times[name].append(t)
                if name not in ("--dry-run", "--version", "floor"):
                    codes.add(code)
        base = statistics.median(base_times)
        med = {name: statistics.median(ts) for name, ts in times.items()}
        air = med["air-run"]
        rows.append({"ranks": n, "baseline_s": base, "air_run_s": air, "ratio": air / base,
                     "variants": {name: {"s": t, "ratio": t / base} for name, t in med.items()},
                     "air_run_exit_codes": sorted(codes)})
        if "floor" in med:
            rows[-1]["air_run_over_floor"] = air / med["floor"]
        print(f"{n:>6} {base * 1000:>12.1f}" + "".join(
            f"  {med[name] * 1000:>27.1f}  {med[name] / base:>5.2f}" for name, _, _ in variants) +
            (f"  {air / med['floor']:>14.2f}" if "floor" in med else ""))
        if args.breakdown:
            phases[n] = phase_runs
    for n, runs in phases.items():
        rows[counts.index(n)]["phases_ms"] = print_phases(n, runs)

    if args.launch_only:
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"launch": rows}, f, indent=2)
        return 0
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
