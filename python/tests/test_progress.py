"""air.step(), air.steps(), air.should_stop(), air.stop_deadline(), air.stop_step():
the rank's side of step counting and preemption (docs/hangs.md, docs/preemption.md).

Outside air-run they do nothing and never stop a loop; inside, they talk to the
page air-run maps for the rank, which these tests stand in for with a file laid
out as air-run lays it out (the slot numbers are checked against the C++ side
by tests/unit/hang_diagnosis_test.cpp)."""

import mmap
import os
import struct
import subprocess
import sys
import time

import pytest

import air

PAGE = 4096
STEPS, STOP_STEP, STOP_REQUESTED, STOP_DEADLINE, POLLS_STOP, PID = 1, 8, 9, 10, 11, 14
COLL_SEQ, COLL_ENTERED = 5, 6


def test_outside_air_run_nothing_is_counted_and_nothing_stops():
    assert not hasattr(sys, "_air_run_progress")
    air.step()
    assert air.steps() == 0
    assert air.should_stop() is False
    assert air.stop_deadline() is None
    assert air.stop_step() is None


def shim_sources(air_run, tmp_path):
    """The shim air-run writes for a run (the `sitecustomize.py` loader and
    the shim it imports), as its dry run does not show it: taken from a real
    run's folder, as {file name: text}."""
    log_dir = tmp_path / "logs"
    noop = tmp_path / "noop.py"
    noop.write_text("pass\n")
    subprocess.run([air_run, "--cpu-ranks", "1", "--log-dir", str(log_dir), "--python", sys.executable, "-q",
                    str(noop)], check=True, capture_output=True)
    shims = list(log_dir.rglob("sitecustomize.py"))
    assert shims, "no shim in the run's folder"
    return {p.name: p.read_text() for p in shims[0].parent.glob("*.py")}


def run_with_page(air_run, tmp_path, script, page_setup=None):
    """Runs `script` in a child Python whose shim maps a page made here."""
    page = tmp_path / "rank0.progress"
    page.write_bytes(b"AIRPRG01" + bytes(PAGE - 8))
    if page_setup:
        with open(page, "r+b") as f:
            mm = mmap.mmap(f.fileno(), PAGE)
            page_setup(mm)
            mm.close()
    shim_dir = tmp_path / "pyshim"
    shim_dir.mkdir()
    for name, text in shim_sources(air_run, tmp_path).items():
        (shim_dir / name).write_text(text)
    env = dict(os.environ, AIR_RUN_PROGRESS_FILE=str(page),
               PYTHONPATH=os.pathsep.join([str(shim_dir), os.path.dirname(os.path.dirname(air.__file__))]))
    # setsid: the shim attaches only in a process group's leader (a rank).
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         preexec_fn=os.setsid, timeout=120)
    assert out.returncode == 0, out.stderr
    with open(page, "rb") as f:
        data = f.read()
    slot = lambda i: struct.unpack_from("<Q", data, 8 * i)[0]
    return out.stdout, slot


def test_steps_and_the_stop_step_through_the_page(air_run, tmp_path):
    def stop_at_3(mm):
        struct.pack_into("<Q", mm, 8 * STOP_STEP, 3)
        struct.pack_into("<Q", mm, 8 * STOP_DEADLINE, time.time_ns() + 20 * 10**9)
        struct.pack_into("<Q", mm, 8 * STOP_REQUESTED, 1)

    out, slot = run_with_page(air_run, tmp_path, """
import air
seen = []
for _ in range(10):
    air.step()
    seen.append(air.should_stop())
print(air.steps(), seen.index(True) + 1, air.stop_step(), 0 < air.stop_deadline() <= 20)
""", stop_at_3)
    # Every step counted; should_stop() turned true at the agreed step 3, not before.
    assert out.split() == ["10", "3", "3", "True"]
    assert slot(STEPS) == 10
    assert slot(POLLS_STOP) == 1
    assert slot(PID) > 0


def test_without_a_stop_request_should_stop_stays_false(air_run, tmp_path):
    out, slot = run_with_page(air_run, tmp_path, """
import air
for _ in range(5):
    air.step()
print(air.steps(), any(air.should_stop() for _ in range(3)), air.stop_deadline())
""")
    assert out.split() == ["5", "False", "None"]
    assert slot(POLLS_STOP) == 1


def test_every_collective_counts_the_waits_of_async_ones_too(air_run, tmp_path):
    """Each synchronous collective counts once (its own Work.wait() inside
    it is not counted again); an async one counts when issued and when its
    wait() returns: a rank that waits on a Work is inside a collective."""
    pytest.importorskip("torch.distributed")
    out, slot = run_with_page(air_run, tmp_path, """
import socket, sys, torch, torch.distributed as dist
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1)
t = torch.ones(1)
for _ in range(3):
    dist.all_reduce(t)
sync = sys._air_run_progress._coll_seq
for _ in range(2):
    dist.all_reduce(t, async_op=True).wait()
dist.barrier()
print(sync, sys._air_run_progress._coll_seq)
""")
    assert out.split() == ["3", "8"]
    assert slot(COLL_SEQ) == 8
    assert slot(COLL_ENTERED) == 0


@pytest.mark.parametrize("ending", ['sys.exit("bad config")', 'from sys import exit; exit("bad config")'])
def test_a_rank_ending_with_a_system_exit_message_reports_it(air_run, tmp_path, ending):
    # Python prints the message and exits 1 without a traceback; the summary
    # must still name the error (issue 32).
    import json
    script = tmp_path / "train.py"
    script.write_text("import os, sys\nif os.environ['RANK'] == '1':\n    %s\n" % ending)
    summary = tmp_path / "summary.json"
    run = subprocess.run(["timeout", "120", air_run, "--cpu-ranks", "2", "--summary", str(summary),
                          "--python", sys.executable, str(script)], capture_output=True, text=True, timeout=150)
    assert run.returncode == 1, run.stderr
    rank = json.loads(summary.read_text())["ranks"][1]
    assert rank["exit"] is not None
    assert rank["error"] is not None, (rank, run.stderr)
    assert (rank["error"]["type"], rank["error"]["message"]) == ("SystemExit", "bad config"), rank
