"""Resuming from the last checkpoint (air-run --checkpoint-dir, docs/restarts.md):
air.data.latest() on the checkpoint trees air-run's own choice is tested on
too, and real gloo ranks that save, fail, restart and resume."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO_ROOT, subprocess_env

TREES = os.path.join(REPO_ROOT, "tests", "data", "checkpoint_trees.json")


def build_tree(root, tree):
    os.makedirs(root, exist_ok=True)
    for path, content in tree.items():
        full = os.path.join(root, path)
        if content is None:
            os.makedirs(full, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(content)


@pytest.mark.usefixtures("torch")
def test_latest_agrees_with_air_run_on_every_shared_tree(tmp_path):
    # tests/unit/run_resume_test.cpp checks air-run's latest_checkpoint() on the same cases.
    from air.data import latest
    with open(TREES) as f:
        cases = json.load(f)["cases"]
    for n, case in enumerate(cases):
        root = str(tmp_path / ("case%d" % n))
        if not case.get("missing"):
            build_tree(root, case["tree"])
        want = None if case["latest"] is None else os.path.join(root, case["latest"])
        assert latest(root) == want, case["name"]


@pytest.mark.usefixtures("torch")
def test_the_defaults_come_from_the_environment(tmp_path, monkeypatch):
    import torch
    from air.data import latest, load, save
    monkeypatch.delenv("AIR_CHECKPOINT_DIR", raising=False)
    monkeypatch.delenv("AIR_RESUME_FROM", raising=False)
    with pytest.raises(ValueError, match="AIR_CHECKPOINT_DIR is not set"):
        latest()
    with pytest.raises(ValueError, match="AIR_RESUME_FROM is not set"):
        load({})
    monkeypatch.setenv("AIR_CHECKPOINT_DIR", str(tmp_path))
    assert latest() is None
    first = save({"w": torch.ones(2), "step": 1})
    second = save({"w": torch.ones(2) * 2, "step": 2})
    assert (first, second) == (str(tmp_path / "checkpoint-000001"), str(tmp_path / "checkpoint-000002"))
    assert latest() == second
    monkeypatch.setenv("AIR_RESUME_FROM", first)
    state = load({"w": torch.zeros(2), "step": 0})
    assert state["step"] == 1 and torch.equal(state["w"], torch.ones(2))


TRAIN = textwrap.dedent("""\
    import json, os, sys
    import torch
    import torch.distributed as dist
    import air.data

    dist.init_process_group("gloo")
    rank, attempt = dist.get_rank(), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    resume = os.environ.get("AIR_RESUME_FROM")
    state = {"weight": torch.zeros(3), "step": 0}
    if resume:
        air.data.load(state)                      # AIR_RESUME_FROM by default
    seen = {"attempt": attempt, "resume": resume, "step": state["step"],
            "weight": state["weight"].tolist(), "dir": os.environ.get("AIR_CHECKPOINT_DIR"),
            "world_size": dist.get_world_size()}
    with open(os.path.join(sys.argv[1], "rank%d.attempt%d.json" % (rank, attempt)), "w") as f:
        json.dump(seen, f)
    if not resume:
        state = {"weight": torch.arange(3.0) + 1, "step": 5}
        air.data.save(state)                      # <AIR_CHECKPOINT_DIR>/checkpoint-<n>
        dist.barrier()
        if rank == 1:
            sys.exit(3)                           # the other rank fails after the save
    dist.barrier()
    """)


def launch(air_run, tmp_path, ckpt, out, name, max_restarts=1):
    summary = str(tmp_path / ("%s.json" % name))
    os.makedirs(out, exist_ok=True)
    run = subprocess.run(
        [air_run, "--cpu-ranks", "2", "--max-restarts", str(max_restarts), "--checkpoint-dir", ckpt,
         "--summary", summary, "--timeout", "5m", "--python", sys.executable, str(tmp_path / "train.py"),
         out],
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=300, cwd=str(tmp_path))
    with open(summary) as f:
        return run, json.load(f)


def seen(out, rank, attempt):
    with open(os.path.join(out, "rank%d.attempt%d.json" % (rank, attempt))) as f:
        return json.load(f)


@pytest.mark.usefixtures("torch")
def test_a_restart_and_a_new_launch_resume_from_the_last_complete_checkpoint(air_run, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    ckpt = "ckpt"  # relative to the working directory, created by air-run
    saved = str(tmp_path / "ckpt" / "checkpoint-000001")

    # Attempt 0 saves, then rank 1 fails; attempt 1 resumes on every rank.
    out = str(tmp_path / "first")
    run, summary = launch(air_run, tmp_path, ckpt, out, "first")
    assert run.returncode == 0, run.stderr
    assert "attempt 1 resumes from %s (AIR_RESUME_FROM)" % saved in run.stderr
    attempts = summary["outcome"]["attempts"]
    assert [a["resumed_from"] for a in attempts] == [None, saved]
    assert summary["spec"]["settings"]["checkpoint_dir"]["value"] == str(tmp_path / "ckpt")
    for rank in (0, 1):
        before, after = seen(out, rank, 0), seen(out, rank, 1)
        assert before["resume"] is None and before["dir"] == str(tmp_path / "ckpt")
        assert after["resume"] == saved
        assert after["step"] == 5 and after["weight"] == [1.0, 2.0, 3.0]

    # A newer checkpoint whose commit never happened (no marker; a save killed
    # midway leaves only its hidden work directory) is never offered.
    for name in ("checkpoint-000002", ".checkpoint-000003.partial"):
        os.makedirs(str(tmp_path / "ckpt" / name))
        (tmp_path / "ckpt" / name / ".metadata").write_text("half")

    # A new launch of the same job (a requeued Slurm job): attempt 0 resumes.
    out = str(tmp_path / "requeued")
    run, summary = launch(air_run, tmp_path, ckpt, out, "requeued", max_restarts=0)
    assert run.returncode == 0, run.stderr
    assert [a["resumed_from"] for a in summary["outcome"]["attempts"]] == [saved]
    for rank in (0, 1):
        assert seen(out, rank, 0)["resume"] == saved and seen(out, rank, 0)["step"] == 5


def test_without_a_complete_checkpoint_nothing_is_offered_and_dry_run_says_so(air_run, tmp_path):
    ckpt = tmp_path / "ckpt"
    build_tree(str(ckpt), {"step-1/.metadata": "m", ".step-2.partial/.air-checkpoint": "{\"sequence\": 2}"})
    run = subprocess.run(
        [air_run, "--dry-run", "--cpu-ranks", "1", "--checkpoint-dir", str(ckpt), "--no-python", "true"],
        env=subprocess_env(AIR_RESUME_FROM="/stale"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "checkpoints in %s; resume from none (no complete checkpoint)" % ckpt in run.stdout
    assert "AIR_CHECKPOINT_DIR=%s" % ckpt in run.stdout
    assert "AIR_RESUME_FROM" not in run.stdout
    build_tree(str(ckpt), {"step-1/.air-checkpoint": "{\"format\": 1, \"sequence\": 1}"})
    run = subprocess.run(
        [air_run, "--dry-run", "--cpu-ranks", "1", "--checkpoint-dir", str(ckpt), "--no-python", "true"],
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=60)
    assert "resume from %s" % (ckpt / "step-1") in run.stdout
    assert "AIR_RESUME_FROM=%s" % (ckpt / "step-1") in run.stdout


def test_a_directory_that_cannot_be_made_is_refused_with_its_origin(air_run, tmp_path):
    (tmp_path / "file").write_text("x")
    run = subprocess.run(
        [air_run, "--cpu-ranks", "1", "--no-python", "true"],
        env=subprocess_env(AIR_RUN_CHECKPOINT_DIR=str(tmp_path / "file" / "ckpt")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert run.returncode == 2
    assert "checkpoint_dir (env AIR_RUN_CHECKPOINT_DIR): cannot create directory" in run.stderr


PREEMPTED = textwrap.dedent("""\
    import os, sys, time
    import torch
    import torch.distributed as dist
    import air
    import air.data

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    open(os.path.join(sys.argv[1], "started%d" % rank), "w").close()
    while True:
        optimizer.zero_grad()
        model(torch.ones(3)).sum().backward()
        optimizer.step()                          # counted: air.steps()
        time.sleep(0.02 * (rank + 1))             # ranks at different speeds
        if air.should_stop():
            air.data.save({"weight": model.weight.detach(), "step": air.steps()})
            sys.exit(0)
    """)


@pytest.mark.usefixtures("torch")
def test_a_preempted_run_records_the_checkpoint_its_ranks_saved(air_run, tmp_path):
    import signal
    import time
    (tmp_path / "train.py").write_text(PREEMPTED)
    ckpt, out, summary = str(tmp_path / "ckpt"), str(tmp_path / "out"), str(tmp_path / "summary.json")
    os.makedirs(out)
    proc = subprocess.Popen(
        [air_run, "--cpu-ranks", "2", "--checkpoint-dir", ckpt, "--summary", summary, "--grace-period", "60s",
         "--python", sys.executable, str(tmp_path / "train.py"), out],
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
        cwd=str(tmp_path))
    try:
        deadline = time.monotonic() + 120
        while len(os.listdir(out)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # some steps
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    with open(summary) as f:
        preemption = json.load(f)["outcome"]["preemption"]
    assert preemption["checkpoint"] == os.path.join(ckpt, "checkpoint-000001"), preemption
    assert "latest checkpoint: " + preemption["checkpoint"] in err
    import air.data
    state = air.data.load({"weight": torch_zeros(), "step": 0}, path=preemption["checkpoint"])
    assert state["step"] == preemption["stop_step"], (state, preemption)


def torch_zeros():
    import torch
    return torch.zeros(1, 3)


STEPS = textwrap.dedent("""\
    import json, os, sys
    import torch
    import torch.distributed as dist
    import air, air.data

    dist.init_process_group("gloo")
    rank, attempt = dist.get_rank(), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    state = {"weight": torch.zeros(1, 3)}
    seen = {"before_load": air.steps()}
    if os.environ.get("AIR_RESUME_FROM"):
        air.data.load(state)
    seen["after_load"] = air.steps()
    for _ in range(2 if attempt else 7):
        opt.zero_grad()
        model(torch.ones(2, 3)).sum().backward()
        opt.step()                                # counted by air-run's shim
    seen["after_steps"] = air.steps()
    with open(os.path.join(sys.argv[1], "rank%d.attempt%d.json" % (rank, attempt)), "w") as f:
        json.dump(seen, f)
    if not attempt:
        air.data.save({"weight": model.weight.detach().clone()})
        dist.barrier()
        if rank == 1:
            sys.exit(3)
    dist.barrier()
    """)


@pytest.mark.usefixtures("torch")
def test_steps_go_on_from_the_checkpoint_a_rank_resumes_from(air_run, tmp_path):
    # Attempt 0 makes 7 optimizer steps and saves; attempt 1 loads that
    # checkpoint and must count on from 7, not from 0 (issue 32).
    (tmp_path / "train.py").write_text(STEPS)
    out = str(tmp_path / "out")
    run, summary = launch(air_run, tmp_path, "ckpt", out, "steps")
    assert run.returncode == 0, run.stderr
    with open(str(tmp_path / "ckpt" / "checkpoint-000001" / ".air-checkpoint")) as f:
        assert json.load(f)["steps"] == 7
    for rank in (0, 1):
        assert seen(out, rank, 0) == {"before_load": 0, "after_load": 0, "after_steps": 7}
        assert seen(out, rank, 1) == {"before_load": 0, "after_load": 7, "after_steps": 9}
