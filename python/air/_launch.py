"""Running air-run from Python: command line, child environment, streaming of
the ranks' output, and turning the outcome into values or one exception."""

import collections
import json
import math
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from air import _binary, _options
from air._errors import DistributedError, DistributedTimeout, mark_for_caller

TAIL_LINES = 200


# --------------------------------------------------------------------------- command line

def format_timeout(timeout, name="timeout"):
    """air-run's --timeout text: None -> "none", seconds -> "N" (rounded up),
    a duration string ("90m", "3h", "none") as given. Errors name `name`."""
    return _options.duration_text(timeout, name, allow_none=True)


def format_grace_period(grace_period):
    """air-run's --grace-period text, or None to keep air-run's default."""
    if grace_period is None:
        return None
    return _options.duration_text(grace_period, "grace_period", allow_none=False)


def placement_flags(binary, env, num_ranks, accelerator_type):
    """Flags that choose where the ranks run.

    GPU machine: ``-n N`` when a count is given (else air-run uses every GPU).
    No GPU (or accelerator_type "CPU"): ``--cpu-ranks N`` with N = the count
    given, else 1. An explicit GPU accelerator_type is passed through unchecked
    so air-run reports a mismatch with the hardware itself.
    """
    flags = []
    if accelerator_type is not None and str(accelerator_type).upper() == "CPU":
        return ["--accelerator-type", "CPU", "--cpu-ranks", str(num_ranks or 1)]
    if accelerator_type is None:
        info = _binary.list_gpus(binary, env)
        if _binary.gpu_count(info) == 0:
            return ["--cpu-ranks", str(num_ranks or 1)]
    if num_ranks is not None:
        flags += ["-n", str(num_ranks)]
    if accelerator_type is not None:
        flags += ["--accelerator-type", str(accelerator_type)]
    return flags


def child_environment(extra=None):
    """The caller's environment with the directory holding the `air` package
    first on PYTHONPATH, so every rank (and the worker module) imports this
    same package."""
    env = dict(os.environ)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _binary.PYTHON_ROOT not in parts:
        parts.insert(0, _binary.PYTHON_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.update(extra or {})
    return env


def mlflow_environment(run_name=None):
    """MLFLOW_* and AIR_RUN_MLFLOW_* for air-run, from the caller's MLflow state.

    air-run creates the launch's MLflow run itself when a tracking URI is
    configured. From a notebook or script that uses MLflow, the run becomes a
    child of the active run (``mlflow.active_run()``: MLFLOW_RUN_ID and
    MLFLOW_EXPERIMENT_ID), in the store the caller's client uses
    (``mlflow.get_tracking_uri()``, when a run is active or a URI was set).
    mlflow is only looked at when the caller imported it. `run_name` becomes
    the run's default name (AIR_RUN_MLFLOW_RUN_NAME, unless already set).
    """
    env = {}
    if run_name and not os.environ.get("AIR_RUN_MLFLOW_RUN_NAME"):
        env["AIR_RUN_MLFLOW_RUN_NAME"] = run_name
    mlflow = sys.modules.get("mlflow")
    if mlflow is None:
        return env
    try:
        active = mlflow.active_run()
    except Exception:
        active = None
    uri_set = False
    try:
        from mlflow.tracking._tracking_service.utils import is_tracking_uri_set
        uri_set = bool(is_tracking_uri_set())
    except Exception:
        uri_set = bool(os.environ.get("MLFLOW_TRACKING_URI"))
    if active is not None or uri_set:
        try:
            env["MLFLOW_TRACKING_URI"] = str(mlflow.get_tracking_uri())
        except Exception:
            pass
    if active is not None:
        env["MLFLOW_RUN_ID"] = active.info.run_id
        env["MLFLOW_EXPERIMENT_ID"] = str(active.info.experiment_id)
    return env


def python_executable(python=None):
    return python or sys.executable or shutil.which("python3") or "python3"


# --------------------------------------------------------------------------- running

class Launch:
    """How one air-run process ended, with what it printed (the last lines)."""

    def __init__(self, argv, returncode, summary, output_tail, stderr_tail):
        self.argv = argv
        self.returncode = returncode
        self.summary = summary
        self.output_tail = output_tail  # both streams, in arrival order
        self.stderr_tail = stderr_tail

    def air_run_errors(self):
        """air-run's own `air-run: error: ...` lines (not a rank's output)."""
        return [l for l in self.stderr_tail if l.startswith("air-run: error:")]

    def rank_tail(self, rank, count=20):
        prefix = "[rank%d]" % rank
        lines = [l for l in self.output_tail if l.startswith(prefix)]
        return lines[-count:]


def _die_with_parent():
    # Runs in the child between fork and exec: ask the kernel to SIGTERM air-run
    # if the caller (a notebook kernel, a script) dies, so no job outlives it.
    # air-run then tears its ranks down.
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _load_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.prctl
        fn.argtypes = [ctypes.c_int, ctypes.c_ulong]
        fn.restype = ctypes.c_int
        return fn
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def shown_to_user(line):
    """Whether a line of air-run's output is for the user of a distributed
    call: the ranks' own output (``[rankN]: ...``), air-run's warnings and its
    MLflow lines (the run's link, or why nothing was tracked). The rest is air-run's housekeeping (notices such as the
    OMP_NUM_THREADS one, the end-of-run report, error lines), which the call's
    return value or exception already says; it is kept for the exception's
    text, not printed."""
    if line.startswith("[rank"):
        return True
    return line.startswith(("air-run: warning:", "air-run: MLflow: "))


def _pump(pipe, stream_name, tails, lock):
    """Copies a pipe to sys.stdout / sys.stderr line by line (looked up on every
    line, so notebook and pytest replacements of sys.stdout see the output);
    a line for which shown_to_user returns False is only kept in the tails."""
    for raw in iter(pipe.readline, b""):
        line = raw.decode("utf-8", "replace")
        with lock:
            for tail in tails:
                tail.append(line.rstrip("\n"))
        if not shown_to_user(line):
            continue
        stream = getattr(sys, stream_name)
        try:
            stream.write(line)
            stream.flush()
        except (ValueError, OSError):
            pass  # the caller closed its stream; keep draining so air-run never blocks
    pipe.close()


def run_air_run(argv, env, summary_path=None, grace_seconds=30.0):
    """Runs air-run, streaming its output to this process's sys.stdout /
    sys.stderr as it comes: the lines shown_to_user keeps (the ranks' prefixed
    lines, air-run's warnings and MLflow lines); every line is kept in the
    tails for the exception's text. The one way air runs air-run for a Python
    caller (a distributed call, TorchDistributor.run of a function or of a
    script), so all of them print the same lines.

    Ctrl-C (KeyboardInterrupt) forwards SIGINT to air-run, which stops the
    ranks; the KeyboardInterrupt is re-raised once it has exited.
    """
    output_tail = collections.deque(maxlen=TAIL_LINES)
    stderr_tail = collections.deque(maxlen=TAIL_LINES)
    lock = threading.Lock()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (ValueError, OSError, AttributeError):
            pass
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env,
                            preexec_fn=_die_with_parent if _PRCTL is not None else None)
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, "stdout", [output_tail], lock),
                         daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, "stderr", [output_tail, stderr_tail],
                                            lock), daemon=True),
    ]
    for t in pumps:
        t.start()
    try:
        returncode = proc.wait()
    except KeyboardInterrupt:
        _stop(proc, grace_seconds)
        for t in pumps:
            t.join(timeout=5)
        raise
    for t in pumps:
        t.join()
    summary = {}
    if summary_path and os.path.exists(summary_path):
        try:
            with open(summary_path, "r", encoding="utf-8") as f:
                summary = json.load(f)
        except (OSError, ValueError):
            summary = {}
    return Launch(list(argv), returncode, summary, list(output_tail), list(stderr_tail))


def _stop(proc, grace_seconds):
    """SIGINT to air-run (it forwards to the ranks and tears down); SIGKILL if it
    has not ended after its grace period plus a margin, or on a second Ctrl-C."""
    try:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=grace_seconds + 10)
    except (KeyboardInterrupt, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- outcomes

_RANK_FILE = re.compile(r"^rank-(\d+)\.pkl$")


def read_rank_records(outdir):
    """{rank: record dict} from the worker's rank-N.pkl files; a file that
    cannot be unpickled here becomes an error record saying why."""
    records = {}
    try:
        names = os.listdir(outdir)
    except OSError:
        return records
    for name in names:
        match = _RANK_FILE.match(name)
        if not match:
            continue
        rank = int(match.group(1))
        try:
            with open(os.path.join(outdir, name), "rb") as f:
                records[rank] = pickle.load(f)
        except Exception as e:
            records[rank] = {"ok": False, "type": "air.ResultError",
                             "message": "the result of rank %d could not be unpickled in the "
                                        "caller: %s: %s" % (rank, type(e).__name__, e),
                             "traceback": "", "exception": None}
    return records


def _world_size(launch, records, hint):
    ranks = launch.summary.get("ranks") if isinstance(launch.summary, dict) else None
    if isinstance(ranks, list) and ranks:
        return len(ranks)
    if hint:
        return int(hint)
    return (max(records) + 1) if records else 0


def _outcome(launch):
    outcome = launch.summary.get("outcome") if isinstance(launch.summary, dict) else None
    return outcome if isinstance(outcome, dict) else {}


def _summary_rank(launch, rank):
    for entry in launch.summary.get("ranks") or []:
        if isinstance(entry, dict) and entry.get("rank") == rank:
            return entry
    return {}


def is_spec_error(launch):
    """Exit code 2 with air-run's own `air-run: error:` line: nothing was launched."""
    return launch.returncode == 2 and bool(launch.air_run_errors())


def spec_error_text(launch):
    lines = launch.air_run_errors()
    text = "\n".join(l[len("air-run: error:"):].strip() for l in lines)
    return "air-run: " + (text or "invalid launch spec (exit code 2)")


def is_timeout(launch):
    if launch.returncode != 124:
        return False
    status = _outcome(launch).get("status")
    return status is None or status in ("timed_out", "timeout")


def results_or_raise(launch, outdir, world_hint=None, timeout_text=None):
    """The per-rank return values in rank order, or one exception:
    ValueError (bad spec / hardware mismatch, exit 2), DistributedTimeout
    (exit 124), DistributedError (any other failure)."""
    if is_spec_error(launch):
        raise mark_for_caller(ValueError(spec_error_text(launch)))
    records = read_rank_records(outdir)
    world = _world_size(launch, records, world_hint)
    values = [None] * world
    for rank, record in records.items():
        if record.get("ok") and 0 <= rank < world:
            values[rank] = record.get("value")

    if launch.returncode == 0:
        failed = sorted(r for r, rec in records.items() if not rec.get("ok"))
        if not failed:
            return values
        # Exit 0 but a record says otherwise (e.g. an unpicklable result here).
        raise _error_for(launch, records, values, failed[0])

    if is_timeout(launch):
        reason = _outcome(launch).get("reason") or ""
        headline = "the distributed call timed out%s; air-run stopped every rank (exit code 124)" % (
            " after %s" % _pretty_timeout(timeout_text) if timeout_text else "")
        if reason:
            headline += ": " + reason
        done = [r for r, rec in sorted(records.items()) if rec.get("ok")]
        headline += ". Ranks that finished: %s" % (done or "none")
        stacks = timeout_stacks(launch.summary)
        if stacks:
            headline += "\n\nWhere the other ranks were when it timed out:\n" + stacks
        raise DistributedTimeout(headline, rank=_root_rank(launch, records),
                                 message=reason or "timeout", partial_results=values,
                                 exit_code=launch.returncode, summary=launch.summary)

    return_rank = _root_rank(launch, records)
    raise _error_for(launch, records, values, return_rank)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stack(stack):
    """A faulthandler dump without the frames of air's worker and of runpy,
    which only say how the function was called."""
    kept = []
    for line in stack.splitlines():
        frame = re.match(r'\s*File "([^"]*)"', line)
        if frame and (frame.group(1).startswith(_PACKAGE_DIR) or frame.group(1) == "<frozen runpy>"
                      or frame.group(1).endswith(os.sep + "runpy.py")):
            continue
        kept.append(line)
    return "\n".join(kept)


def timeout_stacks(summary):
    """Every stopped rank's stack from air-run's summary (taken when the run
    timed out), one block per rank; "" when none was taken."""
    blocks = []
    for entry in (summary or {}).get("ranks") or []:
        if isinstance(entry, dict) and entry.get("stack"):
            blocks.append("rank %s:\n%s" % (entry.get("rank"), _indent(user_stack(entry["stack"]))))
    return "\n".join(blocks)


def _indent(text):
    return "\n".join("  " + line if line else line for line in text.splitlines())


def _pretty_timeout(text):
    return "%s s" % text if text.isdigit() else text


def _root_rank(launch, records):
    root = _outcome(launch).get("root_cause_rank")
    if isinstance(root, int) and root >= 0:
        return root
    failed = sorted(r for r, rec in records.items() if not rec.get("ok"))
    return failed[0] if failed else None


def _error_for(launch, records, values, rank):
    rc = launch.returncode
    reason = _outcome(launch).get("reason") or ""
    record = records.get(rank) if rank is not None else None
    if record is not None and not record.get("ok"):
        exception = None
        if record.get("exception") is not None:
            try:
                exception = pickle.loads(record["exception"])
            except Exception:
                exception = None
        exc_type, message = record.get("type"), record.get("message", "")
        headline = "rank %d failed with %s: %s (air-run exit code %s)" % (
            rank, exc_type, message, rc)
        return DistributedError(headline, rank=rank, exc_type=exc_type, message=message,
                                remote_traceback=record.get("traceback", ""),
                                partial_results=values, exit_code=rc, summary=launch.summary,
                                exception=exception)
    # No record from our worker: the rank died without raising (signal, os._exit,
    # the interpreter failed to start...). Use air-run's account.
    if rank is not None:
        error = _summary_rank(launch, rank).get("error") or {}
        exc_type = error.get("type")
        message = error.get("message") or reason or "exited with code %s" % rc
        headline = "rank %d failed: %s (air-run exit code %s)" % (rank, message, rc)
        tail = launch.rank_tail(rank)
        if tail and not error.get("traceback"):
            headline += "\n\nLast output of rank %d:\n%s" % (rank, "\n".join(tail))
        return DistributedError(headline, rank=rank, exc_type=exc_type, message=message,
                                remote_traceback=error.get("traceback") or "",
                                partial_results=values, exit_code=rc, summary=launch.summary)
    lines = [l for l in launch.stderr_tail if not l.startswith("[rank")][-20:]
    headline = "air-run failed with exit code %s%s" % (rc, ": " + reason if reason else "")
    if lines:
        headline += "\n" + "\n".join(lines)
    return DistributedError(headline, message=reason, partial_results=values, exit_code=rc,
                            summary=launch.summary)


# --------------------------------------------------------------------------- one call

def call_on_ranks(target, args, kwargs, *, what, num_ranks=None, accelerator_type=None,
                  timeout=None, grace_period=None, python=None, extra_env=None,
                  placement=None, summary_sink=None, run_name=None, page_sink=None):
    """Runs target(*args, **kwargs) once per rank through air-run and returns
    the list of return values in rank order (see results_or_raise).
    `placement` replaces the flags placement_flags() would choose;
    `summary_sink` receives air-run's JSON summary (a dict) before the outcome
    is turned into values or an exception; `run_name` names the MLflow run
    when tracking is configured (see mlflow_environment); `page_sink`, when
    given, receives the run's HTML page (air-run --html) as text, "" when
    air-run wrote none."""
    from air._payload import dump_call, target_modules

    timeout_text = format_timeout(timeout)
    workdir = tempfile.mkdtemp(prefix="air-call-")
    try:
        payload = os.path.join(workdir, "payload.pkl")
        outdir = os.path.join(workdir, "out")
        os.mkdir(outdir, 0o700)
        # Serialise first: a payload error is the caller's to fix, binary or not.
        dump_call(payload, target, args, kwargs, what)
        binary = _binary.resolve_binary()
        env = child_environment(dict(mlflow_environment(run_name), **(extra_env or {})))
        # For air-run's warm start (preload: auto): the worker module imports
        # no torch itself, the call may. The caller's own setting wins.
        env.setdefault("AIR_RUN_TARGET_MODULES", ",".join(target_modules(target, args, kwargs)))
        if placement is None:
            placement = placement_flags(binary, env, num_ranks, accelerator_type)
        summary = os.path.join(workdir, "summary.json")
        argv = [binary] + list(placement)
        argv += ["--timeout", timeout_text, "--python", python_executable(python),
                 "--summary", summary]
        if grace_period is not None:
            argv += ["--grace-period", format_grace_period(grace_period)]
        page = os.path.join(workdir, "page.html")
        if page_sink is not None:
            argv += ["--html", page]
        argv += ["-m", "air._worker", payload, outdir]
        launch = run_air_run(argv, env, summary, _grace_seconds(grace_period))
        if summary_sink is not None:
            summary_sink(launch.summary)
        if page_sink is not None:
            page_sink(_read_text(page))
        return results_or_raise(launch, outdir, world_hint=num_ranks or _count(placement),
                                timeout_text=timeout_text)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _read_text(path):
    """The file's text, "" when it is missing or unreadable."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _count(placement):
    """Rank count named by placement flags (-n N or --cpu-ranks N), else None."""
    for flag in ("-n", "--cpu-ranks"):
        if flag in placement:
            index = placement.index(flag)
            if index + 1 < len(placement) and str(placement[index + 1]).isdigit():
                return int(placement[index + 1])
    return None


def _grace_seconds(grace_period):
    """The grace period in seconds, for the caller's own wait on air-run."""
    if grace_period is None:
        return 30.0
    if isinstance(grace_period, str):
        ms = _options.duration_ms(grace_period.strip())
        return ms / 1000.0 if ms else 30.0
    if hasattr(grace_period, "total_seconds"):
        return grace_period.total_seconds()
    return float(grace_period)
