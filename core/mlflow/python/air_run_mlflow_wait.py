"""The MLflow run's rank-side wait: hands a rank the MLflow run air-run creates
while the ranks start, waiting for it only when the rank first looks for it.

A part of the rank's sitecustomize.py (core/mlflow/rank_wait.cpp hands it to
the shim); started by _air_run_mlflow_run().
"""
import os
import sys

# ---- air-run embeds this file from the next line on ----
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
