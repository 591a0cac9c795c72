"""air.report(): hand one JSON value from a rank to air-run's summary."""

import json
import os
import tempfile
import warnings

# Set when user code calls report() in this process, so the worker does not
# overwrite an explicit report with the function's implicit None return.
_reported = False


def report(value):
    """Writes ``json.dumps(value)`` to this rank's ``$AIR_RESULT_FILE``.

    For scripts launched by air-run: the value appears as the rank's
    ``result.value`` in the JSON summary. The file is replaced atomically (a
    temporary file in the same directory, then ``os.replace``), so air-run
    never reads half a value; calling report() again replaces the value.

    NaN and infinities are refused (ValueError), because they are not JSON and
    the summary would mark the result invalid. Outside air-run (no
    AIR_RESULT_FILE) this warns and does nothing. Returns True when written.
    """
    global _reported
    path = os.environ.get("AIR_RESULT_FILE")
    if not path:
        warnings.warn("air.report() called outside air-run (AIR_RESULT_FILE is not set); "
                      "the value is not recorded", RuntimeWarning, stacklevel=2)
        return False
    text = json.dumps(value, allow_nan=False)
    write_atomically(path, text.encode("utf-8"))
    _reported = True
    return True


def write_atomically(path, data):
    """Writes bytes to `path` through a temporary file in the same directory and
    os.replace, so readers see either the old content or the whole new one."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
