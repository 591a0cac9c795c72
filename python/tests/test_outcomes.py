"""Turning air-run's exit code, summary and the workers' records into values or
one exception (synthetic outcomes; no launch)."""

import pickle

import pytest

import air
from air import _launch
from air._payload import dumps_outcome


def write_record(outdir, rank, record):
    (outdir / ("rank-%d.pkl" % rank)).write_bytes(dumps_outcome(record))


def launch(rc, summary=None, output=(), stderr=()):
    return _launch.Launch(["air-run"], rc, summary or {}, list(output), list(stderr))


def summary_of(status, root=-1, reason="", ranks=2, errors=None):
    errors = errors or {}
    return {"outcome": {"status": status, "exit_code": 0, "root_cause_rank": root,
                        "reason": reason},
            "ranks": [{"rank": r, "error": errors.get(r)} for r in range(ranks)]}


def test_success_in_rank_order(tmp_path):
    write_record(tmp_path, 1, {"ok": True, "value": "b"})
    write_record(tmp_path, 0, {"ok": True, "value": "a"})
    assert _launch.results_or_raise(launch(0, summary_of("succeeded")), str(tmp_path)) == [
        "a", "b"]


def test_rank_exception(tmp_path):
    write_record(tmp_path, 0, {"ok": True, "value": 10})
    write_record(tmp_path, 1, {"ok": False, "type": "KeyError", "message": "'x'",
                               "traceback": "Traceback (most recent call last):\nKeyError: 'x'\n",
                               "exception": pickle.dumps(KeyError("x"))})
    with pytest.raises(air.DistributedError) as info:
        _launch.results_or_raise(launch(1, summary_of("failed", root=1)), str(tmp_path))
    error = info.value
    assert (error.rank, error.exc_type, error.message, error.exit_code) == (1, "KeyError", "'x'", 1)
    assert error.partial_results == [10, None]
    assert isinstance(error.exception, KeyError)
    assert str(error) == ("rank 1 failed with KeyError: 'x' (air-run exit code 1)\n\n"
                          "Traceback from rank 1:\n"
                          "Traceback (most recent call last):\nKeyError: 'x'")


def test_rank_killed_without_record_uses_air_runs_account(tmp_path):
    write_record(tmp_path, 1, {"ok": True, "value": 1})
    summary = summary_of("failed", root=0, reason="rank 0 was killed by signal 9 (SIGKILL)")
    output = ["[rank0]: loading shard 3", "[rank1]: fine", "[rank0]: about to allocate"]
    with pytest.raises(air.DistributedError) as info:
        _launch.results_or_raise(launch(137, summary, output), str(tmp_path))
    error = info.value
    assert error.rank == 0 and error.exc_type is None and error.exit_code == 137
    assert error.partial_results == [None, 1]
    assert str(error) == ("rank 0 failed: rank 0 was killed by signal 9 (SIGKILL) (air-run exit "
                          "code 137)\n\nLast output of rank 0:\n[rank0]: loading shard 3\n"
                          "[rank0]: about to allocate")


def test_summary_error_of_a_script_rank(tmp_path):
    summary = summary_of("failed", root=1, reason="rank 1 exited with exit code 1", errors={
        1: {"type": "RuntimeError", "message": "RuntimeError: nope", "traceback": "TB text"}})
    with pytest.raises(air.DistributedError) as info:
        _launch.results_or_raise(launch(1, summary), str(tmp_path))
    assert info.value.exc_type == "RuntimeError"
    assert info.value.remote_traceback == "TB text"
    assert str(info.value).endswith("Traceback from rank 1:\nTB text")


def test_timeout(tmp_path):
    write_record(tmp_path, 0, {"ok": True, "value": "early"})
    summary = summary_of("timed_out", reason="timeout 2s reached")
    with pytest.raises(air.DistributedTimeout) as info:
        _launch.results_or_raise(launch(124, summary), str(tmp_path), timeout_text="2")
    assert info.value.partial_results == ["early", None]
    assert str(info.value) == ("the distributed call timed out after 2 s; air-run stopped every "
                               "rank (exit code 124): timeout 2s reached. Ranks that finished: "
                               "[0]")


def test_rank_exiting_124_is_not_a_timeout(tmp_path):
    with pytest.raises(air.DistributedError) as info:
        _launch.results_or_raise(launch(124, summary_of("failed", root=0)), str(tmp_path))
    assert not isinstance(info.value, air.DistributedTimeout)


def test_spec_error(tmp_path):
    error_line = "air-run: error: accelerator_type GPU_8xH100 needs 8 GPUs, found 2 (GPU_2xH200)"
    with pytest.raises(ValueError) as info:
        _launch.results_or_raise(launch(2, stderr=[error_line]), str(tmp_path))
    assert str(info.value) == "air-run: accelerator_type GPU_8xH100 needs 8 GPUs, found 2 " \
                              "(GPU_2xH200)"


def test_rank_exiting_2_is_a_rank_failure(tmp_path):
    with pytest.raises(air.DistributedError):
        _launch.results_or_raise(launch(2, summary_of("failed", root=0),
                                        stderr=["[rank0]: usage: train.py"]), str(tmp_path))


def test_launch_failure_without_rank(tmp_path):
    with pytest.raises(air.DistributedError) as info:
        _launch.results_or_raise(
            launch(127, stderr=["air-run: error: Python interpreter /nope not found"]),
            str(tmp_path), world_hint=2)
    assert info.value.rank is None
    assert info.value.partial_results == [None, None]
    assert str(info.value) == ("air-run failed with exit code 127\n"
                               "air-run: error: Python interpreter /nope not found")


def test_error_survives_pickling():
    error = air.DistributedTimeout("head", rank=1, exc_type="X", message="m",
                                   remote_traceback="tb", partial_results=[1, None],
                                   exit_code=124, summary={"a": 1})
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is air.DistributedTimeout
    assert (copy.rank, copy.partial_results, copy.exit_code, str(copy)) == (
        1, [1, None], 124, str(error))
