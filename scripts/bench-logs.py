#!/usr/bin/env python3
"""Log throughput: ranks' lines through air-run against plain pipes, in one run.

  python3 scripts/bench-logs.py [--air-run build/cli/air-run] [--ranks 1,4,16]
      [--consoles null,file,tty,log-dir,tee] [--megabytes 64] [--repeat 5]
      [--json results.json] [--other <an earlier air-run>]

Each rank runs `cat` of a file of 100-byte lines (--megabytes in all, shared
out among the ranks), started by `sh -c` that picks the rank's file by $RANK.
The baseline starts the same writers (the same `sh -c`, RANK set) and copies
their bytes through one plain pipe per rank into a `cat` of its own that
writes where air-run's console would: the same writers, the same
destination, no launcher. The two are
interleaved run by run.

Consoles: `null` (/dev/null), `file` (a regular file, appended to), `tty` (a
pseudo-terminal, read as fast as Python can), `log-dir` (console on
/dev/null, air-run also writes each rank's log under --log-dir) and `tee`
(console on /dev/null, `--log-dir` and `--tee 3`: torchrun's per-stream
files as well). The baseline is the same pipe-and-cat in every case: what air-run
writes beyond the console is its own cost.

For `log-dir` and `tee` a second baseline also writes the files: each pipe
goes through `tee` into as many files as air-run writes (the rank's log; with
--tee 3 torchrun's stdout.log too) before its `cat`. Its ratio ("files") says
what air-run costs beyond writing the same bytes to the same files.

It prints, per rank count and console, the median wall time of each, their
ratio (target: at most 1.1), and the median CPU time (user + system of the
whole process tree) of each: on a loaded machine the CPU figure is the steadier.
--json FILE writes the same figures (every run's times too) for a script.
--other AIR_RUN measures a second build beside the first, interleaved in the
same runs (its CPU ratio to the pipe in the last columns): before and after
under the same load.
It checks that every line arrived whole (the console file or terminal's bytes,
less air-run's prefixes, hold each rank's lines in order).
"""
import argparse
import json
import os
import pty
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

LINE = 100  # bytes per line, newline included


def make_input(folder, ranks, megabytes):
    """One file per rank of 100-byte lines: "r<rank> <line number> xxx...\\n"."""
    per_rank = megabytes * 1_000_000 // ranks // LINE
    paths = []
    for r in range(ranks):
        path = os.path.join(folder, f"in{r}.txt")
        with open(path, "w") as f:
            body = []
            for i in range(per_rank):
                head = f"r{r} {i} "
                body.append(head + "x" * (LINE - 1 - len(head)) + "\n")
            f.write("".join(body))
        paths.append(path)
    return paths, per_rank


class Sink:
    """Where the console goes: /dev/null, a file or a pseudo-terminal read by a thread."""

    def __init__(self, kind, folder):
        self.kind = kind
        self.folder = folder
        self.captured = bytearray()

    def __enter__(self):
        if self.kind == "tty":
            self.master, slave = pty.openpty()
            self.fd = slave
            self.reader = threading.Thread(target=self._read, daemon=True)
            self.reader.start()
        elif self.kind == "file":
            self.path = os.path.join(self.folder, "console.txt")
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        else:
            self.fd = os.open(os.devnull, os.O_WRONLY)
        return self

    def _read(self):
        while True:
            try:
                chunk = os.read(self.master, 1 << 20)
            except OSError:  # EIO: every holder of the terminal closed it
                return
            if not chunk:
                return
            if self.keep:
                self.captured += chunk

    keep = False

    def close_writer(self):
        """Called once the run ended: the terminal's reader gets what is left, then EIO."""
        os.close(self.fd)
        if self.kind == "tty":
            self.reader.join()
            os.close(self.master)

    def __exit__(self, *exc):
        return False

    def contents(self):
        if self.kind == "file":
            with open(self.path, "rb") as f:
                return f.read()
        return bytes(self.captured)


def cpu_of_children():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def rank_script(inputs):
    """What every rank runs, on both sides: `sh -c` picks the rank's file and execs `cat` of it."""
    return f'set -- {" ".join(inputs)}; shift "$RANK"; exec cat "$1"'


def run_baseline(inputs, sink, files=0, folder=None):
    """Every rank: <the rank's writer> | cat > console; with `files`, <writer> | tee <files> | cat > console.

    The writer is the one air-run starts (rank_script, with RANK set), so that
    the two sides differ by the launcher alone, not by a shell's start."""
    procs = []
    script = rank_script(inputs)
    start = time.perf_counter()
    for n in range(len(inputs)):
        r, w = os.pipe()
        procs.append(subprocess.Popen(["sh", "-c", script], stdout=w, stdin=subprocess.DEVNULL,
                                      env={**os.environ, "RANK": str(n)}))
        if files:
            r2, w2 = os.pipe()
            logs = [os.path.join(folder, f"tee{n}.{i}.log") for i in range(files)]
            procs.append(subprocess.Popen(["tee"] + logs, stdin=r, stdout=w2))
            os.close(r)
            os.close(w)
            r, w = r2, w2
        procs.append(subprocess.Popen(["cat"], stdin=r, stdout=sink.fd))
        os.close(r)
        os.close(w)
    for p in procs:
        p.wait()
    return time.perf_counter() - start


def run_air(air_run, inputs, sink, console, folder):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIR_RUN_")}
    env.pop("CI", None)
    env["TERM"] = "xterm-256color"
    # Each rank cats its own file: one argument, the rank picked by the shell.
    script = rank_script(inputs)
    # N CPU ranks even on a GPU machine (--cpu-ranks applies only where no GPU is found).
    cmd = [air_run, "--accelerator-type", "CPU", "-n", str(len(inputs)), "--no-python"]
    if console in ("log-dir", "tee"):
        logs = os.path.join(folder, "logs")
        shutil.rmtree(logs, ignore_errors=True)
        cmd += ["--log-dir", logs]
        if console == "tee":
            cmd += ["--tee", "3"]
    cmd += ["sh", "-c", script]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sink.fd, stderr=sink.fd, env=env)
    code = proc.wait()
    elapsed = time.perf_counter() - start
    if code != 0:
        sys.exit(f"air-run exited with {code}: {' '.join(cmd)}")
    return elapsed


def check_lines(data, ranks, per_rank):
    """Every rank's lines whole and in order (air-run's prefix removed, colour codes too)."""
    seen = [0] * ranks
    pattern = re.compile(rb"^(?:\[rank\d+\]: )?r(\d+) (\d+) x+$")
    for line in data.split(b"\n"):
        # What a terminal shows: the text after the last carriage return (the
        # live area's erase starts with one), without escape sequences.
        line = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", line.rstrip(b"\r").rsplit(b"\r", 1)[-1])
        m = pattern.match(line)
        if not m:
            continue
        r, i = int(m.group(1)), int(m.group(2))
        whole = len(line) - line.find(b"r%d " % r) == LINE - 1
        if not whole and i == seen[r]:
            continue  # on a terminal, the unfinished line shown in the live area (erased later)
        if not whole or i != seen[r]:
            return f"rank {r}: line {i} torn or out of order (expected {seen[r]})"
        seen[r] += 1
    if seen != [per_rank] * ranks:
        return f"lines per rank {seen}, expected {per_rank} each"
    return None


def measure(air_run, ranks, console, megabytes, repeat, folder, other=None):
    inputs, per_rank = make_input(folder, ranks, megabytes)
    sink_kind = console if console in ("file", "tty") else "null"
    # What air-run writes besides the console: the rank's log, and torchrun's stdout.log.
    files = {"log-dir": 1, "tee": 2}.get(console, 0)
    sides = ["pipe", "air"] + (["files"] if files else []) + (["other"] if other else [])
    walls = {side: [] for side in sides}
    cpus = {side: [] for side in sides}
    for i in range(repeat):
        for side in sides if i % 2 == 0 else sides[::-1]:
            with Sink(sink_kind, folder) as sink:
                sink.keep = i == 0 and side in ("air", "other")
                before = cpu_of_children()
                if side == "pipe":
                    walls[side].append(run_baseline(inputs, sink))
                elif side == "files":
                    walls[side].append(run_baseline(inputs, sink, files, folder))
                else:
                    binary = other if side == "other" else air_run
                    walls[side].append(run_air(binary, inputs, sink, console, folder))
                cpus[side].append(cpu_of_children() - before)
                sink.close_writer()
                if i == 0 and side in ("air", "other") and sink_kind != "null":
                    problem = check_lines(sink.contents(), ranks, per_rank)
                    if problem:
                        sys.exit(f"{ranks} ranks, console {console}: {problem}")
    for path in inputs:
        os.unlink(path)
    for name in os.listdir(folder):
        if name.startswith("tee"):
            os.unlink(os.path.join(folder, name))
    return walls, cpus


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default=os.path.join(here, "build", "cli", "air-run"))
    ap.add_argument("--ranks", default="1,4,16")
    ap.add_argument("--consoles", default="null,file,tty,log-dir,tee")
    ap.add_argument("--megabytes", type=int, default=64, help="bytes of lines in all, per run (default 64 MB)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE as JSON")
    ap.add_argument("--other", metavar="AIR_RUN",
                    help="a second air-run (an earlier build), measured in the same runs, its CPU ratio to the pipe last")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"{args.megabytes} MB of 100-byte lines per run, median of {args.repeat}, load average {load:.1f}")
    print("wall: seconds; cpu: user + system seconds of the whole process tree; ratio: air-run / pipe")
    print(f"{'ranks':>5} {'console':<8} {'pipe s':>7} {'air s':>7} {'ratio':>6} {'MB/s':>6}   "
          f"{'pipe cpu':>8} {'air cpu':>8} {'ratio':>6}   {'files cpu':>9} {'ratio':>6}"
          + (f"   {'other cpu':>9} {'ratio':>6}" if args.other else ""))
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-logs-") as folder:
        for ranks in [int(x) for x in args.ranks.split(",")]:
            for console in args.consoles.split(","):
                walls, cpus = measure(args.air_run, ranks, console, args.megabytes, args.repeat, folder, args.other)
                med = {k: statistics.median(v) for k, v in walls.items()}
                cpu = {k: statistics.median(v) for k, v in cpus.items()}
                row = {"ranks": ranks, "console": console, "wall_s": med, "cpu_s": cpu,
                       "wall_ratio": med["air"] / med["pipe"], "cpu_ratio": cpu["air"] / cpu["pipe"],
                       "runs": {"wall_s": walls, "cpu_s": cpus}}
                files = f"   {'':9} {'':6}"
                if "files" in cpu:
                    row["files_wall_ratio"] = med["air"] / med["files"]
                    row["files_cpu_ratio"] = cpu["air"] / cpu["files"]
                    files = f"   {cpu['files']:9.3f} {row['files_cpu_ratio']:6.2f}"
                if "other" in cpu:
                    row["other_wall_ratio"] = med["other"] / med["pipe"]
                    row["other_cpu_ratio"] = cpu["other"] / cpu["pipe"]
                    files += f"   {cpu['other']:9.3f} {row['other_cpu_ratio']:6.2f}"
                results.append(row)
                print(f"{ranks:>5} {console:<8} {med['pipe']:7.3f} {med['air']:7.3f} "
                      f"{row['wall_ratio']:6.2f} {args.megabytes / med['air']:6.0f}   "
                      f"{cpu['pipe']:8.3f} {cpu['air']:8.3f} {row['cpu_ratio']:6.2f}{files}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"megabytes": args.megabytes, "repeat": args.repeat, "load_average": load,
                       "air_run": args.air_run, "other": args.other, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
