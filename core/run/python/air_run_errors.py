"""The rank's exception, recorded: what a rank dies of goes into its error
file (TORCHELASTIC_ERROR_FILE, torchelastic's format, as torch's @record
writes it), with no change to the script, so that the report, JUnit and the
reason line name it exactly, whatever the rank printed before.
"""
import os
import sys

# ---- air-run embeds this file from the next line on ----


def _air_run_exception_name(kind):
    """The exception's name as Python's traceback prints it: qualified by its
    module unless that is builtins or __main__."""
    name = getattr(kind, "__qualname__", None) or getattr(kind, "__name__", "Exception")
    module = getattr(kind, "__module__", None)
    if module and module not in ("builtins", "__main__"):
        name = module + "." + name
    return name


# Each text of the record keeps this many characters of its head and as many
# of its tail: a 3 MiB message, written twice (headline and traceback), went
# over air-run's 4 MiB limit for the file and was lost whole.
_AIR_RUN_KEPT_CHARS = 64 * 1024


def _air_run_clean_text(text):
    """`text` as valid UTF-8 text, cut to a bounded head and tail that says
    so. A file name that is not UTF-8 (latin-1 "caf\\xe9") reaches Python as
    surrogate escapes, which no JSON reader takes: it is written as Python
    prints its bytes, caf\\xe9."""
    if len(text) > 2 * _AIR_RUN_KEPT_CHARS:
        cut = len(text) - 2 * _AIR_RUN_KEPT_CHARS
        text = (text[:_AIR_RUN_KEPT_CHARS] + "\n[air-run: %d characters cut here]\n" % cut
                + text[-_AIR_RUN_KEPT_CHARS:])
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def _air_run_exception_record(kind, value, tb):
    """(headline, traceback text) of an uncaught exception: "RuntimeError:
    boom" and the lines Python prints for it, each valid UTF-8 and bounded
    (_air_run_clean_text)."""
    import traceback

    try:
        text = str(value)
    except Exception:
        text = "<exception str() failed>"
    headline = _air_run_exception_name(kind) + (": " + text if text else "")
    try:
        lines = "".join(traceback.format_exception(kind, value, tb))
    except Exception:
        lines = headline + "\n"
    return _air_run_clean_text(headline), _air_run_clean_text(lines)


def _air_run_write_error_file(headline, stack):
    """Writes the record, unless this is not the rank's own process (a
    forked DataLoader worker, a subprocess) or something already wrote the
    file (torch's @record, which records before the exception leaves the
    script). Never raises: a rank's exit is not the place for a new error."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    try:
        if not path or os.path.exists(path) or os.getpid() != os.getpgid(0):
            return False
        import json
        import time

        record = {"message": {"message": _air_run_clean_text(headline),
                              "extraInfo": {"py_callstack": _air_run_clean_text(stack),
                                            "timestamp": str(int(time.time()))}}}
        # UTF-8 as it is, not \\uXXXX: six bytes a character would undo the bound.
        with open(path, "w", encoding="utf-8") as f:
            json.dump(record, f, ensure_ascii=False)
        return True
    except Exception:
        return False


def _air_run_record_errors():
    """Records how the rank dies, three ways, each into the error file once:

    - an uncaught exception, from a sys.excepthook that records and then
      calls the hook it replaced, so the rank's output is what it was. torch
      2.3+'s init_process_group wraps whatever hook is installed (its lines
      get "[rankN]: " before them), so the recorder still runs under it;
    - the same exception at exit, from sys.last_exc/last_value (Python sets
      them before it calls the hook), for a program or library that installs
      a hook of its own without calling the one before;
    - `sys.exit("message")`, which Python prints and exits 1 with, calling no
      hook: sys.exit is wrapped to remember the message, and it is written at
      exit as SystemExit (a caller may catch the SystemExit and go on).

    Every BaseException is recorded (DCP's CheckpointException is one), but
    KeyboardInterrupt, which is how a stopped rank ends, and a SystemExit
    with no message (its exit code says it). An
    exception in another thread is not either: it ends that thread, not the
    rank."""
    import atexit

    previous_hook = sys.excepthook
    real_exit = sys.exit
    pending = []
    seen = []

    def record(kind, value, tb):
        """Records an exception the rank dies of; a SystemExit only when it
        carries a message (the warm start's ranks raise it where a fresh
        interpreter would exit)."""
        if value is None or any(v is value for v in seen):
            return
        if isinstance(value, SystemExit):
            if value.code is None or isinstance(value.code, int):
                return
        elif isinstance(value, KeyboardInterrupt):
            return
        seen.append(value)
        _air_run_write_error_file(*_air_run_exception_record(kind, value, tb))

    def hook(kind, value, tb):
        try:
            record(kind, value, tb)
        finally:
            previous_hook(kind, value, tb)

    def exit(status=None):
        if status is not None and not isinstance(status, int):
            import traceback

            pending[:] = [(str(status), "".join(traceback.format_stack()[:-1]))]
        return real_exit(status)

    def at_exit():
        value = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if value is not None:
            record(type(value), value, value.__traceback__)
        elif pending:
            message, stack = pending[0]
            _air_run_write_error_file("SystemExit: " + message, stack)

    hook.__doc__ = getattr(previous_hook, "__doc__", None)
    exit.__doc__ = real_exit.__doc__
    sys.excepthook = hook
    sys.exit = exit
    sys._air_run_record_exception = record
    atexit.register(at_exit)
