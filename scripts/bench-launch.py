#!/usr/bin/env python3
"""Launch benchmark for air-run, as ratios against baselines measured in the same run.

  scripts/bench-launch.py [--air-run build/cli/air-run] [--baseline build/fixtures/baseline_launcher]
                          [--torchrun torchrun] [--ranks 8,128,1024] [--repeat 5] [--json out.json]

Measures, for each rank count, the wall time of `air-run --no-python /bin/true`
against a plain fork/exec-and-wait of the same ranks (and torchrun when given);
the time from one rank's failure to the launcher's exit while the others sleep;
and the launcher's peak RSS. Nothing here asserts: it prints a table.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_timed(cmd, env=None):
    """Runs cmd, returns (seconds, exit code, peak RSS in KiB of the launcher process)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, proc.returncode, usage.ru_maxrss


def median_of(cmd, repeat, env=None):
    times, rss, codes = [], [], set()
    for _ in range(repeat):
        t, code, maxrss = run_timed(cmd, env)
        times.append(t)
        rss.append(maxrss)
        codes.add(code)
    return statistics.median(times), max(rss), codes


def own_peak_rss_kb(cmd, env=None):
    """The launcher's own high-water mark (VmHWM), children excluded, read while its
    ranks sleep. wait4's ru_maxrss would also count forked children before exec."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    peak = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            break
        time.sleep(0.02)
    return peak


def teardown_time(launcher_cmd, ranks, workdir):
    """Seconds from the failing rank's last instant to the launcher's exit."""
    stamp = os.path.join(workdir, "failed_at")
    script = os.path.join(workdir, "rank.sh")
    with open(script, "w") as f:
        f.write(
            "#!/bin/sh\n"
            'R=${RANK:-0}\n'
            'if [ "$R" = 1 ]; then sleep 0.5; python3 -c "import time; print(time.time())" > %s; exit 3; fi\n'
            "exec sleep 60\n" % stamp
        )
    os.chmod(script, 0o755)
    if os.path.exists(stamp):
        os.unlink(stamp)
    subprocess.run(launcher_cmd(ranks, script), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ended = time.time()
    with open(stamp) as f:
        return ended - float(f.read())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default=os.path.join(root, "build/cli/air-run"))
    ap.add_argument("--baseline", default=os.path.join(root, "build/fixtures/baseline_launcher"))
    ap.add_argument("--torchrun", default=None, help="torchrun to compare against (GPU machine)")
    ap.add_argument("--ranks", default="8,128,1024")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    counts = [int(x) for x in args.ranks.split(",")]
    true = shutil.which("true") or "/bin/true"
    env = dict(os.environ, AIR_RUN_FAKE_GPUS="")  # CPU ranks, no NVML probe cost difference
    rows = []

    print(f"{'ranks':>6} {'baseline s':>11} {'air-run s':>10} {'ratio':>6}"
          + (f" {'torchrun s':>11} {'torchrun/air':>12}" if args.torchrun else ""))
    for n in counts:
        base, _, _ = median_of([args.baseline, str(n), true], args.repeat)
        air, air_rss, codes = median_of(
            [args.air_run, "--cpu-ranks", str(n), "--grace-period", "5s", "--no-python", true], args.repeat, env)
        row = {"ranks": n, "baseline_s": base, "air_run_s": air, "ratio": air / base, "air_run_max_rss_kb": air_rss,
               "air_run_exit_codes": sorted(codes)}
        line = f"{n:>6} {base:>11.4f} {air:>10.4f} {air / base:>6.2f}"
        if args.torchrun and n <= 64:
            tr, tr_rss, _ = median_of([args.torchrun, "--standalone", f"--nproc-per-node={n}", "--no-python", true],
                                      max(1, args.repeat // 2))
            row.update(torchrun_s=tr, torchrun_max_rss_kb=tr_rss, torchrun_over_air=tr / air)
            line += f" {tr:>11.3f} {tr / air:>12.1f}"
        print(line)
        rows.append(row)

    with tempfile.TemporaryDirectory() as tmp:
        air_td = statistics.median(
            teardown_time(lambda n, s: [args.air_run, "--cpu-ranks", str(n), "--no-python", s], 4, tmp)
            for _ in range(3))
        print(f"teardown (1 of 4 ranks fails, others honour SIGTERM): air-run {air_td * 1000:.1f} ms")
        result = {"launch": rows, "teardown_air_run_s": air_td}
        if args.torchrun:
            tr_td = teardown_time(
                lambda n, s: [args.torchrun, "--standalone", f"--nproc-per-node={n}", "--no-python", s], 4, tmp)
            print(f"teardown torchrun: {tr_td * 1000:.1f} ms (ratio torchrun/air-run {tr_td / air_td:.1f})")
            result["teardown_torchrun_s"] = tr_td
    for n in counts:
        own = own_peak_rss_kb([args.air_run, "--cpu-ranks", str(n), "--no-python", "sleep", "1"], env)
        result.setdefault("air_run_own_peak_rss_kb", {})[n] = own
        line = f"air-run own peak RSS with {n} ranks: {own / 1024:.1f} MiB"
        if args.torchrun and n <= 64:
            tr = own_peak_rss_kb([args.torchrun, "--standalone", f"--nproc-per-node={n}", "--no-python", "sleep", "1"])
            result.setdefault("torchrun_own_peak_rss_kb", {})[n] = tr
            line += f", torchrun {tr / 1024:.1f} MiB (ratio {tr / max(own, 1):.0f})"
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
