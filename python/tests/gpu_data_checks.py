"""GPU checks of the Python side, for a machine with 2 or more NVIDIA GPUs and
torch >= 2.4 with CUDA (FSDP2's fully_shard). No pytest needed:

    PYTHONPATH=python AIR_RUN_BINARY=build/cli/air-run python3 python/tests/gpu_data_checks.py

- fsdp2: a model sharded with FSDP2 on 2 GPUs trains 3 steps and is saved with
  air.data.save (VolumeWriter); 2 fresh ranks restore it with air.data.load
  (VolumeReader) into differently initialised shards; the full weights and
  Adam state must be bit-identical.
- quickstart: the product page's quick-start example, verbatim, under each of
  the three import paths (databricks.air, serverless_gpu, air), as a script;
  it must run one rank per GPU and exit 0.

Prints PASS/FAIL per check; exit 0 when all pass, 1 when one fails, 77 (with
the reason) when the machine cannot run them. test_gpu_data.py runs this
under pytest.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_ROOT = os.path.dirname(HERE)
if PYTHON_ROOT not in sys.path:
    sys.path.insert(0, PYTHON_ROOT)

import air  # noqa: E402

SKIP = 77


# --------------------------------------------------------------------------- FSDP2

def _fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard


def _sharded_model(seed):
    import torch
    import torch.distributed as dist
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    fully_shard = _fully_shard()
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8)).cuda()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, optimizer


def _full_digests(model, optimizer):
    """sha256 of every full (unsharded) tensor of the model and optimizer state."""
    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
    model_state, optim_state = get_state_dict(
        model, optimizer, options=StateDictOptions(full_state_dict=True))
    out = {}

    def walk(prefix, value):
        if isinstance(value, torch.Tensor):
            data = value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            out[prefix] = hashlib.sha256(data).hexdigest()
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                walk("%s/%s" % (prefix, key), value[key])
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk("%s/%d" % (prefix, i), item)
        else:
            out[prefix] = repr(value)

    walk("model", model_state)
    walk("optim", optim_state)
    return out


@air.distributed(num_accelerators=2, timeout=600)
def fsdp2_train_and_save(root):
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from air.data import save
    model, optimizer = _sharded_model(seed=0)
    torch.manual_seed(100 + dist.get_rank())
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(32, 64, device="cuda")).pow(2).mean().backward()
        optimizer.step()
    model_state, optim_state = get_state_dict(model, optimizer)
    save({"model": model_state, "optim": optim_state, "step": 3},
         os.path.join(root, "step-3"), keep_last=2)
    result = _full_digests(model, optimizer)
    del model, optimizer, model_state, optim_state
    dist.destroy_process_group()
    return result


@air.distributed(num_accelerators=2, timeout=600)
def fsdp2_restore(root):
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from air.data import latest, load
    model, optimizer = _sharded_model(seed=42)
    model_state, optim_state = get_state_dict(model, optimizer)  # also creates Adam's state
    before = _full_digests(model, optimizer)
    state = {"model": model_state, "optim": optim_state, "step": 0}
    load(state, latest(root))
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    result = before, _full_digests(model, optimizer), state["step"]
    del model, optimizer, state
    dist.destroy_process_group()
    return result


def check_fsdp2():
    root = tempfile.mkdtemp(prefix="air-fsdp2-")
    try:
        return _check_fsdp2(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _check_fsdp2(root):
    saved = fsdp2_train_and_save.distributed(root)
    assert saved[0] == saved[1], "the 2 ranks see different full weights"
    restored = fsdp2_restore.distributed(root)
    for rank, (before, after, step) in enumerate(restored):
        assert before != saved[0], "rank %d started from the saved weights already" % rank
        differ = sorted(k for k in saved[0] if after.get(k) != saved[0][k])
        assert not differ, "rank %d restored different tensors: %s" % (rank, differ[:5])
        assert step == 3
    return "%d tensors bit-identical after restore on 2 ranks" % len(saved[0])


# --------------------------------------------------------------------------- quick start

# The product page's quick-start example, as printed there; only the first line
# (the import) changes between the three runs.
QUICKSTART = '''\
# By default, @distributed uses every GPU on the node your notebook is connected
# to. To use fewer, pass num_accelerators (for example, num_accelerators=2).
@distributed()
def train():
    import os
    import torch
    import torch.distributed as dist

    # Bind this process to its own GPU before training.
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}")
    dist.init_process_group("nccl")
    # ... build the model and data on `device`, then run your training loop ...
    dist.destroy_process_group()

train.distributed()
'''

IMPORTS = {
    "databricks.air": "from databricks.air import distributed",
    "serverless_gpu": "from serverless_gpu import distributed, ray_init",
    "air": "from air import distributed",
}


def check_quickstart(gpus):
    folder = tempfile.mkdtemp(prefix="air-quickstart-")
    try:
        return _check_quickstart(gpus, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _check_quickstart(gpus, folder):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_ROOT] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    notes = []
    for path_name, line in IMPORTS.items():
        script = os.path.join(folder, "quickstart_%s.py" % path_name.replace(".", "_"))
        with open(script, "w") as f:
            f.write(line + "\n\n" + QUICKSTART)
        done = subprocess.run([sys.executable, script], env=env, cwd=folder,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=300)
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        assert done.returncode == 0, "%s: exit %d\n%s" % (path_name, done.returncode, tail)
        assert "%d ranks exited 0" % gpus in done.stderr, "%s: not %d ranks:\n%s" % (
            path_name, gpus, tail)
        warned = "FutureWarning: serverless_gpu is deprecated" in done.stderr
        assert warned == (path_name == "serverless_gpu"), "%s: FutureWarning %s" % (
            path_name, "missing" if not warned else "unexpected")
        notes.append("%s: %d ranks" % (path_name, gpus))
    return "; ".join(notes)


# --------------------------------------------------------------------------- main

def why_not():
    """The reason these checks cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed for %s" % sys.executable
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return "needs 2 NVIDIA GPUs visible to torch (found %d)" % (
            torch.cuda.device_count() if torch.cuda.is_available() else 0)
    try:
        _fully_shard()
    except ImportError:
        return "torch %s has no FSDP2 fully_shard (needs >= 2.4)" % torch.__version__
    try:
        import cloudpickle  # noqa: F401  (the quick start's function lives in __main__)
    except ImportError:
        return "cloudpickle is not installed for %s" % sys.executable
    return None


def main(argv):
    reason = why_not()
    if reason:
        print("skip: %s" % reason)
        return SKIP
    import torch
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on shared hosts
    checks = [("fsdp2", check_fsdp2), ("quickstart",
                                       lambda: check_quickstart(torch.cuda.device_count()))]
    wanted = argv[1:] or [name for name, _ in checks]
    failed = 0
    for name, check in checks:
        if name not in wanted:
            continue
        try:
            print("PASS %s: %s" % (name, check()), flush=True)
        except Exception as error:  # report every check, then fail
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(error).__name__, error), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
