#!/usr/bin/env python3
"""Soak test for air-run: many launches in a row, counting what goes wrong.

  scripts/soak.py [--air-run build/cli/air-run] [--fixtures build/fixtures] [--sequential 10000]
                  [--ranks 4] [--wide 1000] [--wide-ranks 64] [--json out.json]

Runs `--sequential` launches of `--ranks` CPU ranks, then `--wide` launches of
`--wide-ranks` ranks, cycling through four kinds of run:

  ok         every rank exits 0                                  -> exit 0
  fail       rank 1 exits with code c, the others sleep          -> exit c (teardown)
  background every rank leaves a sleeper in the background      -> exit 0, ended by air-run
  setsid     every rank leaves a setsid'd sleeper behind         -> exit 0, ended by air-run

(the sleeper is the sleep_forever fixture with the marker in its argv, its
output on /dev/null so that the sweep, not the pipe drain, has to find it)

and after each launch counts: a wrong exit code; leftovers (live processes
with the soak's marker in their argv); zombies among the soak's own children
and anywhere on the host (the growth from start to end); air-run's open fds
(sampled while the ranks run, on the wide launches) and its peak RSS (from
wait4). Nothing asserts; it prints a table and exits 1 if a wrong exit code,
a leftover or a zombie of its own was seen (the host's zombie count is shown
only: other users' processes move it).
Not part of CI: the full size takes a long time on a small machine.
"""

import argparse
import json
import os
import subprocess
import sys
import time


def marked_processes(marker):
    """Live pids whose argv holds marker."""
    found = []
    needle = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if needle in f.read():
                    found.append(int(name))
        except OSError:
            pass
    return found


def zombies(parent=None):
    """Zombie pids on the host, or only the children of `parent`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and (parent is None or int(fields[1]) == parent):
            found.append(int(name))
    return found


def open_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def rank_command(kind, i, marker, sleeper):
    """The rank's shell command and the exit code air-run must give."""
    if kind == "ok":
        return "exit 0", 0
    if kind == "fail":
        code = 1 + i % 200
        return f'if [ "$RANK" = 1 ]; then exit {code}; fi; exec sleep 30', code
    if kind == "background":
        return f"'{sleeper}' {marker} >/dev/null 2>&1 & exit 0", 0
    return f"setsid '{sleeper}' {marker} >/dev/null 2>&1 & sleep 0.05; exit 0", 0


def launch(air_run, ranks, kind, i, marker, sleeper, sample_fds):
    script, want = rank_command(kind, i, marker, sleeper)
    cmd = [air_run, "--accelerator-type", "CPU", "-n", str(ranks), "--grace-period", "2s", "--no-python",
           "sh", "-c", script, marker]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fds = -1
    if sample_fds:
        time.sleep(0.02)
        fds = open_fds(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, want, usage.ru_maxrss, fds


def soak(air_run, count, ranks, marker, sleeper, sample_fds, label):
    kinds = ["ok", "fail", "background", "setsid"]
    stats = {"launches": 0, "wrong_exit_codes": 0, "leftovers": 0, "own_zombies": 0,
             "rss_kb_first": 0, "rss_kb_max": 0, "rss_kb_last": 0, "fds_min": None, "fds_max": None}
    start = time.monotonic()
    for i in range(count):
        kind = kinds[i % len(kinds)]
        code, want, rss, fds = launch(air_run, ranks, kind, i, marker, sleeper, sample_fds and kind == "fail")
        stats["launches"] += 1
        if code != want:
            stats["wrong_exit_codes"] += 1
            print(f"  launch {i} ({kind}): exit code {code}, wanted {want}", file=sys.stderr)
        left = marked_processes(marker)
        if left:
            stats["leftovers"] += len(left)
            print(f"  launch {i} ({kind}): {len(left)} process(es) left: {left}", file=sys.stderr)
            for pid in left:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
        stats["own_zombies"] = max(stats["own_zombies"], len(zombies(os.getpid())))
        if i == 0:
            stats["rss_kb_first"] = rss
        stats["rss_kb_last"] = rss
        stats["rss_kb_max"] = max(stats["rss_kb_max"], rss)
        if fds >= 0:
            stats["fds_min"] = fds if stats["fds_min"] is None else min(stats["fds_min"], fds)
            stats["fds_max"] = fds if stats["fds_max"] is None else max(stats["fds_max"], fds)
        if (i + 1) % max(1, count // 10) == 0:
            print(f"  {label}: {i + 1}/{count} launches, {time.monotonic() - start:.0f} s", file=sys.stderr)
    stats["seconds"] = round(time.monotonic() - start, 1)
    return stats


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default=os.path.join(root, "build/cli/air-run"))
    ap.add_argument("--fixtures", default=os.path.join(root, "build/fixtures"))
    ap.add_argument("--sequential", type=int, default=10000)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--wide", type=int, default=1000)
    ap.add_argument("--wide-ranks", type=int, default=64)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    marker = f"air-soak-{os.getpid()}"
    sleeper = os.path.join(args.fixtures, "sleep_forever")
    host_zombies_before = len(zombies())
    result = {
        "sequential": soak(args.air_run, args.sequential, args.ranks, marker, sleeper, False,
                           f"{args.ranks} ranks"),
        "wide": soak(args.air_run, args.wide, args.wide_ranks, marker, sleeper, True,
                     f"{args.wide_ranks} ranks"),
    }
    result["host_zombie_growth"] = len(zombies()) - host_zombies_before
    print(f"{'':>12} {'launches':>9} {'wrong code':>10} {'leftovers':>9} {'zombies':>7} "
          f"{'RSS first/max/last MiB':>24} {'fds min/max':>11} {'seconds':>8}")
    for name, s in (("sequential", result["sequential"]), ("wide", result["wide"])):
        rss = f"{s['rss_kb_first'] / 1024:.1f}/{s['rss_kb_max'] / 1024:.1f}/{s['rss_kb_last'] / 1024:.1f}"
        fds = f"{s['fds_min']}/{s['fds_max']}" if s["fds_min"] is not None else "-"
        print(f"{name:>12} {s['launches']:>9} {s['wrong_exit_codes']:>10} {s['leftovers']:>9} "
              f"{s['own_zombies']:>7} {rss:>24} {fds:>11} {s['seconds']:>8}")
    print(f"zombies on the host: {result['host_zombie_growth']:+d} from start to end (other users' too)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    bad = any(result[k]["wrong_exit_codes"] or result[k]["leftovers"] or result[k]["own_zombies"]
              for k in ("sequential", "wide"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
