"""The shim's progress: counts a rank's steps and collectives into the page it
shares with air-run (core/run/progress.hpp) and answers air-run's stop and
Flight Recorder requests; _air_run_progress maps the page in the rank.
"""
import os
import sys

from air_run_patches import _AirRunImportHook
from air_run_slots import (_AIR_PAGE_BYTES, _AIR_SLOT_COLL_ENTERED, _AIR_SLOT_COLL_SEQ, _AIR_SLOT_FR_ARMED,
                           _AIR_SLOT_FR_DONE, _AIR_SLOT_FR_REQUEST, _AIR_SLOT_PID, _AIR_SLOT_POLLS_STOP,
                           _AIR_SLOT_STEPS, _AIR_SLOT_STOP_DEADLINE, _AIR_SLOT_STOP_REQUESTED,
                           _AIR_SLOT_STOP_STEP)

# ---- air-run embeds this file from the next line on ----
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
        self._base = 0  # set_steps(): the steps of the run before this attempt
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
        n += self._base
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

    def set_steps(self, n):
        """air.set_steps(n): the rank has made `n` steps so far (those of the
        checkpoint it resumed from); later counts go on from `n`, and the page
        says `n` at once, so that air-run's stop step and straggler view are
        in the run's steps rather than this launch's."""
        n = int(n)
        if n < 0:
            raise ValueError("air.set_steps: a step count is not negative, got %d" % n)
        self._base = n - max(self._by_source.values(), default=0)
        self.steps = n
        self._q.pack_into(self._mm, 8 * _AIR_SLOT_STEPS, n)

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
            mm = mmap.mmap(fd, _AIR_PAGE_BYTES)
        finally:
            os.close(fd)
        progress = _AirRunProgress(mm, path)
        sys._air_run_progress = progress
        hook = _AirRunImportHook(progress)
        sys.meta_path.insert(0, hook)
        hook.patch_loaded()
    except Exception:
        pass
