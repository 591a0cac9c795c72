"""The shim's start: what the rank's sitecustomize.py runs, in order (stacks,
progress, the later parts such as the MLflow wait, then the shadowed
sitecustomize), and the same for a rank forked by the warm start.
"""
import os
import sys

from air_run_progress import _air_run_progress
from air_run_stacks import _air_run_add_package, _air_run_arm, _air_run_chain

# ---- air-run embeds this file from the next line on ----
def _air_run_watch_exit():
    """Records `sys.exit("message")` in the rank's error file.

    Python prints such a message and exits 1, with no traceback and no
    excepthook, so neither torchelastic's error file nor air-run's report
    would hold it. sys.exit is wrapped to remember a message (any code that
    is neither None nor an int) and an atexit function writes it in
    torchelastic's format, as SystemExit, unless something already wrote
    that file. Written at exit rather than at the call, because a caller may
    catch the SystemExit and go on."""
    import atexit

    real_exit = sys.exit
    pending = []

    def exit(status=None):
        if status is not None and not isinstance(status, int):
            import traceback

            pending[:] = [(str(status), "".join(traceback.format_stack()[:-1]))]
        return real_exit(status)

    def write():
        path = os.environ.get("TORCHELASTIC_ERROR_FILE")
        if not pending or not path or os.path.exists(path) or os.getpid() != os.getpgid(0):
            return
        import json
        import time

        message, stack = pending[0]
        record = {"message": {"message": "SystemExit: " + message,
                              "extraInfo": {"py_callstack": stack, "timestamp": str(int(time.time()))}}}
        try:
            with open(path, "w") as f:
                json.dump(record, f)
        except OSError:
            pass

    exit.__doc__ = real_exit.__doc__
    sys.exit = exit
    atexit.register(write)


def _air_run_rank_start():
    """A rank forked from the warm start's interpreter, whose own start-up
    ran this file without a rank's variables: armed now, with them."""
    _air_run_add_package()
    _air_run_arm()
    _air_run_progress()


sys._air_run_rank_start = _air_run_rank_start
_air_run_watch_exit()
_air_run_add_package()
_air_run_arm()
_air_run_progress()
# air-run: the later parts start here
_air_run_chain()
