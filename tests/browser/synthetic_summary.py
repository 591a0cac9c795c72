#!/usr/bin/env python3
"""A synthetic air-run summary with a full timeline, for the HTML page's tests
and size budget: RANKS ranks over SECONDS seconds, every series at its budget
(256 points), 32 quiet stretches per rank, GPUS GPUs, one restart, a hang and
a straggler. Prints the JSON on stdout.

usage: synthetic_summary.py RANKS SECONDS GPUS
"""
import json
import math
import sys
import time


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def main():
    ranks, seconds, gpus = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    t0 = 1796605323.0
    points = min(256, max(32, 65536 // ranks))
    half = seconds * 0.2
    attempts = [
        {"attempt": 0, "exit_code": 1, "root_cause_rank": 1, "reason": "rank 1 exited with exit code 1",
         "status": "failed", "error": "RuntimeError: CUDA error: an illegal memory access",
         "started_at": iso(t0), "ended_at": iso(t0 + half), "duration_s": half},
        {"attempt": 1, "exit_code": 1, "root_cause_rank": None, "reason": "hung: no progress for 10m",
         "status": "hung", "error": None, "started_at": iso(t0 + half + 5), "ended_at": iso(t0 + seconds),
         "duration_s": seconds - half - 5},
    ]
    rank_docs, lanes = [], []
    for r in range(ranks):
        slow = r == 2
        rate = 2.0 if not slow else 1.4
        steps, v = [], 0.0
        for i in range(points):
            t = seconds * i / (points - 1)
            v = (t if t < half else t - half - 5) * rate * (1 + 0.1 * math.sin(i / 7 + r))
            steps.append([round(t, 3), max(0, round(v))])
        quiet = [[round(seconds * i / 32, 3), round(seconds * i / 32 + 30, 3)] for i in range(32)]
        lanes.append({"rank": r, "node_rank": 0,
                      "spans": [{"attempt": 0, "started_s": 0.2, "first_step_s": 25.0, "ended_s": half},
                                {"attempt": 1, "started_s": half + 5.2, "first_step_s": half + 20,
                                 "ended_s": seconds}],
                      "steps_width": max(1, int(seconds // points)), "steps": steps, "quiet": quiet})
        rank_docs.append({"rank": r, "local_rank": r, "pid": 1000 + r,
                          "exit": {"code": None if r != 1 else 1, "signal": 15 if r != 1 else None,
                                   "signal_name": "SIGTERM" if r != 1 else None, "core_dumped": False,
                                   "description": "signal 15 (SIGTERM)" if r != 1 else "exit code 1"},
                          "stopped_by_air_run": r != 1, "oom_killed": False, "duration_s": seconds - half,
                          "steps": int(v), "last_line": None,
                          "error": None if r != 1 else {
                              "type": "RuntimeError", "message": "NCCL watchdog timeout", "source": "error_file",
                              "traceback": 'Traceback (most recent call last):\n  File "/job/train.py", '
                                           'line 88, in <module>\nRuntimeError: NCCL watchdog timeout\n',
                              "timestamp": None}})
    gpu_docs = []
    for g in range(gpus):
        series = lambda base, amp: [[round(seconds * i / 255, 3), round(base + amp * math.sin(i / 9 + g), 2)]
                                    for i in range(256)]
        gpu_docs.append({"uuid": "GPU-%08d-0000-0000-0000-000000000000" % g,
                         "utilization_pct": series(85, 10), "memory_used_mib": series(61000, 3000),
                         "power_w": series(600, 80), "temperature_c": series(70, 6)})
    doc = {
        "schema_version": 1, "air_run_version": "0.1.0", "run_id": "synthetic-%dranks" % ranks,
        "host": "node0", "started_at": iso(t0), "ended_at": iso(t0 + seconds), "duration_s": seconds,
        "spec": {"path": None, "settings": {"command": {"value": ["train.py", "--epochs", "90"],
                                                        "origin": "flag", "where": None}}},
        "launch": {"world_size": ranks, "node_rank": 0, "num_nodes": 1, "node_name": "node0"},
        "outcome": {
            "status": "hung", "exit_code": 1, "root_cause_rank": 1, "reason": "no rank made progress for 10m",
            "restarts": 1, "attempts": attempts,
            "hang": {"quiet_s": 600, "at": iso(t0 + seconds - 2), "laggards": [1],
                     "diagnosis": "rank 1 is behind at train.py:88; ranks 0, 2-%d wait in all_reduce #4711"
                                  % (ranks - 1),
                     "ranks": [{"rank": r, "node": 0, "running": True, "steps": 4711 if r != 1 else 4710,
                                "place": "train.py:88" if r == 1 else "train.py:61",
                                "collective": None if r == 1 else "all_reduce", "collective_seq": 4711,
                                "waiting_s": None if r == 1 else 600.0} for r in range(min(ranks, 64))],
                     "flight_recorder_files": []},
            "preemption": None},
        "stragglers": [{"rank": 2, "ms_per_step": 712.0, "others_ms_per_step": 498.0, "slower_ms_per_step": 214.0,
                        "gpu": "GPU-2: SM 1410 of 1980 MHz, held down by sw_power_cap, 83 C, 698 of 700 W"}],
        "ranks": rank_docs, "mlflow": None, "python_env": None,
        "timeline": {"version": 1, "sample_interval_s": 1.0, "quiet_threshold_s": 5.0, "preempted_at_s": None,
                     "ranks": lanes, "gpus": gpu_docs},
    }
    json.dump(doc, sys.stdout)


if __name__ == "__main__":
    main()
