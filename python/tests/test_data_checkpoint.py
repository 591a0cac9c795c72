"""air.data.VolumeWriter / VolumeReader: torch Distributed Checkpoint with an
atomic commit, latest() and retention; torch 1.13's DCP made importable on
Python 3.11; a save killed with SIGKILL; 2-rank DDP save and restore."""

import hashlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import air
from conftest import run_python, subprocess_env

pytestmark = pytest.mark.usefixtures("torch")


def test_dcp_imports_here_and_the_fix_is_needed_and_targeted():
    from air.data import _dcp
    dcp = _dcp.import_dcp()
    assert hasattr(dcp, "FileSystemWriter") and hasattr(dcp, "FileSystemReader")
    if not _dcp.needs_patch():
        return  # torch 2: nothing to fix
    # Unfixed, torch 1.13's DCP does not import on this Python.
    plain = run_python(["-c", "import torch.distributed._shard.checkpoint"])
    assert plain.returncode != 0
    assert "mutable default" in plain.stderr and "tensor_properties" in plain.stderr
    # Fixed, each metadata object gets its own TensorProperties, as in later torch.
    metadata = sys.modules[_dcp.PATCHED_MODULE]
    a, b = metadata.ShardedTensorMetadata(), metadata.ShardedTensorMetadata()
    assert a.tensor_properties == b.tensor_properties and a.tensor_properties is not b.tensor_properties
    # Only that module went through the patching loader, and the hook is gone.
    assert type(metadata.__spec__.loader).__name__ == "_PatchedLoader"
    assert not any(type(f).__name__ == "_PatchFinder" for f in sys.meta_path)
    assert type(sys.modules["torch.distributed._shard.checkpoint"].__spec__.loader).__name__ \
        == "SourceFileLoader"


def small_state(seed):
    import torch
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    state = dict(model.state_dict())
    state["step"] = seed
    return model, state


def test_save_latest_keep_last_and_load(tmp_path):
    import torch
    from air.data import checkpoints, latest, load, save
    root = tmp_path / "ckpt"
    assert latest(str(root)) is None
    models = {}
    for step in (1, 2, 3):
        models[step], state = small_state(step)
        assert save(state, str(root / ("step-%d" % step)), keep_last=2) == str(root / (
            "step-%d" % step))
    assert checkpoints(str(root)) == [str(root / "step-2"), str(root / "step-3")]
    assert latest(str(root)) == str(root / "step-3")
    # nothing left hidden but the directory's commit lock
    assert sorted(os.listdir(str(root))) == [".air-checkpoint.lock", "step-2", "step-3"]

    fresh, state = small_state(99)
    load(state, latest("file://" + str(root)))
    assert state["step"] == 3
    for name, tensor in models[3].state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name


def test_refusals(tmp_path):
    from air.data import VolumeReader, VolumeWriter
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="is not a checkpoint written by air.data"):
        VolumeWriter(str(tmp_path / "mine"))
    with pytest.raises(ValueError, match="not to the URL 's3://b/ckpt'"):
        VolumeWriter("s3://b/ckpt")
    with pytest.raises(ValueError, match="keep_last must be an int >= 1"):
        VolumeWriter(str(tmp_path / "x"), keep_last=0)
    with pytest.raises(FileNotFoundError, match="is not a complete checkpoint"):
        VolumeReader(str(tmp_path / "mine"))
    (tmp_path / ".step-9.partial").mkdir()
    with pytest.raises(ValueError, match="work directory of a save that did not finish"):
        VolumeReader(str(tmp_path / ".step-9.partial"))


def test_saving_a_name_again_replaces_it(tmp_path):
    from air.data import checkpoints, load, save
    _, first = small_state(1)
    _, second = small_state(2)
    save(first, str(tmp_path / "last"))
    save(second, str(tmp_path / "last"))
    assert checkpoints(str(tmp_path)) == [str(tmp_path / "last")]
    assert sorted(os.listdir(str(tmp_path))) == [".air-checkpoint.lock", "last"]
    _, state = small_state(5)
    assert load(state, str(tmp_path / "last"))["step"] == 2


CRASHING_SAVE = textwrap.dedent("""\
    import os, sys, time
    import torch
    from air.data import save

    class StallsWhileSaved:
        # Pickled by DCP while it writes the checkpoint's data files: says so,
        # then waits for the SIGKILL.
        def __reduce__(self):
            open(sys.argv[2], "w").close()
            time.sleep(300)
            return (int, ())

    root = sys.argv[1]
    torch.manual_seed(0)
    good = {"weight": torch.randn(64, 64), "step": 1}
    save(good, os.path.join(root, "step-1"))
    torch.save(good["weight"], os.path.join(root, "expected.pt"))
    bad = {"weight": torch.randn(64, 64), "step": 2, "stall": StallsWhileSaved()}
    save(bad, os.path.join(root, "step-2"))
    print("the second save finished, which it must not")
    """)


def test_kill_9_mid_save_leaves_the_previous_checkpoint(tmp_path):
    import torch
    from air.data import latest, load, save
    script = tmp_path / "crash.py"
    script.write_text(CRASHING_SAVE)
    root = tmp_path / "ckpt"
    root.mkdir()
    writing = tmp_path / "writing"
    proc = subprocess.Popen([sys.executable, str(script), str(root), str(writing)],
                            env=subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while not writing.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.time() < deadline, "the save never started writing"
            time.sleep(0.02)
        assert (root / ".step-2.partial").is_dir()  # it was mid-write
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    assert latest(str(root)) == str(root / "step-1")
    assert not (root / "step-2").exists()
    state = {"weight": torch.zeros(64, 64), "step": 0}
    load(state, latest(str(root)))
    assert state["step"] == 1
    assert torch.equal(state["weight"], torch.load(str(root / "expected.pt")))

    # The next save of that name clears the dead one's work directory.
    save({"weight": torch.ones(2), "step": 2}, str(root / "step-2"))
    assert latest(str(root)) == str(root / "step-2")
    assert not (root / ".step-2.partial").exists()


def digests(model):
    return {name: hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()
            for name, t in model.state_dict().items()}


@air.distributed(num_accelerators=2, timeout=180)
def train_and_save(root):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from air.data import save
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(100 + dist.get_rank())  # each rank its own data
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(32, 8)).pow(2).mean().backward()
        optimizer.step()
    state = dict(model.state_dict())
    state["step"] = 3
    save(state, os.path.join(root, "step-3"), keep_last=1)
    result = digests(model)
    # DDP goes before its process group: freed after it, torch 1.13 can hang.
    del model, optimizer, state
    # Both ranks leave together: torch 2.6's gloo destroy_process_group hangs
    # on a rank whose peer has already left (Debian 13, every run).
    dist.barrier()
    dist.destroy_process_group()
    return result


@air.distributed(num_accelerators=2, timeout=180)
def restore(root):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from air.data import latest, load
    dist.init_process_group("gloo")
    torch.manual_seed(42)  # other initial weights than the saved ones
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 1)))
    before = digests(model)
    state = dict(model.state_dict())
    state["step"] = 0
    load(state, latest(root))
    result = before, digests(model), state["step"]
    del model, state
    dist.barrier()  # as in train_and_save
    dist.destroy_process_group()
    return result


def test_ddp_save_on_2_ranks_restores_bit_identical_on_2_ranks(air_run, tmp_path):
    root = str(tmp_path / "ckpt")
    saved = train_and_save.distributed(root)
    assert saved[0] == saved[1]  # DDP kept the replicas equal
    restored = restore.distributed(root)
    for before, after, step in restored:
        assert before != saved[0]
        assert after == saved[0]
        assert step == 3


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB tmpfs (mount needs root; skipped where it is refused)."""
    point = tmp_path / "small"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % (done.stderr.strip() or done.returncode))
    yield point
    subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_full_disk_is_named_and_leaves_no_partial_folder(small_disk):
    """torch said "unexpected pos 320 vs 240" (and aborted at exit, its zip
    writer throwing from a destructor); nothing said the disk was full."""
    root = small_disk / "ckpt"
    script = textwrap.dedent("""
        import errno, os, sys, torch
        from air.data import save
        save({"w": torch.ones(16)}, sys.argv[1] + "/step-1")  # fits
        try:
            save({"w": torch.zeros(1024 * 1024)}, sys.argv[1] + "/step-2")  # 4 MiB
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            print("MESSAGE", e)
        print("LEFT", sorted(os.listdir(sys.argv[1])))
        """)
    done = run_python(["-c", script, str(root)], env=subprocess_env())
    assert done.returncode == 0, done.stderr
    message = next(l for l in done.stdout.splitlines() if l.startswith("MESSAGE "))
    assert "No space left on device" in message
    assert "the checkpoint %s/step-2" % root in message
    assert "the disk %s (tmpfs)" % small_disk in message
    assert "it needs 4.1 MiB (4259840 bytes)" in message
    assert re.search(r"has [0-9.]+ KiB \([0-9]+ bytes\) free$", message), message
    left = next(l for l in done.stdout.splitlines() if l.startswith("LEFT "))
    assert left == "LEFT %s" % [".air-checkpoint.lock", "step-1"]  # no .step-2.partial


def test_two_runs_sharing_a_checkpoint_dir_commit_one_at_a_time(tmp_path):
    """The directory's lock names the run that holds it; the second run
    waits for it instead of interleaving its commit."""
    from air.data import checkpoints
    root, release = tmp_path / "ckpt", tmp_path / "release"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import os, sys, time
            from air.data import _guard
            with _guard.CommitLock(sys.argv[1]):
                print("held", flush=True)
                while not os.path.exists(sys.argv[2]):
                    time.sleep(0.05)
            """), str(root), str(release)],
        env=subprocess_env(AIR_RUN_ID="run-one"), stdout=subprocess.PIPE, text=True)
    saver = None
    try:
        assert holder.stdout.readline().strip() == "held"
        saver = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent("""
                import sys, torch
                from air.data import save
                save({"w": torch.ones(4)}, sys.argv[1] + "/step-1")
                print("SAVED", flush=True)
                """), str(root)],
            env=subprocess_env(AIR_RUN_ID="run-two"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        waiting = saver.stderr.readline()
        assert not (root / "step-1").exists()  # nothing committed while the other run holds it
        release.write_text("")
        out, _ = saver.communicate(timeout=120)
    finally:
        release.write_text("")
        holder.wait(timeout=30)
        if saver is not None and saver.poll() is None:
            saver.kill()
    assert waiting.startswith("air.data: waiting to save into %s: run run-one on host " % root), waiting
    assert "(pid %d) is committing a checkpoint there" % holder.pid in waiting
    assert saver.returncode == 0 and out.strip() == "SAVED"
    assert [os.path.basename(p) for p in checkpoints(str(root))] == ["step-1"]
