#include "core/run/stacks.hpp"

namespace air {

std::string_view stack_shim_source() {
  return R"PY(# Written by air-run for one run. Arms faulthandler so that air-run can ask
# this rank for every thread's Python stack (on a timeout, a hang, or on
# Ctrl-\), counts the rank's training steps and collectives in a page shared
# with air-run (see _air_run_progress below), then runs the sitecustomize this
# file shadows, if there is one.
import os
import sys


def _air_run_arm():
    path = os.environ.get("AIR_RUN_STACK_FILE")
    signum = os.environ.get("AIR_RUN_STACK_SIGNAL")
    if not path or not signum:
        return
    try:
        # Only the rank itself: its children (DataLoader workers, subprocesses)
        # inherit the environment but are not the leaders of the rank's group.
        if os.getpid() != os.getpgid(0):
            return
        import faulthandler

        stack_file = open(path, "a", buffering=1)
        faulthandler.register(int(signum), file=stack_file, all_threads=True, chain=False)
        sys._air_run_stack_file = stack_file  # open for the life of the process
    except Exception:
        pass


def _air_run_chain():
    here = os.path.dirname(os.path.abspath(__file__))
    me = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import sitecustomize  # noqa: F401  the next one on the path
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
    finally:
        sys.path[:] = saved
        # Without another sitecustomize, this module must be back in
        # sys.modules: the import that runs it looks itself up there at the
        # end (Python 3.11 raised KeyError: 'sitecustomize').
        if "sitecustomize" not in sys.modules and me is not None:
            sys.modules["sitecustomize"] = me



# Slots of the progress page: little-endian 64-bit integers, 8 bytes apart,
# the same numbers as core/run/progress.hpp.
_AIR_SLOT_STEPS = 1
_AIR_SLOT_COLL_SEQ = 5
_AIR_SLOT_COLL_ENTERED = 6
_AIR_SLOT_STOP_STEP = 8
_AIR_SLOT_STOP_REQUESTED = 9
_AIR_SLOT_STOP_DEADLINE = 10
_AIR_SLOT_POLLS_STOP = 11
_AIR_SLOT_FR_REQUEST = 12
_AIR_SLOT_FR_DONE = 13
_AIR_SLOT_PID = 14
_AIR_SLOT_FR_ARMED = 15
# The collectives timed, in the order of core/run/progress.cpp's table.
_AIR_COLLECTIVES = (
    "all_reduce", "broadcast", "barrier", "all_gather", "all_gather_into_tensor",
    "reduce_scatter", "reduce_scatter_tensor", "reduce", "all_to_all", "all_to_all_single",
    "gather", "scatter", "all_gather_object", "broadcast_object_list", "send",
    "recv", "monitored_barrier", "ddp_all_reduce")
_AIR_OP_DDP = len(_AIR_COLLECTIVES)


class _AirRunProgress:
    """Counts steps and collectives into the page air-run reads (no system
    call per count), and answers air-run's stop and dump requests."""

    def __init__(self, mm, path):
        import struct
        import time

        self._mm = mm
        self._path = path
        self._q = struct.Struct("<Q")
        self._step_slots = struct.Struct("<QQQQ")  # steps, last_step_ns, busy_ns, busy_steps
        self._coll_slots = struct.Struct("<QQQ")  # coll_seq, coll_entered_ns, coll_op
        self._now = time.monotonic_ns
        self._wall = time.time_ns
        self.steps = 0
        self._by_source = {}
        self._last_step = 0
        self._busy = 0
        self._busy_steps = 0
        self._coll_ns = 0
        self._coll_ns_at_step = 0
        self._coll_seq = 0
        self._inside = 0
        self._ddp_forward = False
        self._polled = False
        self._q.pack_into(mm, 8 * _AIR_SLOT_PID, os.getpid())

    # Steps ------------------------------------------------------------------
    def count(self, source, n):
        """Source `source` (an optimizer, or air.step) has made `n` steps; the
        rank's count is the largest of its sources' (two optimizers stepping
        once each is one training step)."""
        self._by_source[source] = n
        if n <= self.steps:
            return
        now = self._now()
        if self._last_step:
            self._busy += (now - self._last_step) - (self._coll_ns - self._coll_ns_at_step)
            self._busy_steps += 1
        self.steps = n
        self._last_step = now
        self._coll_ns_at_step = self._coll_ns
        self._step_slots.pack_into(self._mm, 8 * _AIR_SLOT_STEPS, n, now, max(self._busy, 0),
                                   self._busy_steps)

    def step(self):
        """air.step(): one more step of a loop without an optimizer."""
        self.count("air.step", self._by_source.get("air.step", 0) + 1)

    # Collectives ------------------------------------------------------------
    def timed(self, fn, op, only_if=None):
        """fn, timed as collective `op`; with `only_if`, only the calls for
        which only_if() says so."""
        import functools

        progress = self

        @functools.wraps(fn)
        def collective(*args, **kwargs):
            # A collective built on another one counts once.
            if progress._inside or (only_if is not None and not only_if()):
                return fn(*args, **kwargs)
            began = progress.enter(op)
            try:
                return fn(*args, **kwargs)
            finally:
                progress.leave(began)

        collective._air_run_timed = True
        return collective

    def enter(self, op):
        """The rank enters collective `op` (1-based, _AIR_COLLECTIVES);
        returns when, for leave()."""
        self._inside = 1
        self._coll_seq += 1
        began = self._now()
        self._coll_slots.pack_into(self._mm, 8 * _AIR_SLOT_COLL_SEQ, self._coll_seq, began, op)
        return began

    def leave(self, began):
        self._coll_ns += self._now() - began
        self._q.pack_into(self._mm, 8 * _AIR_SLOT_COLL_ENTERED, 0)
        self._inside = 0

    # Stop requests ----------------------------------------------------------
    def should_stop(self):
        mm = self._mm
        if not self._polled:
            self._polled = True
            self._q.pack_into(mm, 8 * _AIR_SLOT_POLLS_STOP, 1)
        if not self._q.unpack_from(mm, 8 * _AIR_SLOT_STOP_REQUESTED)[0]:
            return False
        return self.steps >= self._q.unpack_from(mm, 8 * _AIR_SLOT_STOP_STEP)[0]

    def stop_deadline(self):
        mm = self._mm
        if not self._q.unpack_from(mm, 8 * _AIR_SLOT_STOP_REQUESTED)[0]:
            return None
        deadline = self._q.unpack_from(mm, 8 * _AIR_SLOT_STOP_DEADLINE)[0]
        return max(0.0, (deadline - self._wall()) / 1e9) if deadline else None

    def stop_step(self):
        if not self._q.unpack_from(self._mm, 8 * _AIR_SLOT_STOP_REQUESTED)[0]:
            return None
        return self._q.unpack_from(self._mm, 8 * _AIR_SLOT_STOP_STEP)[0]

    # Flight Recorder --------------------------------------------------------
    def watch_flight_recorder(self, dump):
        """Starts a daemon thread that answers air-run's dump requests with
        `dump()` (bytes). A thread, because a hung rank's main thread is stuck
        in a collective and never runs a Python signal handler."""
        import threading
        import time

        def loop():
            answered = self._q.unpack_from(self._mm, 8 * _AIR_SLOT_FR_REQUEST)[0]
            while True:
                time.sleep(0.5)
                asked = self._q.unpack_from(self._mm, 8 * _AIR_SLOT_FR_REQUEST)[0]
                if asked == answered:
                    continue
                answered = asked
                try:
                    data = dump()
                    tmp = self._path + ".fr.json.tmp"
                    with open(tmp, "wb") as f:
                        f.write(data if isinstance(data, bytes) else data.encode())
                    os.replace(tmp, self._path + ".fr.json")
                except Exception as e:  # keep the rank alive whatever torch says
                    try:
                        with open(self._path + ".fr.json", "w") as f:
                            f.write('{"error": %r}' % str(e)[:200].replace("'", ""))
                    except OSError:
                        pass
                self._q.pack_into(self._mm, 8 * _AIR_SLOT_FR_DONE, asked)

        threading.Thread(target=loop, name="air-run-flight-recorder", daemon=True).start()
        self._q.pack_into(self._mm, 8 * _AIR_SLOT_FR_ARMED, 1)


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


class _AirRunImportHook:
    """Patches torch's optimizer and c10d modules right after they load, so
    that counting costs nothing for programs that never import torch."""

    def __init__(self, progress):
        self._progress = progress
        self._patches = {
            "torch.optim.optimizer": _air_run_patch_optimizers,
            "torch.distributed.distributed_c10d": _air_run_patch_collectives,
            "torch.nn.parallel.distributed": _air_run_patch_ddp,
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


def _air_run_progress():
    path = os.environ.get("AIR_RUN_PROGRESS_FILE")
    if not path:
        return
    try:
        if os.getpid() != os.getpgid(0):
            return
        import mmap

        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            mm = mmap.mmap(fd, 4096)
        finally:
            os.close(fd)
        progress = _AirRunProgress(mm, path)
        sys._air_run_progress = progress
        hook = _AirRunImportHook(progress)
        sys.meta_path.insert(0, hook)
        hook.patch_loaded()
    except Exception:
        pass


def _air_run_mlflow_apply(path):
    """Applies the run's file: NUL-terminated entries, NAME takes a variable
    out, NAME=VALUE sets it (MLFLOW_RUN_ID & co.; with no run, they are
    taken out)."""
    with open(path, "rb") as f:  # decoded as Python decodes the environment
        entries = [e.partition("=") for e in os.fsdecode(f.read()).split("\0") if e]
    for name, is_set, value in entries:
        if is_set:
            os.environ[name] = value
        else:
            os.environ.pop(name, None)


def _air_run_mlflow_run():
    """Hands this rank the MLflow run air-run creates while the ranks start:
    the file named by AIR_RUN_MLFLOW_RUN_FILE, written once the creation is
    over. Not waited for here: the rank's own code goes on (importing torch
    takes seconds, which the creation overlaps) until it first looks for the
    run: `import mlflow`, a read of an MLFLOW_* variable, any look at the
    whole environment (a copy, a loop over it), or a new process, which
    inherits the environment. Then it waits for the file, at most
    AIR_RUN_MLFLOW_RUN_WAIT seconds from the rank's start, applies it and
    takes every hook out again. Popped first, so the rank's own subprocesses
    do not wait again; any failure leaves the rank untracked, never broken."""
    path = os.environ.pop("AIR_RUN_MLFLOW_RUN_FILE", None)
    wait = os.environ.pop("AIR_RUN_MLFLOW_RUN_WAIT", None)
    if not path:
        return
    try:
        import _thread
        import time

        deadline = time.monotonic() + float(wait or 0)
        if os.path.exists(path):  # written by a rename: whole once there
            _air_run_mlflow_apply(path)
            return
        environ_class = type(os.environ)
        lock = _thread.allocate_lock()
        undo = []  # (owner, name, original)
        done = []

        def settle():
            if done:
                return
            with lock:  # another thread that asks meanwhile waits for the same file
                if done:
                    return
                os.environ.__class__ = environ_class
                for owner, name, original in undo:
                    setattr(owner, name, original)
                try:
                    sys.meta_path.remove(finder)
                except ValueError:
                    pass
                try:
                    while not os.path.exists(path):
                        if time.monotonic() >= deadline:
                            return
                        time.sleep(0.002)
                    _air_run_mlflow_apply(path)
                except Exception:
                    pass
                finally:
                    done.append(True)

        class _AirRunEnviron(environ_class):
            def __getitem__(self, key):
                if isinstance(key, str) and key.startswith("MLFLOW_"):
                    settle()
                return environ_class.__getitem__(self, key)

            def __iter__(self):
                settle()
                return environ_class.__iter__(self)

            def __len__(self):
                settle()
                return environ_class.__len__(self)

            def copy(self):
                settle()
                return environ_class.copy(self)

        class _AirRunMlflowFinder:
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name == "mlflow" or name.startswith("mlflow."):
                    settle()
                return None  # the usual finders load it

        finder = _AirRunMlflowFinder

        def waits_first(owner, name):
            original = getattr(owner, name, None)
            if original is None:
                return

            def waiting(*args, **kwargs):
                settle()
                return original(*args, **kwargs)

            setattr(owner, name, waiting)
            undo.append((owner, name, original))

        try:
            import _posixsubprocess

            # New processes: subprocess's fork_exec (also where subprocess,
            # imported already, holds it), posix_spawn, exec without an
            # environment, os.system; os.fork and multiprocessing through the
            # fork hook (it stays, and costs a flag test once settled).
            hooks = [(_posixsubprocess, "fork_exec"), (os, "posix_spawn"), (os, "posix_spawnp"),
                     (os, "execv"), (os, "system")]
            if "subprocess" in sys.modules:
                hooks.append((sys.modules["subprocess"], "_fork_exec"))
            for owner, name in hooks:
                waits_first(owner, name)
            os.register_at_fork(before=settle)
            sys.meta_path.insert(0, finder)
            os.environ.__class__ = _AirRunEnviron
        except Exception:
            settle()  # a hook that cannot be had: wait now, as the rank could miss the run
    except Exception:
        pass


def _air_run_rank_start():
    """A rank forked from the warm start's interpreter, whose own start-up
    ran this file without a rank's variables: armed now, with them."""
    _air_run_arm()
    _air_run_progress()


sys._air_run_rank_start = _air_run_rank_start
_air_run_arm()
_air_run_progress()
_air_run_mlflow_run()
_air_run_chain()
)PY";
}

} // namespace air
