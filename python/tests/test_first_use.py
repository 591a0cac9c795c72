"""What a new user of @distributed meets in the first hour: mistakes in the
arguments reported at the decorator, a plain call that runs a function written
for the ranks, a failure shown without repeats and without air's own frames,
and no launcher housekeeping in the output."""

import os
import sys
import textwrap
import warnings

import pytest

import air
from air import _launch
from conftest import run_python, subprocess_env


# ----------------------------------------------------------------- arguments, at decoration time

@pytest.mark.parametrize("kwargs, error, text", [
    (dict(timeout="abc"), ValueError,
     "timeout must be a number of seconds, a duration string like '90m' or '1h30m', or None; "
     "got 'abc'"),
    (dict(timeout="1h30"), ValueError, "timeout must be a number of seconds"),
    (dict(timeout="0s"), ValueError, "timeout must be a positive duration, got '0s'"),
    (dict(grace_period="soon"), ValueError,
     "grace_period must be a number of seconds, a duration string like '90m' or '1h30m'; "
     "got 'soon'"),
    (dict(grace_period=-1), ValueError, "grace_period must be a positive number of seconds"),
    (dict(grace_period=[5]), TypeError, "grace_period must be a number of seconds"),
    (dict(env={"SEED": 1}), TypeError, "env['SEED'] must be a str, not 1"),
    (dict(env=["SEED=1"]), TypeError, "env must be a dict of environment variables"),
    (dict(python=3), TypeError, "python must be the path of an interpreter (str), not 3"),
    (dict(accelerator_type="TPU_8"), ValueError,
     "accelerator_type must be 'CPU' or 'GPU_<n>x<MODEL>' (like 'GPU_8xH100'), got 'TPU_8'"),
    (dict(accelerator_type="GPU_0xH100"), ValueError,
     "accelerator_type: the GPU count must be between 1 and 9999"),
])
def test_a_bad_argument_is_refused_at_the_decorator_naming_it(kwargs, error, text):
    with pytest.raises(error) as info:
        @air.distributed(**kwargs)
        def never_called():
            pass
    assert str(info.value).startswith(text)
    assert "--" not in str(info.value)  # the Python argument, not air-run's flag


@pytest.mark.parametrize("kwargs", [
    dict(timeout="1h30m"), dict(timeout=" 90m "), dict(timeout="none"), dict(timeout=None),
    dict(timeout=1.5), dict(timeout=".5s"), dict(grace_period="500ms"), dict(grace_period=5),
    dict(env={"SEED": "1"}), dict(python="/usr/bin/python3"), dict(accelerator_type="cpu"),
    dict(accelerator_type="gpu_8xh100"), dict(accelerator_type="RTX4090"),
])
def test_good_arguments_are_taken(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        air.distributed(**kwargs)(len)


@pytest.mark.parametrize("text, ms", [
    ("30", 30000), ("1h30m", 5400000), ("1.5s", 1500), ("500ms", 500), ("0.1h", 360000),
    ("1m30m", None), ("30m1h", None), ("1h30", None), ("", None), ("1.s", None),
    ("8761h", None), ("3 h", None)])
def test_durations_are_read_as_air_run_reads_them(text, ms):
    from air._options import duration_ms
    assert duration_ms(text) == ms


# ----------------------------------------------------------------- a plain call

def test_a_plain_call_runs_a_function_written_for_the_ranks(torch, monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)

    @air.distributed(num_accelerators=2)
    def train(num_epochs, batch_size):
        import torch.distributed as dist
        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        dist.destroy_process_group()
        return {"rank": rank, "world": world, "local_rank": local_rank, "epochs": num_epochs}

    assert train(1, 8) == {"rank": 0, "world": 1, "local_rank": 0, "epochs": 1}
    assert "LOCAL_RANK" not in os.environ and "MASTER_PORT" not in os.environ


def test_a_plain_call_inside_a_rank_changes_nothing(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.delenv("LOCAL_RANK", raising=False)

    @air.distributed
    def seen():
        return os.environ.get("RANK"), os.environ.get("WORLD_SIZE"), os.environ.get("LOCAL_RANK")

    assert seen() == ("3", "4", None)


# ----------------------------------------------------------------- a failure, as the user sees it

FAILING_SCRIPT = """\
from air import distributed

@distributed(num_accelerators=2, timeout=120)
def train():
    import os
    print("training on rank", os.environ["RANK"], flush=True)
    if os.environ["RANK"] == "1":
        raise ValueError("the batch is empty")
    return "ok"

train.distributed()
"""


def test_a_failing_rank_is_shown_twice_without_air_frames_or_housekeeping(air_run, tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(FAILING_SCRIPT)
    done = run_python([str(script)], cwd=str(tmp_path), env=subprocess_env(AIR_RUN_BINARY=air_run))
    assert done.returncode == 1
    everything = done.stdout + done.stderr
    # The rank's traceback: once as the rank printed it, once in the exception.
    assert everything.count('raise ValueError("the batch is empty")') == 2, everything
    assert "[rank1]: training on rank 1" in done.stdout
    # The caller's stack: the user's line, then the exception; no frame of
    # air's launch machinery below the call.
    call = done.stderr.index('user_script.py", line 11, in <module>')
    caller = done.stderr[done.stderr.rindex("Traceback (most recent call last):", 0, call):
                         done.stderr.index("DistributedError", call)]
    package = os.path.dirname(os.path.abspath(air.__file__))
    air_frames = [l for l in caller.splitlines() if l.strip().startswith('File "' + package)]
    assert len(air_frames) <= 1, caller  # at most the raise of .distributed() itself
    assert "_launch.py" not in caller
    assert "DistributedError: rank 1 failed with ValueError: the batch is empty" in done.stderr
    # No launcher housekeeping: notices, the end-of-run report.
    assert "OMP_NUM_THREADS" not in everything
    assert "air-run: run " not in everything
    assert "root cause" not in everything


GLOO_FAILING_SCRIPT = """\
import traceback
import torch
import torch.distributed as dist
from air import distributed


@distributed(num_accelerators=2, timeout=120)
def train():
    dist.init_process_group("gloo")
    dist.all_reduce(torch.ones(1))
    if dist.get_rank() == 1:
        dist.all_reduce("not a tensor")
    return "ok"


try:
    train.distributed()
except Exception as error:
    traceback.print_exc()
    print("=== remote ===")
    print(error.remote_traceback)
"""


def test_a_gloo_rank_failing_in_a_collective_shows_no_frame_of_air_or_its_shim(air_run, torch, tmp_path):
    # An error raised inside a collective of real gloo ranks: air-run's shim
    # wraps each collective (to time it), so its frame sat between the user's
    # line and torch's in the rank's traceback.
    script = tmp_path / "gloo_script.py"
    script.write_text(GLOO_FAILING_SCRIPT)
    done = run_python([str(script)], cwd=str(tmp_path), env=subprocess_env(AIR_RUN_BINARY=air_run))
    assert done.returncode == 0, done.stderr
    remote = done.stdout.split("=== remote ===\n")[1]
    package = os.path.dirname(os.path.abspath(air.__file__))
    assert 'gloo_script.py", line 12, in train' in remote, remote
    assert "distributed_c10d.py" in remote, remote
    assert "pyshim" not in remote and package not in remote, remote
    # The caller's stack: its own line, then the one raise of .distributed().
    call = done.stderr.index('gloo_script.py", line 17, in <module>')
    caller = done.stderr[done.stderr.rindex("Traceback (most recent call last):", 0, call):
                         done.stderr.index("DistributedError", call)]
    air_frames = [l.strip() for l in caller.splitlines() if l.strip().startswith('File "' + package)]
    assert len(air_frames) == 1 and air_frames[0].endswith("in distributed"), caller


def test_housekeeping_lines_are_not_shown():
    shown = _launch.shown_to_user
    assert shown("[rank0]: hello\n")
    assert shown("[rank12]: Traceback (most recent call last):\n")
    assert shown("air-run: warning: the spec key 'x' is deprecated\n")
    assert shown("air-run: MLflow: View run at http://mlflow/#/experiments/1/runs/2\n")
    assert not shown("air-run: setting OMP_NUM_THREADS=1 for each rank to avoid "
                     "oversubscribing the CPU; set it to tune\n")
    assert not shown("air-run: run 20261201-045431-05fe3e failed after 0.0s (exit code 3): "
                     "rank 1 exited with exit code 3\n")
    assert not shown("  root cause: rank 1 (local_rank 1, pid 476): exit code 3\n")
    assert not shown("air-run: error: unknown flag\n")


def test_timeout_stacks_leave_out_air_and_runpy_frames():
    package = os.path.dirname(os.path.abspath(air.__file__))
    stack = textwrap.dedent("""\
        Thread 0x00007f0000000001 (most recent call first):
          File "/home/me/train.py", line 9 in wait_for_data
          File "/home/me/train.py", line 12 in train
          File "%s/_worker.py", line 170 in main
          File "%s/_worker.py", line 186 in <module>
          File "<frozen runpy>", line 88 in _run_code
          File "<frozen runpy>", line 198 in _run_module_as_main""") % (package, package)
    assert _launch.user_stack(stack).splitlines() == [
        "Thread 0x00007f0000000001 (most recent call first):",
        '  File "/home/me/train.py", line 9 in wait_for_data',
        '  File "/home/me/train.py", line 12 in train',
    ]
    summary = {"ranks": [{"rank": 0, "stack": None}, {"rank": 1, "stack": stack}]}
    assert _launch.timeout_stacks(summary).startswith(
        "rank 1:\n  Thread 0x00007f0000000001 (most recent call first):\n"
        '    File "/home/me/train.py", line 9 in wait_for_data')


def test_a_serialization_error_is_raised_from_the_call_without_air_frames():
    import threading
    import traceback
    lock = threading.Lock()

    @air.distributed(num_accelerators=2)
    def uses_a_lock():
        return lock.locked()

    with pytest.raises(air.SerializationError) as info:
        uses_a_lock.distributed()
    shown = "".join(traceback.format_exception(info.type, info.value, info.value.__traceback__))
    package = os.path.dirname(os.path.abspath(air.__file__))
    air_frames = [l for l in shown.splitlines() if l.strip().startswith('File "' + package)]
    assert [f for f in air_frames if "_decorator.py" not in f] == [], shown
    assert len(air_frames) == 1, shown  # the raise in .distributed() itself
    assert "cannot pickle '_thread.lock' object" in shown
