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
                           _AIR_SLOT_STOP_STEP, _AIR_SLOT_TEARING_DOWN)

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
        self.sigterm = _AirRunSigterm(self)
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
            # The flag first: air-run must know the rank polls before the
            # rank defers a SIGTERM on that ground.
            self._polled = True
            self._q.pack_into(mm, 8 * _AIR_SLOT_POLLS_STOP, 1)
        if self.sigterm.pending:
            self.sigterm.arm()
        if not self.stop_requested():
            return False
        return self.steps >= self._q.unpack_from(mm, 8 * _AIR_SLOT_STOP_STEP)[0]

    def polls(self):
        """Whether the rank has asked should_stop(): it takes part in the
        stop protocol. Read from the page, which the rank's forked children
        share."""
        return self._q.unpack_from(self._mm, 8 * _AIR_SLOT_POLLS_STOP)[0] != 0

    def stopping(self):
        """Whether the rank has reached the step air-run asked it to stop at
        (from the page: the rank's forked children read it too)."""
        steps, stop_step = (self._q.unpack_from(self._mm, 8 * slot)[0] for slot in (_AIR_SLOT_STEPS,
                                                                                   _AIR_SLOT_STOP_STEP))
        return self.stop_requested() and steps >= stop_step

    def stop_requested(self):
        """Whether air-run has asked this rank to stop (at some step)."""
        return self._q.unpack_from(self._mm, 8 * _AIR_SLOT_STOP_REQUESTED)[0] != 0

    def tearing_down(self):
        """Whether air-run is about to signal this rank itself."""
        return self._q.unpack_from(self._mm, 8 * _AIR_SLOT_TEARING_DOWN)[0] != 0

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


def _air_run_stop_verdict(first_sig, anchor, interrupted, sig, now, burst_s):
    """What a stop signal `sig` heard at `now` (monotonic seconds) means,
    given the request so far: its first signal `first_sig` (0: none yet),
    `anchor`, when that request's burst began, and whether a terminating
    signal (SIGTERM) is part of it (`interrupted`). Pure; the agent's
    core/run/stop_signals.cpp makes the same decision.

    "first": a new stop request. "same": part of the request already heard:
    Slurm's SIGTERM, SIGCONT, SIGTERM of one time limit or preemption, a
    wrapper's forwarded copy (within `burst_s` of `anchor`), or a warning
    signal (SIGUSR1/SIGUSR2 never mean "now"). "follows": the SIGTERM that
    follows a warning (the time limit after --signal=USR1@N): the same
    request, whose burst begins anew. "now": a second interrupt, later."""
    import signal

    if not first_sig:
        return "first"
    if sig in (signal.SIGUSR1, signal.SIGUSR2):
        return "same"
    if now - anchor < burst_s:
        return "same"
    if first_sig in (signal.SIGUSR1, signal.SIGUSR2) and not interrupted:
        return "follows"
    return "now"


class _AirRunSigterm:
    """Keeps a rank that calls air.should_stop() alive through a stop signal
    (SIGTERM, SIGUSR1, SIGUSR2) sent straight to it, so that it stops at the
    step air-run agrees on.

    Slurm (scancel, the time limit, preemption, --signal=USR1@N, srun's
    forwarded signals) signals every process of the step at once, the ranks
    with air-run: without this, a rank dies of the signal mid-step while
    air-run, signalled in the same instant, asks it to stop at the next one.
    The handler defers the signal instead: air-run got it too and writes the
    stop step into the page, where should_stop() finds it. Signals of one
    burst (Slurm's SIGTERM, SIGCONT, SIGTERM within milliseconds, a wrapper's
    copy: BURST_S) are one request. The signal goes through at once (its
    default action: the rank dies of it) when air-run tears the run down
    itself (the page says so before it signals), on a second SIGTERM later
    than the burst ("now", as for air-run), and when no stop request comes
    within WAIT_S: a signal air-run never got.

    A Python handler runs between bytecodes, so the decision is taken by a
    thread that reads the signal's byte from signal.set_wakeup_fd: a rank
    blocked in native code (a gloo collective) still dies at once of
    air-run's own SIGTERM. Where the program (asyncio) owns the wakeup fd
    already, the handler decides, between bytecodes.

    Processes forked from the rank (DataLoader workers, also those of an
    epoch that began before the first should_stop()) get the handler at
    the fork and defer alike while their rank polls: Slurm signals them too,
    and a rank whose workers died fails its next batch instead of reaching
    the stop step. The rank ends its workers as it exits. Until the rank
    polls, a child's signal goes through at once, as before."""

    WAIT_S = 5.0  # air-run picks the step at once; across nodes node 0 takes up to 2 s
    BURST_S = 1.0  # Slurm's pair comes within 3-10 ms; a person's second Ctrl-C after reading the line
    NAMES = ("SIGTERM", "SIGUSR1", "SIGUSR2")

    def __init__(self, progress):
        import threading

        self._progress = progress
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self.pending = True  # arm() has yet to run on the main thread
        self.armed = False  # SIGTERM's handler is the shim's
        self.handled = set()  # the signals whose handler is the shim's
        self.watching = False  # a thread decides as the signal lands
        self.deferred = False
        self._first = 0  # the request's first signal
        self._anchor = 0.0  # when its burst began
        self._interrupted = False  # a SIGTERM is part of it
        self._dying = False
        self._wakeup = -1  # the write end the thread's wakeup fd is
        register = getattr(os, "register_at_fork", None)
        if register is not None:
            register(after_in_child=self._arm_in_child)

    def _signals(self):
        import signal

        return [getattr(signal, name) for name in self.NAMES]

    def arm(self):
        """Installs the handler for each stop signal whose disposition is the
        default: a program's own handler (or SIG_IGN) is left alone. Only the
        main thread may set one, so should_stop() calls this until it is
        asked there."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        self.pending = False
        for sig in self._signals():
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, self._on_signal)
                self.handled.add(int(sig))
        self.armed = int(signal.SIGTERM) in self.handled
        if self.handled:
            self._watch()

    def _watch(self):
        """The thread that decides as a signal lands, through the wakeup fd
        (left to the program when it set one)."""
        import signal
        import threading

        try:
            r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except (AttributeError, OSError):
            return
        try:
            old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError, TypeError):
            old = None
        if old != -1:  # someone's already (or no wakeup fd at all): theirs stays
            if old is not None:
                signal.set_wakeup_fd(old)
            os.close(r)
            os.close(w)
            return
        os.set_blocking(r, True)
        self._wakeup = w
        self.watching = True

        def loop():
            while True:
                try:
                    data = os.read(r, 64)
                except InterruptedError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                for sig in data:
                    if sig in self.handled:
                        self._hear(sig)

        threading.Thread(target=loop, name="air-run-stop-signals", daemon=True).start()

    def _arm_in_child(self):
        """In a process just forked from the rank: the handler, unless the
        program set one of its own. No watching thread there (the rank's own
        would read the child's signals): the handler decides."""
        import signal
        import threading

        self._lock = threading.Lock()
        self.watching = False
        self.deferred = False
        self._dying = False
        self._first = 0
        self._interrupted = False
        try:
            signal.set_wakeup_fd(-1)
        except (ValueError, OSError):
            pass
        for sig in self._signals():
            try:
                if signal.getsignal(sig) in (signal.SIG_DFL, self._on_signal):
                    signal.signal(sig, self._on_signal)
                    self.pending = False
                    self.handled.add(int(sig))
            except (ValueError, OSError):  # forked from a thread that is not the main one
                pass
        self.armed = int(signal.SIGTERM) in self.handled

    def lets_through(self):
        """Whether a stop signal that arrives now ends the process at once
        whatever came before it. A forked child defers only while its rank
        polls; air-run's teardown, marked on the page they share, ends it
        otherwise."""
        if self._progress.tearing_down():
            return True
        # A child once its rank stops: the rank is ending its workers.
        return os.getpid() != self._pid and (not self._progress.polls() or self._progress.stopping())

    def rearm(self):
        """Puts the handler back after torch's DataLoader worker set its own
        SIGTERM handler in C (one that dies unless the worker's parent sent
        the signal): Python's table still names the shim's handler then."""
        import signal

        try:
            if self.armed and signal.getsignal(signal.SIGTERM) == self._on_signal:
                signal.signal(signal.SIGTERM, self._on_signal)
        except (ValueError, OSError):
            pass

    def _on_signal(self, signum, frame):
        if self.watching and not self._still_watching():
            self.watching = False  # the program (asyncio) took the wakeup fd since
        if not self.watching:
            self._hear(signum)

    def _still_watching(self):
        """Whether the wakeup fd is still the thread's (main thread only)."""
        import signal

        try:
            current = signal.set_wakeup_fd(-1)
        except (ValueError, OSError):
            return False
        ours = current == self._wakeup
        if ours:
            signal.set_wakeup_fd(current, warn_on_full_buffer=False)
        elif current != -1:
            signal.set_wakeup_fd(current)
        return ours

    def _hear(self, sig):
        """One stop signal, from the watching thread or the handler."""
        import threading
        import time

        import signal

        with self._lock:
            if self._dying or self.lets_through():
                verdict = "now"
            else:
                now = time.monotonic()
                verdict = _air_run_stop_verdict(self._first, self._anchor, self._interrupted, sig, now,
                                                self.BURST_S)
                if verdict == "first":
                    self._first, self._anchor = sig, now
                elif verdict == "follows":
                    self._anchor = now
                self._interrupted = self._interrupted or sig == signal.SIGTERM
            if verdict == "first":
                self.deferred = True
                timer = threading.Timer(self.WAIT_S, self._expire)
                timer.daemon = True  # a rank that stops and exits does not wait for it
                timer.start()
        if verdict == "now":
            self._die(sig)

    def _expire(self):
        """WAIT_S after a deferred signal: without a stop request air-run
        never got it, and the rank dies of it as it would have."""
        if not self._progress.stop_requested():
            self._die(self._first)

    def _die(self, sig):
        """Dies of `sig` (its default action). From a thread other than the
        main one the C handler is reset through libc, since only the main
        thread may call signal.signal and it may be inside a long native
        call; where that fails, the signal reaches the main thread's handler,
        which lets it through (deferred is set)."""
        import signal
        import threading

        self.deferred = True
        self._dying = True  # whatever comes next goes through
        if threading.current_thread() is threading.main_thread():
            signal.signal(sig, signal.SIG_DFL)
        else:
            try:
                import ctypes

                libc = ctypes.CDLL(None)
                libc.signal.restype = ctypes.c_void_p
                libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
                libc.signal(int(sig), None)  # None: NULL, that is SIG_DFL
            except Exception:
                pass
        os.kill(os.getpid(), sig)


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
