"""What the real-client scripts inject, read from the environment, so that
each script is launched by its library's usual command line unchanged:

  AIR_TEST_CRASH_AT=N    rank 1 raises RuntimeError("injected failure at step N")
  AIR_TEST_CRASH_ONCE=F  ... only while file F does not exist (then creates it):
                         the restarted attempt runs through
  AIR_TEST_HANG_AT=N     rank 1 sleeps for ever at step N (a stuck rank)
"""
import os
import time


def at_step(step):
    """Called by each script once per optimizer step (1-based)."""
    if os.environ.get("RANK") != "1":
        return
    if str(step) == os.environ.get("AIR_TEST_HANG_AT"):
        while True:
            time.sleep(1)
    if str(step) == os.environ.get("AIR_TEST_CRASH_AT"):
        once = os.environ.get("AIR_TEST_CRASH_ONCE")
        if once:
            if os.path.exists(once):
                return
            open(once, "w").close()
        raise RuntimeError("injected failure at step %d" % step)
