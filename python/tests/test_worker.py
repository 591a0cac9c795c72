"""The worker protocol (python -m air._worker PAYLOAD OUTDIR), run directly
with the rank variables air-run would set; no air-run binary needed."""

import json
import os
import pickle
import sys

import pytest

import air
from air._payload import dump_call
from conftest import run_python, subprocess_env


def returns_rank_and_args(a, b=0):
    return {"rank": int(os.environ["RANK"]), "world": int(os.environ["WORLD_SIZE"]),
            "sum": a + b, "argv": sys.argv[1:],
            "outdir": os.path.basename(os.environ["AIR_WORKER_OUTDIR"])}


def raises_value_error(word):
    raise ValueError("bad %s" % word)


def returns_set():
    return {3, 1, 2}


def reports_then_returns_none():
    air.report({"loss": 0.25})


def returns_lock():
    import threading
    return threading.Lock()


def exits_with_3():
    sys.exit(3)


class Point:
    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Point) and other.x == self.x


def returns_point():
    return Point(7)


def run_worker(tmp_path, target, args=(), kwargs=None, rank=1, world=2):
    payload = str(tmp_path / "payload.pkl")
    outdir = tmp_path / "out"
    outdir.mkdir()
    dump_call(payload, target, args, kwargs or {}, "test target")
    result_file = tmp_path / ("result-%d.json" % rank)
    error_file = tmp_path / ("error-%d.json" % rank)
    env = subprocess_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                         LOCAL_WORLD_SIZE=str(world), AIR_RESULT_FILE=str(result_file),
                         TORCHELASTIC_ERROR_FILE=str(error_file))
    done = run_python(["-m", "air._worker", payload, str(outdir)], env=env)
    record = None
    rank_file = outdir / ("rank-%d.pkl" % rank)
    if rank_file.exists():
        with open(str(rank_file), "rb") as f:
            record = pickle.load(f)
    return done, record, result_file, error_file, outdir


def test_success_writes_pickle_and_json_result(tmp_path):
    done, record, result_file, error_file, outdir = run_worker(
        tmp_path, returns_rank_and_args, (40,), {"b": 2})
    assert done.returncode == 0, done.stderr
    expected = {"rank": 1, "world": 2, "sum": 42, "argv": [], "outdir": "out"}
    assert record == {"ok": True, "value": expected}
    assert json.loads(result_file.read_text()) == expected
    assert not error_file.exists()
    assert sorted(os.listdir(str(outdir))) == ["rank-1.pkl"]  # no temp file left behind


def test_exception_writes_record_error_file_and_exits_1(tmp_path):
    done, record, result_file, error_file, _ = run_worker(tmp_path, raises_value_error, ("x",))
    assert done.returncode == 1
    assert record["ok"] is False
    assert record["type"] == "ValueError"
    assert record["message"] == "bad x"
    assert 'raise ValueError("bad %s" % word)' in record["traceback"]
    # The traceback starts in user code, not in air's worker.
    assert "air/_worker.py" not in record["traceback"]
    assert isinstance(pickle.loads(record["exception"]), ValueError)
    assert not result_file.exists()
    error = json.loads(error_file.read_text())
    assert error["message"]["message"] == "ValueError: bad x"
    assert error["message"]["extraInfo"]["py_callstack"] == record["traceback"]
    assert error["message"]["extraInfo"]["timestamp"].isdigit()
    assert "ValueError: bad x" in done.stderr


def test_any_picklable_value_and_repr_for_json(tmp_path):
    done, record, result_file, _, _ = run_worker(tmp_path, returns_set)
    assert done.returncode == 0, done.stderr
    assert record["value"] == {1, 2, 3}
    assert json.loads(result_file.read_text()) == {"type": "set", "repr": "{1, 2, 3}"}


def test_custom_class_value_round_trips(tmp_path):
    done, record, _, _, _ = run_worker(tmp_path, returns_point)
    assert done.returncode == 0, done.stderr
    assert record["value"] == Point(7)


def test_explicit_report_is_kept_when_function_returns_none(tmp_path):
    done, record, result_file, _, _ = run_worker(tmp_path, reports_then_returns_none)
    assert done.returncode == 0, done.stderr
    assert record == {"ok": True, "value": None}
    assert json.loads(result_file.read_text()) == {"loss": 0.25}


def test_unpicklable_return_value_is_an_error(tmp_path):
    done, record, _, _, _ = run_worker(tmp_path, returns_lock)
    assert done.returncode == 1
    assert record["type"] == "TypeError"
    assert record["message"].startswith("the return value of rank 1 (_thread.lock) could not "
                                        "be pickled: ")


def test_sys_exit_code_is_kept(tmp_path):
    done, record, _, error_file, _ = run_worker(tmp_path, exits_with_3)
    assert done.returncode == 3
    assert record["type"] == "SystemExit"
    assert json.loads(error_file.read_text())["message"]["message"] == "SystemExit: 3"


def test_unloadable_payload_is_reported(tmp_path):
    payload = tmp_path / "payload.pkl"
    payload.write_bytes(b"not a pickle")
    outdir = tmp_path / "out"
    outdir.mkdir()
    done = run_python(["-m", "air._worker", str(payload), str(outdir)],
                      env=subprocess_env(RANK="0"))
    assert done.returncode == 1
    with open(str(outdir / "rank-0.pkl"), "rb") as f:
        record = pickle.load(f)
    assert record["ok"] is False
    assert record["type"] == "_pickle.UnpicklingError"


def test_usage_error():
    done = run_python(["-m", "air._worker"])
    assert done.returncode == 2
    assert done.stderr == "usage: python -m air._worker PAYLOAD OUTDIR\n"


def test_main_function_travels_by_value(tmp_path):
    """A function defined in a script's __main__ is shipped by value (cloudpickle)."""
    pytest.importorskip("cloudpickle")
    script = tmp_path / "make_payload.py"
    script.write_text(
        "import sys\n"
        "from air._payload import dump_call\n"
        "OFFSET = 100\n"
        "def helper(x):\n"
        "    return x + OFFSET\n"
        "def main_fn(x):\n"
        "    import os\n"
        "    return helper(x) + int(os.environ['RANK'])\n"
        "dump_call(sys.argv[1], main_fn, (1,), {}, 'main_fn')\n")
    payload = tmp_path / "payload.pkl"
    assert run_python([str(script), str(payload)]).returncode == 0
    outdir = tmp_path / "out"
    outdir.mkdir()
    # Run from another directory so the script cannot be imported by name.
    done = run_python(["-m", "air._worker", str(payload), str(outdir)],
                      env=subprocess_env(RANK="1"), cwd="/")
    assert done.returncode == 0, done.stderr
    with open(str(outdir / "rank-1.pkl"), "rb") as f:
        assert pickle.load(f) == {"ok": True, "value": 102}
