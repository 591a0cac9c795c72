"""@distributed: run a function once per accelerator and collect the results."""

import contextlib
import functools
import os
import socket
import sys
import warnings

from air import _launch, _options
from air._errors import for_caller
from air._types import LEGACY_TYPES, accelerator_text

DEFAULT_TIMEOUT = 3 * 3600  # seconds, as Databricks' @distributed


def _check_remote(remote):
    """serverless_gpu's ``remote`` flag: False (run on the attached node) is
    what air always does; True asked for a remote GPU pool, which air has not."""
    if remote is None or remote is False:
        return
    if remote is True:
        raise ValueError("remote=True is not supported: air runs the function on the "
                         "accelerators of this machine (the local node), and has no remote GPU "
                         "pool to send it to. Leave remote out, or pass remote=False")
    raise TypeError("remote must be True or False, not %r" % (remote,))


def _resolve_options(num_accelerators, accelerator_type, gpus, gpu_type, stacklevel):
    if gpus is not None:
        warnings.warn("`gpus` is deprecated; use `num_accelerators` instead",
                      FutureWarning, stacklevel=stacklevel)
        if num_accelerators is not None:
            raise TypeError("pass either num_accelerators or its deprecated name gpus, not both")
        num_accelerators = gpus
    if gpu_type is not None:
        warnings.warn("`gpu_type` is deprecated; use `accelerator_type` instead",
                      FutureWarning, stacklevel=stacklevel)
        if accelerator_type is not None:
            raise TypeError("pass either accelerator_type or its deprecated name gpu_type, "
                            "not both")
        accelerator_type = gpu_type
    accelerator_type = _options.check_accelerator_type(accelerator_text(accelerator_type))
    if accelerator_type is not None and accelerator_type.upper() in LEGACY_TYPES:
        warnings.warn("accelerator type %r is deprecated; use the GPU_<n>x<MODEL> form, e.g. "
                      "'GPU_8x%s'" % (accelerator_type, accelerator_type.upper()),
                      FutureWarning, stacklevel=stacklevel)
    if num_accelerators is not None:
        if isinstance(num_accelerators, bool) or not isinstance(num_accelerators, int):
            raise TypeError("num_accelerators must be a positive int, not %r"
                            % (num_accelerators,))
        if num_accelerators < 1:
            raise ValueError("num_accelerators must be at least 1, got %d" % num_accelerators)
    return num_accelerators, accelerator_type


class DistributedFunction:
    """A function wrapped by @distributed.

    Calling it runs the function here, once, as before. ``.distributed(*args,
    **kwargs)`` runs it once per rank through air-run and returns the list of
    the ranks' return values in rank order.
    """

    def __init__(self, fn, num_accelerators=None, accelerator_type=None,
                 timeout=DEFAULT_TIMEOUT, grace_period=None, python=None, env=None,
                 show_page=True):
        if not callable(fn):
            raise TypeError("@distributed must decorate a callable, not %r" % (fn,))
        functools.update_wrapper(self, fn)
        self._fn = fn
        self.num_accelerators = num_accelerators
        self.accelerator_type = accelerator_type
        # Checked now, at decoration time, naming the Python argument: not at
        # the call, as air-run's complaint about its flag.
        _launch.format_timeout(timeout)
        _launch.format_grace_period(grace_period)
        self.timeout = timeout
        self.grace_period = grace_period
        self.python = _options.check_python(python)
        self.env = _options.check_env(env)
        self.last_summary = None  # air-run's JSON summary of the latest .distributed() call
        self.show_page = bool(show_page)  # in a Jupyter kernel: the run's page under the cell

    def __call__(self, *args, **kwargs):
        with _world_of_one():
            return self._fn(*args, **kwargs)

    def distributed(self, *args, **kwargs):
        """Runs the function on every rank with these arguments.

        Returns a list with one return value per rank, in rank order. Raises
        air.DistributedError naming the failing rank (with its traceback and
        the other ranks' results), air.DistributedTimeout when the timeout
        passes, ValueError when air-run refuses the spec (e.g. an
        accelerator_type that does not match this machine), and
        air.SerializationError when the call cannot be sent to the ranks.
        """
        try:
            return _launch.call_on_ranks(
                self, args, kwargs, what="function %s" % _describe(self._fn),
                num_ranks=self.num_accelerators, accelerator_type=self.accelerator_type,
                timeout=self.timeout, grace_period=self.grace_period, python=self.python,
                extra_env=self.env, summary_sink=self._keep_summary,
                page_sink=show_run_page if self.show_page and in_kernel() else None,
                run_name="%s.distributed" % getattr(self._fn, "__name__", "function"))
        except Exception as error:
            if not for_caller(error):
                raise
            error_without_air_frames = error.with_traceback(None)
            if error.__cause__ is not None:  # the pickler's complaint: its message says it
                error.__cause__.with_traceback(None)
        # Raised here, outside the handler: the user's stack ends at the call.
        raise error_without_air_frames

    def _keep_summary(self, summary):
        self.last_summary = summary
        show_run_link(summary)

    def __reduce__(self):
        # A wrapper defined at the top level of an importable module travels by
        # name (the worker imports the module), like a plain function; others
        # (notebook / __main__ / nested) travel by value with their function.
        module_name = getattr(self._fn, "__module__", None)
        qualname = getattr(self._fn, "__qualname__", "")
        if module_name and module_name != "__main__" and "<locals>" not in qualname:
            module = sys.modules.get(module_name)
            found = module
            for part in qualname.split("."):
                found = getattr(found, part, None)
            if found is self:
                return (_by_name, (module_name, qualname))
        return (DistributedFunction, (self._fn, self.num_accelerators, self.accelerator_type,
                                      self.timeout, self.grace_period, self.python, self.env,
                                      self.show_page))

    def __repr__(self):
        return "<distributed function %s (num_accelerators=%r, accelerator_type=%r)>" % (
            _describe(self._fn), self.num_accelerators, self.accelerator_type)


# What air-run gives every rank, as a world of one rank on this machine.
# USE_LIBUV=0: torch 2.4+ asks for the libuv TCPStore by default, and a torch
# built without libuv (Debian 13's 2.6) then fails init_process_group; air-run
# retries such a rank's store without it, but a plain call runs in this
# process, not in a rank. A world of one needs no libuv store.
_WORLD_OF_ONE = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
                 "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "USE_LIBUV": "0"}


@contextlib.contextmanager
def _world_of_one():
    """A plain call runs the function here as rank 0 of a world of one: the
    rank variables a function written for the ranks reads (LOCAL_RANK,
    init_process_group's MASTER_ADDR / MASTER_PORT...) are set for the call
    where they are missing, and removed again after it. Inside a launched rank
    (RANK already set) nothing changes."""
    if "RANK" in os.environ:
        yield
        return
    added = {k: v for k, v in _WORLD_OF_ONE.items() if k not in os.environ}
    if "MASTER_PORT" not in os.environ:
        added["MASTER_PORT"] = str(_free_port())
    os.environ.update(added)
    try:
        yield
    finally:
        for key, value in added.items():
            if os.environ.get(key) == value:
                del os.environ[key]


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_kernel():
    """Whether this process is an IPython kernel (Jupyter), where HTML shows."""
    if "IPython" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
        shell = get_ipython()
        return shell is not None and hasattr(shell, "kernel")
    except Exception:
        return False


def show_run_page(page):
    """In a notebook, the run's HTML page (air-run --html) under the cell, in
    an iframe of its own: its style sheet stays out of the notebook's, and it
    loads nothing. Returns True when it was displayed."""
    if not page or not in_kernel():
        return False
    try:
        import html
        from IPython.display import HTML, display
        display(HTML('<iframe class="air-run-page" title="air-run: the run" sandbox="" '
                     'style="width:100%%;height:640px;border:1px solid #ccc" srcdoc="%s"></iframe>'
                     % html.escape(page, quote=True)))
        return True
    except Exception:
        return False


def show_run_link(summary):
    """In a notebook, the MLflow run's link as a clickable line under the cell.

    air-run already prints ``View run at <link>`` as plain text (on stderr,
    streamed to the cell); where an IPython kernel runs, the link is also
    displayed as HTML. Returns True when it was displayed."""
    info = (summary or {}).get("mlflow") if isinstance(summary, dict) else None
    link = info.get("link") if isinstance(info, dict) else None
    if not link or "IPython" not in sys.modules:
        return False
    try:
        import html
        from IPython import get_ipython
        from IPython.display import HTML, display
        shell = get_ipython()
        if shell is None or not hasattr(shell, "kernel"):
            return False
        display(HTML('MLflow: <a href="%s" target="_blank">View run %s</a>'
                     % (html.escape(link, quote=True), html.escape(str(info.get("run_id"))))))
        return True
    except Exception:
        return False


def _by_name(module_name, qualname):
    import importlib
    found = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _describe(fn):
    return "%s.%s" % (getattr(fn, "__module__", "?"),
                      getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn))))


def distributed(fn=None, *, num_accelerators=None, accelerator_type=None,
                timeout=DEFAULT_TIMEOUT, gpus=None, gpu_type=None, remote=None,
                grace_period=None, python=None, env=None, show_page=True):
    """Decorator: ``@distributed(num_accelerators=None, accelerator_type=None,
    timeout=10800)``; also usable bare as ``@distributed``.

    num_accelerators: ranks to run (default: every GPU; on a machine without a
        GPU, 1 rank on CPU unless a count is given).
    accelerator_type: "GPU_<n>x<MODEL>" (e.g. "GPU_8xH100") or "CPU", as a
        string or an air.AcceleratorType; a type that does not match the
        machine is refused before anything runs.
    timeout: seconds (or "90m", "3h"); None disables. Default 3 hours.
    gpus, gpu_type: deprecated serverless_gpu names (FutureWarning). A bare
        model ("H100", air.GPUType.H100) checks the GPU family only; the count
        comes from num_accelerators / gpus, else every GPU of that family.
    remote: serverless_gpu's flag; False (or left out) runs here, as always;
        True raises ValueError (air runs on the local node only).
    grace_period: seconds between SIGTERM and SIGKILL when air-run stops ranks.
    python: interpreter for the ranks (default: this one, sys.executable).
    env: extra environment variables for every rank.
    show_page: in a Jupyter kernel, show the run's page (its timeline, one
        lane per rank; docs/html.md) under the cell after each .distributed()
        call; False turns it off. Outside a kernel nothing is drawn.
    """
    _check_remote(remote)
    num_accelerators, accelerator_type = _resolve_options(
        num_accelerators, accelerator_type, gpus, gpu_type, stacklevel=3)

    def wrap(f):
        return DistributedFunction(f, num_accelerators=num_accelerators,
                                   accelerator_type=accelerator_type, timeout=timeout,
                                   grace_period=grace_period, python=python, env=env,
                                   show_page=show_page)

    if fn is not None:
        return wrap(fn)
    return wrap
