"""What one rank observes of its own process, for the warm start's
differential test (test_warm_observables.sh): run fresh (--no-preload) and
warm (--preload torch), first start and restart, and compared key by key.
Writes $PROBE_OUT/obs.<attempt>.<rank>.json; attempt 0's rank 1 then fails,
so that the run restarts once."""
import os

# A variable the script sets itself before it imports torch, and one it
# reads: both must be what a fresh interpreter has.
os.environ["AIR_PROBE_SET_BEFORE_TORCH"] = "yes"
torch_before = "torch" in __import__("sys").modules

import hashlib  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.utils.data  # noqa: E402

try:
    import numpy
except ImportError:
    numpy = None


def digest(value):
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def descriptors():
    """Standard streams by number and kind; past them, how many of each
    kind (what torch opened at import gets another number warm), sockets
    left out."""
    low, kinds = [], {}
    for f in os.listdir("/proc/self/fd"):
        try:
            t = os.readlink("/proc/self/fd/" + f)
        except OSError:
            continue
        if t.startswith("socket:"):
            continue
        kind = t if t.startswith("anon_inode:") else "file" if t.startswith("/") else t.split(":")[0]
        if int(f) < 3:
            low.append((int(f), kind))
        else:
            kinds[kind] = kinds.get(kind, 0) + 1
    return [sorted(low), sorted(kinds.items())]


def status_masks():
    """The kernel's view of the signals: blocked, ignored, caught."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("SigBlk", "SigIgn", "SigCgt"):
                out[name] = value.strip()
    return out


def dispositions():
    out = {}
    for sig in sorted(set(signal.Signals), key=int):
        try:
            handler = signal.getsignal(sig)
        except (ValueError, OSError):
            continue
        if handler in (signal.SIG_DFL, signal.SIG_IGN) or handler is None:
            out[sig.name] = str(handler)
        else:
            out[sig.name] = getattr(handler, "__qualname__", type(handler).__name__)
    return out


def rlimits():
    return {name: resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource))
            if name.startswith("RLIMIT_")}


def between_runs(value):
    """`value` with what differs between two runs (the run's folder, its
    id) replaced by a placeholder."""
    folder = os.path.dirname(os.environ.get("AIR_RESULT_FILE", ""))
    if folder:
        value = value.replace(folder, "<run folder>")
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return value.replace(run_id, "<run>") if run_id else value


def environment():
    """Every variable, what differs between two runs replaced."""
    port = os.environ.get("MASTER_PORT", "")
    out = {}
    for name, value in os.environ.items():
        value = between_runs(value)
        if port and name in ("MASTER_PORT", "AIR_RUN_CONTROL_PORT"):
            value = "<port>"
        out[name] = value
    return out


mask = os.umask(0)
os.umask(mask)
cuda = torch.cuda.is_available()
obs = {
    # Must be the same fresh and warm (rank by rank, attempt by attempt).
    "same": {
        "argv": sys.argv,
        "orig_argv_tail": getattr(sys, "orig_argv", [])[-len(sys.argv):],
        "cwd": os.getcwd(),
        "file": __file__,
        "name": __name__,
        "path": [between_runs(p) for p in sys.path],
        "torch_file": torch.__file__,
        "random_file": random.__file__,
        "umask": mask,
        "rlimits": rlimits(),
        "dispositions": dispositions(),
        "masks": status_masks(),
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "fds": descriptors(),
        "hash_randomization": sys.flags.hash_randomization,
        "environ": environment(),
        "set_before_torch": os.environ.get("AIR_PROBE_SET_BEFORE_TORCH"),
        "torch_threads": torch.get_num_threads(),
        "cuda_available": cuda,
        "cuda_initialized": torch.cuda.is_initialized(),
        "leader": os.getpgid(0) == os.getpid(),
    },
    # Must differ between every rank and attempt, fresh as warm.
    "distinct": {
        "random": digest(random.getstate()),
        "numpy": digest(numpy.random.get_state()[1].tolist()) if numpy is not None else None,
        "torch_seed": torch.initial_seed(),
        "torch_state": digest(torch.get_rng_state().tolist()),
        # CUDA's generators are seeded from entropy when first used (torch
        # 2.11 on an H100: a different seed in every fresh process), so a
        # warm rank's must be its own too. None without CUDA.
        "cuda_seed": torch.cuda.initial_seed() if cuda else None,
    },
    # Known to differ (docs/restarts.md): recorded, not compared.
    "known": {"torch_before": torch_before, "hash": hash("air-run probe")},
}
# Drawn last: a DataLoader's base seed comes from torch's generator.
obs["distinct"]["dataloader_base_seed"] = iter(torch.utils.data.DataLoader(range(4)))._base_seed
obs["distinct"]["cuda_draw"] = torch.rand(2, device="cuda").tolist() if cuda else None

attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
rank = os.environ["RANK"]
def path(of_rank):
    return os.path.join(os.environ["PROBE_OUT"], "obs.%s.%s.json" % (attempt, of_rank))

# Written whole, then renamed: air-run stops rank 0 when rank 1 fails, and a
# rank stopped mid-write would leave half a file.
with open(path(rank) + ".part", "w") as f:
    json.dump(obs, f, indent=1, sort_keys=True)
os.rename(path(rank) + ".part", path(rank))
if attempt == "0" and rank == "1":
    # Fail only once rank 0 has written its observations: on a loaded
    # machine rank 0 is still importing torch when rank 1 gets here.
    import time
    deadline = time.monotonic() + 120
    while not os.path.exists(path(0)) and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(3)
