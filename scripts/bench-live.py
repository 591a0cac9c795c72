#!/usr/bin/env python3
"""Log throughput with the live status area on vs off (issue 17):

  python3 scripts/bench-live.py [--ranks 64] [--lines 4000] [--runs 5] [--air-run build/cli/air-run]

Runs air-run in a pseudo-terminal (stdout and stderr on it, CI unset), its
--ranks ranks each printing --lines lines of 80 bytes as fast as `yes | head`
can, and reads the terminal as fast as it can. The same run goes with the
live area on (the default on a terminal) and off (--no-live), interleaved,
--runs times each. It prints the median lines per second of each and their
ratio (target: on >= 0.95 of off), with the best run of each (the least
disturbed by other load on the machine).
"""
import argparse
import os
import pty
import select
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one_run(air_run, ranks, lines, live):
    """Seconds for the whole run, and the bytes that reached the terminal."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("AIR_RUN_")}
    env = {k: v for k, v in env.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["TERM"] = "xterm-256color"
    cmd = [air_run, "--cpu-ranks", str(ranks), "--no-python"]
    if not live:
        cmd.append("--no-live")
    cmd += ["sh", "-c", f'yes "$(printf "%072d" "$RANK")" | head -n {lines}']
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    total = 0
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 1 << 20)
        except OSError:  # EIO: every holder of the terminal closed it
            break
        if not chunk:
            break
        total += len(chunk)
    code = proc.wait()
    elapsed = time.perf_counter() - start
    os.close(master)
    if code != 0:
        sys.exit(f"air-run exited with {code}")
    return elapsed, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--lines", type=int, default=4000, help="lines per rank")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--air-run", default=os.path.join(HERE, "..", "build", "cli", "air-run"))
    args = ap.parse_args()
    total_lines = args.ranks * args.lines
    rates = {True: [], False: []}
    bytes_seen = {True: 0, False: 0}
    one_run(args.air_run, args.ranks, 10, True)  # warm the page cache
    for _ in range(args.runs):
        for live in (False, True):
            seconds, seen = one_run(args.air_run, args.ranks, args.lines, live)
            rates[live].append(total_lines / seconds)
            bytes_seen[live] = seen
    med = {k: statistics.median(v) for k, v in rates.items()}
    best = {k: max(v) for k, v in rates.items()}
    print(f"{args.ranks} ranks x {args.lines} lines of 80 bytes through a pseudo-terminal, {args.runs} runs each")
    print(f"  live off: median {med[False]:,.0f} lines/s (best {best[False]:,.0f}), {bytes_seen[False]:,} bytes")
    print(f"  live on:  median {med[True]:,.0f} lines/s (best {best[True]:,.0f}), {bytes_seen[True]:,} bytes")
    print(f"  ratio on/off: median {med[True] / med[False]:.3f}, best {best[True] / best[False]:.3f} (target >= 0.95)")


if __name__ == "__main__":
    main()
