"""Measuring helpers shared by the benchmark scripts (bench-launch.py, bench-vs-torchrun.py).

Every figure is taken from outside the launcher: wall time around the whole
process, the launcher's own memory high-water mark from /proc, and the time
from a rank's failure (stamped by the rank itself) to the launcher's exit.
"""

import os
import statistics
import subprocess
import threading
import time


def run_timed(cmd, env=None):
    """Runs cmd with its output discarded; returns (seconds, exit code)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    code = proc.wait()
    return time.perf_counter() - start, code


def median_of(cmd, repeat, env=None):
    """Median wall time of `repeat` runs of cmd, and the set of exit codes seen."""
    times, codes = [], set()
    for _ in range(repeat):
        t, code = run_timed(cmd, env)
        times.append(t)
        codes.add(code)
    return statistics.median(times), codes


def _vm_hwm_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run_watched(cmd, env=None):
    """Runs cmd capturing its output; returns (seconds, exit code, launcher's peak RSS in KiB, output).

    The peak is the launcher process's own VmHWM, polled every 20 ms: children are
    not counted. (wait4's ru_maxrss would also count children forked before exec.)"""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    stop, peak = threading.Event(), [0]

    def poll():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], _vm_hwm_kb(proc.pid))
            except OSError:
                return
            time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    out, _ = proc.communicate()
    stop.set()
    poller.join()
    return time.perf_counter() - start, proc.returncode, peak[0], out


def own_peak_rss_kb(cmd, env=None):
    """The launcher's own peak RSS (VmHWM, KiB) over a whole run of cmd."""
    return run_watched(cmd, env)[2]


def teardown_time(launcher_cmd, ranks, workdir):
    """Seconds from the failing rank's last instant to the launcher's exit.

    Rank 1 sleeps 0.5 s, stamps the time and exits 3; the others sleep 60 s and
    honour SIGTERM. launcher_cmd(ranks, script) builds the launcher's command line."""
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
