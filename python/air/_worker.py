"""One rank of a distributed call: ``python -m air._worker PAYLOAD OUTDIR``.

air-run starts this module once per rank (``air-run -m air._worker``) with the
rank variables set. It loads the callable and its arguments from PAYLOAD, calls
it, and records the outcome:

- ``OUTDIR/rank-<RANK>.pkl`` (temp file + rename): a pickled dict, either
  ``{"ok": True, "value": <return value>}`` or ``{"ok": False, "type": ...,
  "message": ..., "traceback": ..., "exception": <pickled exception or None>}``.
  Any picklable return value works, not only JSON.
- ``$AIR_RESULT_FILE``: the return value as JSON (its repr when it is not JSON),
  so air-run's summary shows it; skipped when the function called air.report()
  itself and returned None.
- sys.argv is reduced to the worker's path while the function runs, and
  ``$AIR_WORKER_OUTDIR`` names OUTDIR.
- on an exception: ``$TORCHELASTIC_ERROR_FILE`` in torchelastic's format, the
  traceback on stderr, and exit status 1.
"""

import json
import os
import sys
import time
import traceback

# The JSON form of a return value is for people reading the summary; the real
# value travels in the pickle. Keep the summary small.
JSON_RESULT_LIMIT = 1024 * 1024


def _rank():
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def _rank_file(outdir, rank):
    return os.path.join(outdir, "rank-%d.pkl" % rank)


def _json_form(value):
    """The value as JSON text, or {"repr": ...} when it is not JSON-able."""
    try:
        text = json.dumps(value, allow_nan=False)
        if len(text) <= JSON_RESULT_LIMIT:
            return text
    except (TypeError, ValueError, OverflowError, RecursionError):
        pass
    try:
        shown = repr(value)
    except Exception as e:  # a broken __repr__ must not fail the rank
        shown = "<%s object (repr failed: %s)>" % (type(value).__name__, e)
    if len(shown) > 4096:
        shown = shown[:4096] + "...(truncated)"
    return json.dumps({"type": _type_name(type(value)), "repr": shown})


def _type_name(cls):
    module = getattr(cls, "__module__", "")
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in ("builtins", "__main__", None, "") else "%s.%s" % (module, name)


def _write_result_file(value):
    from air import _report
    path = os.environ.get("AIR_RESULT_FILE")
    if not path or (_report._reported and value is None):
        return
    try:
        _report.write_atomically(path, _json_form(value).encode("utf-8"))
    except OSError as e:
        sys.stderr.write("air: could not write AIR_RESULT_FILE %s: %s\n" % (path, e))


def _write_error_file(exc_type, message, tb_text):
    """TORCHELASTIC_ERROR_FILE in the format torch's @record writes."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    from air._report import write_atomically
    data = {"message": {
        "message": "%s: %s" % (exc_type, message) if message else exc_type,
        "extraInfo": {"py_callstack": tb_text, "timestamp": str(int(time.time()))},
    }}
    try:
        write_atomically(path, json.dumps(data).encode("utf-8"))
    except OSError as e:
        sys.stderr.write("air: could not write TORCHELASTIC_ERROR_FILE %s: %s\n" % (path, e))


def _record_error(outdir, rank, exc):
    """Writes the error record, the torchelastic file and the traceback."""
    from air._payload import dumps_outcome
    from air._report import write_atomically
    exc_type = _type_name(type(exc))
    message = str(exc)
    tb_text = "".join(traceback.format_exception(type(exc), exc, _user_frames(exc.__traceback__)))
    record = {"ok": False, "type": exc_type, "message": message, "traceback": tb_text,
              "exception": None}
    try:
        record["exception"] = dumps_outcome(exc)
    except Exception:
        pass  # the description above is enough
    try:
        write_atomically(_rank_file(outdir, rank), dumps_outcome(record))
    except Exception as e:
        sys.stderr.write("air: could not write the error record of rank %d: %s\n" % (rank, e))
    _write_error_file(exc_type, message, tb_text)
    sys.stderr.write(tb_text)


def _user_frames(tb):
    """Drops the leading frames of the air package (this worker, the decorator
    wrapper) so the traceback starts in user code, and the frames of air-run's
    shim wherever they are (its wrapper around each torch.distributed
    collective, which only times the call: an error raised in a collective
    would show it between the user's line and torch's); keeps the air
    package's frames all when the error is in air itself."""
    package_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
    first = tb
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(package_dir):
        tb = tb.tb_next
    return _without_shim_frames(tb) if tb is not None else first


def _in_shim(tb):
    """Whether a frame is air-run's shim: a module of the run's `pyshim`
    directory, which air-run puts first on the ranks' PYTHONPATH."""
    filename = tb.tb_frame.f_code.co_filename
    return os.path.basename(os.path.dirname(os.path.abspath(filename))) == "pyshim"


def _without_shim_frames(tb):
    """The traceback `tb` without the shim's frames (relinked: tb_next is
    writable); `tb` itself when every frame is the shim's."""
    start, kept = tb, []
    while tb is not None:
        if not _in_shim(tb):
            kept.append(tb)
        tb = tb.tb_next
    if not kept:
        return start
    for frame, after in zip(kept, kept[1:]):
        frame.tb_next = after
    kept[-1].tb_next = None
    return kept[0]


def _finish(code):
    # A failed rank must end promptly even when threads it started (data
    # loaders, a collective blocked in another thread) are still running;
    # normal interpreter exit would wait for them.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.stderr.write("usage: python -m air._worker PAYLOAD OUTDIR\n")
        return 2
    payload, outdir = argv
    rank = _rank()
    from air._payload import dumps_outcome, load_call
    from air._report import write_atomically

    try:
        _, target, args, kwargs = load_call(payload)
    except Exception as e:
        _record_error(outdir, rank, e)
        _finish(1)

    # The function gets its arguments from the caller, not from the command
    # line: argparse inside it must not see the worker's PAYLOAD and OUTDIR.
    sys.argv = sys.argv[:1]
    os.environ["AIR_WORKER_OUTDIR"] = outdir

    try:
        value = target(*args, **kwargs)
    except SystemExit as e:
        if e.code in (None, 0):
            value = None  # sys.exit(0) inside the function: a normal end, no value
        else:
            _record_error(outdir, rank, e)
            _finish(e.code if isinstance(e.code, int) and 0 < e.code < 256 else 1)
    except KeyboardInterrupt:
        # air-run forwards SIGINT when the run is interrupted; the traceback of
        # every rank would only bury air-run's own message.
        _finish(128 + 2)
    except Exception as e:
        _record_error(outdir, rank, e)
        _finish(1)

    try:
        data = dumps_outcome({"ok": True, "value": value})
    except Exception as e:
        error = TypeError("the return value of rank %d (%s) could not be pickled: %s: %s"
                          % (rank, _type_name(type(value)), type(e).__name__, e))
        _record_error(outdir, rank, error)
        _finish(1)
    write_atomically(_rank_file(outdir, rank), data)
    _write_result_file(value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
