"""The MLflow run's rank-side wait (core/mlflow/python/air_run_mlflow_wait.py),
run in a child interpreter of its own, as in a rank: the hooks it installs
while the run is being created, the run it applies when the rank first looks
for it, and every hook taken out again afterwards."""

import json
import os
import textwrap

from conftest import rank_python_path, run_python

# The child: starts the wait, reports which hooks are in, lets the test's
# `action` run, then reports again. Its report is one JSON line.
CHILD = textwrap.dedent("""\
    import json, os, sys, threading, time
    sys.path[:0] = %(path)r
    import _posixsubprocess
    originals = {"system": os.system, "execv": os.execv, "fork_exec": _posixsubprocess.fork_exec}
    import air_run_mlflow_wait as w

    def hooks():
        return {"environ": type(os.environ).__name__,
                "finders": [type(f).__name__ if not isinstance(f, type) else f.__name__ for f in sys.meta_path],
                "system": os.system is originals["system"], "execv": os.execv is originals["execv"],
                "fork_exec": _posixsubprocess.fork_exec is originals["fork_exec"]}

    w._air_run_mlflow_run()
    report = {"popped": "AIR_RUN_MLFLOW_RUN_FILE" not in os.environ, "before": hooks()}
    %(action)s
    report["after"] = hooks()
    report["run_id"] = os.environ.get("MLFLOW_RUN_ID")
    report["dropped"] = "MLFLOW_EXPERIMENT_NAME" not in os.environ
    print(json.dumps(report))
    """)

# Writes the run's file after a moment, by a rename as air-run does.
WRITE_LATER = textwrap.dedent("""\
    def write():
        time.sleep(0.3)
        with open(os.environ["RUN_FILE_TMP"], "wb") as f:
            f.write(b"MLFLOW_RUN_ID=abc123\\0MLFLOW_EXPERIMENT_NAME\\0")
        os.rename(os.environ["RUN_FILE_TMP"], os.environ["RUN_FILE"])
    threading.Thread(target=write).start()
    """)


def run_child(tmp_path, action, wait="10", exists=False):
    run_file = tmp_path / "mlflow.run"
    if exists:
        run_file.write_bytes(b"MLFLOW_RUN_ID=early\0MLFLOW_EXPERIMENT_NAME\0")
    env = dict(os.environ, AIR_RUN_MLFLOW_RUN_FILE=str(run_file), AIR_RUN_MLFLOW_RUN_WAIT=wait,
               MLFLOW_EXPERIMENT_NAME="taken-out", RUN_FILE=str(run_file), RUN_FILE_TMP=str(run_file) + ".tmp")
    script = CHILD % {"path": rank_python_path(), "action": action}
    out = run_python(["-c", script], env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def hooked(state):
    return (state["environ"] == "_AirRunEnviron" and "_AirRunMlflowFinder" in state["finders"]
            and not state["system"] and not state["execv"] and not state["fork_exec"])


def unhooked(state):
    return (state["environ"] == "_Environ" and "_AirRunMlflowFinder" not in state["finders"] and state["system"]
            and state["execv"] and state["fork_exec"])


def test_a_read_of_an_mlflow_variable_waits_for_the_run_then_unhooks(tmp_path):
    report = run_child(tmp_path, WRITE_LATER + 'other = os.environ["PATH"]  # not MLflow: no wait\n'
                       'report["still_hooked"] = type(os.environ).__name__ == "_AirRunEnviron"\n'
                       'report["read"] = os.environ.get("MLFLOW_RUN_ID") or os.environ["MLFLOW_RUN_ID"]\n')
    assert report["popped"]
    assert hooked(report["before"])
    assert report["still_hooked"]
    assert report["read"] == "abc123"
    assert unhooked(report["after"])
    assert report["run_id"] == "abc123" and report["dropped"]


def test_an_import_of_mlflow_waits_for_the_run(tmp_path):
    report = run_child(tmp_path, WRITE_LATER + "try:\n    import mlflow.tracking  # noqa: F401\n"
                       "except ImportError:\n    pass\n")
    assert hooked(report["before"])
    assert unhooked(report["after"])
    assert report["run_id"] == "abc123"


def test_a_run_already_there_is_applied_at_once_without_hooks(tmp_path):
    report = run_child(tmp_path, "pass", exists=True)
    assert unhooked(report["before"])
    assert report["run_id"] == "early" and report["dropped"]


def test_no_run_by_the_deadline_leaves_the_rank_untracked_and_unhooked(tmp_path):
    report = run_child(tmp_path, 'report["read"] = len(os.environ) > 0', wait="0.2")
    assert hooked(report["before"])
    assert unhooked(report["after"])
    assert report["run_id"] is None and not report["dropped"]
