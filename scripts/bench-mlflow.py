#!/usr/bin/env python3
"""What MLflow tracking adds to a launch.

Times `air-run` starting 8 trivial ranks, interleaved in one run: with
tracking and without. Reports the medians, their difference in milliseconds
and their ratio, and the median of the per-round differences (each tracked
launch against the untracked one of its own round: steadier on a busy
machine). The store is the loopback tracking server of the tests
(tests/mlflow/golden_server.py: experiment lookup, run creation, params,
final status, metrics, the summary as an artifact: 6 requests; it stops by
itself after the run), or with --tracking-uri any store: a real tracking
server (http://127.0.0.1:5000) or a file or database store
(sqlite:////tmp/bench.db, written through `python -m air._mlflow_store`
with the ranks' interpreter, which must import mlflow: set PYTHONPATH).

The ranks are `--no-python true` by default: they need the run in their
environment, so the launch waits for its creation before they start.
--python-ranks makes them Python programs (a script that only checks, in a
tracked launch, that MLFLOW_RUN_ID reached it; --python picks the
interpreter, this script's own by default): they start at once and wait for
the run in air-run's start-up shim, as training ranks do.

--baseline AIR_RUN adds a third launch to each round: the tracked one with
another air-run (an earlier build), so a before/after comparison shares the
same moments of a busy machine.

--delay-ms holds every answer of the server back that long, as a real
server's database commit does (a real MLflow 2.17 server with a SQLite store
took about 25 ms per request): then the difference counts the round trips a
launch waits for. Target: under 50 ms with --delay-ms 25.

--rank-seconds S makes the Python ranks sleep S seconds: a store's start
that takes less than that is off the launch's path altogether.

  scripts/bench-mlflow.py [--air-run build/cli/air-run] [--runs 30] [--ranks 8] [--delay-ms 25]
                          [--tracking-uri URI] [--no-experiment]
                          [--python-ranks [--python /usr/bin/python3] [--rank-seconds S]]
                          [--baseline OLD_AIR_RUN]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchlib import run_timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--air-run", default=os.path.join(ROOT, "build", "cli", "air-run"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--delay-ms", type=int, default=0, help="the test server's time per answer")
    ap.add_argument("--tracking-uri", help="this store instead of the loopback test server")
    ap.add_argument("--no-experiment", action="store_true",
                    help="the Default experiment: no experiment lookup before the run")
    ap.add_argument("--python-ranks", action="store_true",
                    help="trivial Python ranks instead of `--no-python true`")
    # The interpreter itself, not a wrapper such as pyenv's shim (a second of bash per rank).
    ap.add_argument("--python", default=sys.executable, help="the Python ranks' interpreter")
    ap.add_argument("--rank-seconds", type=float, default=0.0, help="how long each Python rank sleeps")
    ap.add_argument("--baseline", help="another air-run: its tracked launch joins each round")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="air-bench-mlflow-") as tmp:
        server = None if args.tracking_uri else start_test_server(tmp, args)
        try:
            uri = args.tracking_uri or "http://127.0.0.1:" + open(os.path.join(tmp, "port")).read()
            env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AIR_RUN_"))}
            base = [args.air_run, "--accelerator-type", "CPU", "--cpu-ranks", str(args.ranks)]
            expect_run = []
            if args.python_ranks:
                script = os.path.join(tmp, "rank.py")
                with open(script, "w") as f:
                    f.write("import os, sys, time\n"
                            f"time.sleep({args.rank_seconds!r})\n"
                            "sys.exit(3 if os.environ.get('BENCH_EXPECT_RUN') and "
                            "not os.environ.get('MLFLOW_RUN_ID') else 0)\n")
                base += ["--python", args.python, script]
                expect_run = ["--env", "BENCH_EXPECT_RUN=1"]
            else:
                base += ["--no-python", "true"]
            experiment = [] if args.no_experiment else ["--mlflow-experiment", "bench"]
            tracked = [args.air_run, "--mlflow-tracking-uri", uri] + experiment + expect_run + base[1:]
            launches = {"without tracking": base, "with tracking": tracked}
            if args.baseline:
                launches["baseline, tracked"] = [args.baseline] + tracked[1:]
            for cmd in launches.values():  # warm-up: page cache, the experiment exists afterwards
                run_timed(cmd, env)
            times = {name: [] for name in launches}
            for _ in range(args.runs):
                for name, cmd in launches.items():
                    t, code = run_timed(cmd, env)
                    assert code == 0, name + ": the launch failed"
                    times[name].append(t)
        finally:
            if server is not None:
                server.kill()
                server.wait()
    report(args, times)


def start_test_server(tmp, args):
    """The loopback test server, its port written to TMP/port once it listens."""
    port_file = os.path.join(tmp, "port")
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "mlflow", "golden_server.py"),
                               "--port-file", port_file, "--lifetime", str(60 + args.runs * 2),
                               "--delay-ms", str(args.delay_ms)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not os.path.exists(port_file) and time.time() < deadline:
        time.sleep(0.02)
    return server


def report(args, times):
    medians = {name: statistics.median(t) for name, t in times.items()}
    plain = medians["without tracking"]
    ranks = "Python ranks" if args.python_ranks else "ranks (--no-python true)"
    if args.python_ranks and args.rank_seconds:
        ranks += f" sleeping {args.rank_seconds:g} s"
    store = args.tracking_uri or f"the test server, answers after {args.delay_ms} ms"
    print(f"{args.ranks} {ranks}, {args.runs} runs each, interleaved; {store}"
          f"{'' if args.no_experiment else ', experiment by name'}; load average {os.getloadavg()[0]:.2f}")
    for name, median in medians.items():
        print(f"{name + ':':18} {median * 1000:.2f} ms (median)")
    for name in [n for n in medians if n != "without tracking"]:
        label = "tracking adds" if name == "with tracking" else "the baseline's adds"
        paired = statistics.median(t - u for t, u in zip(times[name], times["without tracking"]))
        print(f"{label} {1000 * (medians[name] - plain):+.2f} ms ({medians[name] / plain:.2f}x); "
              f"median of the rounds' differences {1000 * paired:+.2f} ms")


if __name__ == "__main__":
    main()
