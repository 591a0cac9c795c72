"""The shim's patches: make torch count into the progress page, optimizer
steps, torch.distributed collectives and DDP's gradient all-reduce, keep the
stop protocol's SIGTERM handler in DataLoader workers, through an import
hook that patches each module as it loads.
"""
import sys

from air_run_slots import _AIR_COLLECTIVES

# ---- air-run embeds this file from the next line on ----
# DDP's gradient all-reduce: the collective op number air-run names it by.
_AIR_OP_DDP = _AIR_COLLECTIVES.index("ddp_all_reduce") + 1
# An async collective's wait (`dist.all_reduce(t, async_op=True).wait()`).
_AIR_OP_WORK_WAIT = _AIR_COLLECTIVES.index("work_wait") + 1


def _air_run_patch_optimizers(module, progress):
    """Counts optimizer steps: torch 2's global post-step hook where there is
    one, else a wrapper around each optimizer class's step (torch 1.x)."""
    optimizer = getattr(module, "Optimizer", None)
    if optimizer is None:
        return

    def counted(opt):
        n = opt.__dict__.get("_air_run_steps", 0) + 1
        opt.__dict__["_air_run_steps"] = n
        progress.count(id(opt), n)

    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None:
        register(lambda opt, args, kwargs: counted(opt))
        return

    import functools

    def wrap_class(cls):
        step = cls.__dict__.get("step")
        if step is None or getattr(step, "_air_run_counted", False):
            return

        @functools.wraps(step)
        def step_counted(self, *args, **kwargs):
            if self.__dict__.get("_air_run_in_step"):  # super().step() of a subclass
                return step(self, *args, **kwargs)
            self.__dict__["_air_run_in_step"] = True
            try:
                out = step(self, *args, **kwargs)
            finally:
                self.__dict__["_air_run_in_step"] = False
            counted(self)
            return out

        step_counted._air_run_counted = True
        setattr(cls, "step", step_counted)

    init = optimizer.__init__

    @functools.wraps(init)
    def init_counted(self, *args, **kwargs):
        init(self, *args, **kwargs)
        for cls in type(self).__mro__:
            if cls is optimizer or not issubclass(cls, optimizer):
                continue
            wrap_class(cls)

    optimizer.__init__ = init_counted


def _air_run_patch_collectives(module, progress):
    """Times the collectives of torch.distributed.distributed_c10d, before
    torch.distributed re-exports them, and arms the Flight Recorder dump
    once a process group exists."""
    for op, name in enumerate(_AIR_COLLECTIVES, start=1):
        fn = getattr(module, name, None)
        if callable(fn) and not getattr(fn, "_air_run_timed", False):
            setattr(module, name, progress.timed(fn, op))
    # An async collective returns a Work at once; the rank waits for it in
    # Work.wait(), which is timed as a collective of its own: a rank there is
    # waiting, and each wait that returns is progress. The synchronous
    # collectives call it inside their own timing, where it counts once.
    try:
        work = getattr(sys.modules.get("torch._C._distributed_c10d"), "Work", None)
        wait = getattr(work, "wait", None)
        if callable(wait) and not getattr(wait, "_air_run_timed", False):
            work.wait = progress.timed(wait, _AIR_OP_WORK_WAIT)
    except Exception:  # a torch whose Work takes no attribute: uncounted waits
        pass
    init = getattr(module, "init_process_group", None)
    if init is None:
        return
    import functools

    @functools.wraps(init)
    def init_watched(*args, **kwargs):
        out = init(*args, **kwargs)
        try:
            import torch

            c10d = torch._C._distributed_c10d
            dump = getattr(c10d, "_dump_nccl_trace_json", None) or getattr(c10d, "_dump_fr_trace_json", None)
            if dump is not None and not getattr(progress, "_fr_watched", False):
                progress._fr_watched = True

                def dump_all():
                    try:
                        return dump(includeCollectives=True, onlyActive=False)
                    except TypeError:  # a release with other keyword names
                        return dump()

                progress.watch_flight_recorder(dump_all)
        except Exception:
            pass
        return out

    module.init_process_group = init_watched


def _air_run_patch_ddp(module, progress):
    """Times DDP's gradient all-reduce, which PyTorch's C++ reducer runs
    inside backward() without calling torch.distributed's Python functions:
    a backward() after the forward of a DDP model that syncs gradients over
    gloo counts as one collective, `ddp_all_reduce`. The reducer waits there
    for every rank's buckets, so a rank ahead of a straggler spends the
    difference inside it, as with an explicit all_reduce. Nothing of DDP is
    replaced (no communication hook: the gradients stay bit for bit DDP's).
    Not on NCCL: there backward() returns before the GPU has reduced
    anything, so it would time nothing."""
    ddp = getattr(module, "DistributedDataParallel", None)
    autograd = sys.modules.get("torch.autograd")
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if ddp is None or autograd is None or c10d is None or not callable(getattr(autograd, "backward", None)):
        return
    import functools

    forward = ddp.forward

    @functools.wraps(forward)
    def forward_noted(self, *args, **kwargs):
        on_gloo = self.__dict__.get("_air_run_on_gloo")
        if on_gloo is None:
            try:
                on_gloo = c10d.get_backend(self.process_group) == "gloo"
            except Exception:
                on_gloo = False
            self.__dict__["_air_run_on_gloo"] = on_gloo
        if on_gloo and getattr(self, "require_backward_grad_sync", True):  # not under no_sync()
            progress._ddp_forward = True
        return forward(self, *args, **kwargs)

    def after_ddp_forward():
        """True once per reducing DDP forward: the backward() that follows."""
        noted = progress._ddp_forward
        progress._ddp_forward = False
        return noted

    ddp.forward = forward_noted
    autograd.backward = progress.timed(autograd.backward, _AIR_OP_DDP, only_if=after_ddp_forward)


def _air_run_listening(port):
    """Whether a socket of this network namespace listens on TCP `port`
    (IPv4 or IPv6), read from /proc/net: no connection is made, so the
    server never sees a probe. None when /proc/net cannot be read."""
    want = ":%04X " % port
    seen = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split(None, 4)
                    # local_address ends in :PORT (hex); state 0A is LISTEN
                    if len(fields) > 3 and (fields[1] + " ").endswith(want) and fields[3] == "0A":
                        return True
            seen = True
        except OSError:
            continue
    return False if seen else None


def _air_run_wait_for_store(port, timeout_s, sleep=None, listening=None):
    """Waits until `port` listens, at most timeout_s seconds; returns whether
    it does. A TCPStore client that tries before the server listens waits
    before it tries again (torch 1.13: a second; 2.6: a few hundred ms, at
    random), so ranks that start together often lose that time to rank 0
    being a moment late; this looks every 2 ms instead (50 ms after 2 s,
    0.5 s after 30 s), without connecting."""
    import time

    sleep = sleep or time.sleep
    listening = listening or _air_run_listening
    start = time.monotonic()
    pause = 0.002
    while True:
        got = listening(port)
        if got is None:
            return False  # no /proc/net: torch's own retries, as before
        if got:
            return True
        waited = time.monotonic() - start
        if waited >= timeout_s:
            return False
        sleep(min(pause, timeout_s - waited))
        # A rank 0 busy before init_process_group (loading data): look less
        # often, as /proc/net/tcp grows with the host's connections.
        if waited > 30.0:
            pause = 0.5
        elif waited > 2.0:
            pause = 0.05


def _air_run_is_local_address(host):
    """Whether `host` names an address of this machine: one of the addresses
    it resolves to can be bound here. False when it cannot be resolved.
    "localhost" (and any name under it) is this machine's by definition
    (RFC 6761), also where nothing resolves it (no /etc/hosts)."""
    import socket

    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return False
    for family, kind, proto, _name, address in infos:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.bind((address[0], 0) + tuple(address[2:]))
            return True
        except OSError:
            continue
    return False


def _air_run_store_is_local(host, rank):
    """Whether the store's server, rank 0's, runs on this node: the node's
    first global rank (RANK - LOCAL_RANK) is 0 and `host` is an address of
    this machine. Not for the agent's store (TORCHELASTIC_USE_AGENT_STORE),
    which is up before any rank starts."""
    import os

    try:
        first = int(os.environ["RANK"]) - int(os.environ["LOCAL_RANK"])
    except (KeyError, ValueError):
        return False
    if rank == 0 or first != 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return False
    return isinstance(host, str) and _air_run_is_local_address(host)


def _air_run_store_timeout(host, port, seconds):
    """The error of a store that never listened within init_process_group's
    timeout: torch's own kind (DistNetworkError where torch has it, else the
    TimeoutError of torch 1.13's TCPStore), in torch's words."""
    kind = TimeoutError
    try:
        import torch.distributed as dist

        kind = getattr(dist, "DistNetworkError", TimeoutError)
    except Exception:
        pass
    return kind("The client socket has timed out after %gs while trying to connect to (%s, %d): "
                "nothing listened there (rank 0's store)" % (seconds, host, port))


def _air_run_patch_rendezvous(module, progress):
    """Two things of torch.distributed.rendezvous's _create_c10d_store
    (host, port, rank, world_size, timeout[, use_libuv]), the store that
    init_process_group's env:// and tcp:// methods make, its server in rank 0:

    - A rank other than 0 on rank 0's node, the store's host an address of
      this machine, waits until the server listens before it connects
      (_air_run_wait_for_store): torch's client otherwise waits up to a
      second after each refused connection.
    - torch 2.4 and later ask for the libuv TCPStore by default; a torch built
      without libuv (Debian 13's python3-torch 2.6) then fails every
      init_process_group with "use_libuv was requested but PyTorch was build
      without libuv support". That one error is retried with the classic
      store, as USE_LIBUV=0 would; a torch with libuv never sees the
      difference."""
    create = getattr(module, "_create_c10d_store", None)
    if create is None:
        return

    def create_store(*args, **kwargs):
        gone = None
        try:
            given = dict(zip(("hostname", "port", "rank", "world_size", "timeout"), args), **kwargs)
            host, port, rank, timeout = (given.get("hostname"), given.get("port"), given.get("rank"),
                                         given.get("timeout"))
            waits = isinstance(port, int) and port > 0 and isinstance(rank, int)
            if waits and _air_run_store_is_local(host, rank):
                import time

                seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else 1800.0
                start = time.monotonic()
                up = _air_run_wait_for_store(port, seconds)
                waited = time.monotonic() - start
                # The wait is part of init_process_group's timeout, not before
                # it: torch's connect gets what is left (10 s and rank 0 never
                # listening gave up after 19 s).
                if hasattr(timeout, "total_seconds") and waited >= 0.5:
                    if up is False and waited >= seconds:
                        gone = (host, port, seconds)
                    else:
                        left = max(timeout - type(timeout)(seconds=waited), type(timeout)(seconds=1))
                        if len(args) > 4:
                            args = args[:4] + (left,) + args[5:]
                        else:
                            kwargs["timeout"] = left
        except Exception:
            pass  # never in the way of torch's own connect
        if gone is not None:
            raise _air_run_store_timeout(*gone)
        try:
            return create(*args, **kwargs)
        except RuntimeError as e:
            if "without libuv support" not in str(e):
                raise
            if len(args) > 5:  # (host, port, rank, world_size, timeout, use_libuv)
                args = args[:5] + (False,) + args[6:]
            else:
                kwargs["use_libuv"] = False
            return create(*args, **kwargs)

    module._create_c10d_store = create_store


def _air_run_patch_worker_signals(module, progress):
    """A DataLoader worker sets torch's own SIGTERM handler in C as it starts
    (it dies unless its parent sent the signal): the shim's handler, which
    defers Slurm's SIGTERM while the rank polls should_stop(), is put back
    after it (_AirRunSigterm.rearm)."""
    set_handlers = getattr(module, "_set_worker_signal_handlers", None)
    if set_handlers is None:
        return
    import functools

    @functools.wraps(set_handlers)
    def set_and_rearm(*args, **kwargs):
        out = set_handlers(*args, **kwargs)
        progress.sigterm.rearm()
        return out

    module._set_worker_signal_handlers = set_and_rearm


class _AirRunImportHook:
    """Patches torch's optimizer and c10d modules right after they load, so
    that counting costs nothing for programs that never import torch."""

    def __init__(self, progress):
        self._progress = progress
        self._patches = {
            "torch.optim.optimizer": _air_run_patch_optimizers,
            "torch.distributed.distributed_c10d": _air_run_patch_collectives,
            "torch.nn.parallel.distributed": _air_run_patch_ddp,
            "torch.distributed.rendezvous": _air_run_patch_rendezvous,
            "torch.utils.data._utils.signal_handling": _air_run_patch_worker_signals,
        }

    def find_spec(self, name, path=None, target=None):
        patch = self._patches.get(name)
        if patch is None:
            return None
        import importlib.machinery

        del self._patches[name]
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        progress = self._progress

        def exec_and_patch(module):
            exec_module(module)
            try:
                patch(module, progress)
            except Exception:
                pass

        loader.exec_module = exec_and_patch
        return spec

    def patch_loaded(self):
        """Patches the modules imported before the rank began (a warm start's
        interpreter imported torch before forking it). torch.distributed
        re-exported c10d's functions when it loaded: those names are pointed
        at the patched ones too."""
        for name in [n for n in self._patches if n in sys.modules]:
            module = sys.modules[name]
            patch = self._patches.pop(name)
            before = dict(vars(module))
            try:
                patch(module, self._progress)
            except Exception:
                continue
            exports = sys.modules.get(name.rpartition(".")[0])
            if exports is None:
                continue
            for attr, old in before.items():
                new = getattr(module, attr, old)
                if new is not old and getattr(exports, attr, None) is old:
                    setattr(exports, attr, new)
