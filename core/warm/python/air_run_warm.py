"""The warm start's interpreter (--preload): imports a run's modules once and
forks every rank of every attempt from itself (core/warm/warm_start.cpp).

air-run writes it to the run folder as air_run_warm.py, with the set-up
error codes filled in; the placeholders below let it load as it is here.
"""
AIR_RUN_FAILED_CHDIR = AIR_RUN_FAILED_AFFINITY = AIR_RUN_FAILED_MEMPOLICY = 0

# ---- air-run embeds this file from the next line on ----
# Written by air-run for one run (--preload). A Python interpreter that has
# already imported the modules a run's ranks need, and forks one rank per
# request from air-run instead of every rank starting Python and importing
# torch again: on a restart the ranks are back in their loop in a fraction of
# the time. air-run sends each request over the socket that is this process's
# stdin: a 4-byte length, then NUL-terminated fields (core/warm/warm_start.cpp
# writes them: the parent's pid, cwd, -u, memory node, CPUs, argv, and what the
# rank's environment changes of the one this process started with) and,
# as SCM_RIGHTS, the rank's stdin, stdout, stderr, a "set up" pipe and the
# run's cgroup.procs (when there is one). Strings are bytes, decoded as
# Python decodes argv and environ (os.fsdecode), so any byte survives.
#
# Each rank is forked twice: the middle process exits at once, so the rank is
# re-parented to air-run (a child subreaper while ranks run), which reaps it,
# signals its process group and sees its exit status exactly as for a rank it
# started itself. The rank then makes itself what a fresh interpreter would
# be: its own process group, the parent-death signal, the run's cgroup, the
# rank's CPUs, working directory, environment, argv, sys.path[0] and standard
# streams, fresh seeds for numpy's and torch's generators, and air-run's per-rank
# shim (stacks, steps). Only then does it close the set-up pipe (air-run's
# "exec" of a rank) and run the target in __main__.
import ctypes
import io
import os
import socket
import struct
import sys
import time

# The spawn's set-up error codes (core/os/spawn_request.hpp): air-run writes
# them in for the names below when it writes this file.
_FAILED_CHDIR = AIR_RUN_FAILED_CHDIR
_FAILED_AFFINITY = AIR_RUN_FAILED_AFFINITY
_FAILED_MEMPOLICY = AIR_RUN_FAILED_MEMPOLICY
_PR_SET_PDEATHSIG = 1
_SIGKILL = 9
_MPOL_PREFERRED = 1
_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}


def _recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _recv_request(sock):
    """One request: (the JSON object, the fds that came with it), or None
    when air-run closed the socket (the run is over)."""
    fds = []
    size = struct.calcsize("i")
    msg, ancdata, _flags, _addr = sock.recvmsg(4, socket.CMSG_SPACE(8 * size))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % size
            fds.extend(struct.unpack("%di" % (usable // size), data[:usable]))
    if not msg:
        return None
    if len(msg) < 4:
        rest = _recv_exactly(sock, 4 - len(msg))
        if rest is None:
            return None
        msg += rest
    (length,) = struct.unpack("<I", msg)
    payload = _recv_exactly(sock, length)
    if payload is None:
        return None
    return _parse_request(payload), fds


def _parse_request(payload):
    """The request's fields; "env": what the rank's environment changes of
    this process's start environment, a value for each variable set, None
    for each unset (the rank's own few: RANK, its files, a new MASTER_PORT)."""
    fields = os.fsdecode(payload).split("\0")[:-1]
    if len(fields) < 8 or fields[0] != "air-run-warm-2":
        raise ValueError("not a request of this protocol")
    request = {"parent": int(fields[1]), "cwd": fields[2], "unbuffered": fields[3] == "1",
               "mem_node": int(fields[4]), "cpus": [int(c) for c in fields[5].split(",") if c]}
    argc = int(fields[6])
    request["argv"] = fields[7:7 + argc]
    if len(fields) < 8 + argc:
        raise ValueError("not a request of this protocol")
    at = 8 + argc
    count = int(fields[7 + argc])
    env = {}
    for item in fields[at:at + count]:
        name, _, value = item.partition("=")
        env[name] = value
    for name in fields[at + count:]:
        env[name] = None
    request["env"] = env
    return request


def _fail_setup(ready_fd, code):
    try:
        os.write(ready_fd, struct.pack("i", code))
    finally:
        os._exit(127)


# torch's thread count in a fresh interpreter of the ranks, when main()
# capped OpenMP for the imports (_cap_threads); None when it did not.
_FRESH_TORCH_THREADS = None


def _cap_threads(modules):
    """Before importing torch: torch 2.x starts OpenMP's pool at import,
    sized to the CPUs where OMP_NUM_THREADS is unset (15 threads on a 16-CPU
    GPU host, so one rank per node), and a process with a pool cannot be
    forked (_refusal). Then the imports run with one OpenMP thread, and a
    fresh interpreter started beside them says what torch's thread count is
    without the cap: each rank sets it back (_uncap_threads). Returns that
    interpreter, or None when nothing is capped."""
    if "torch" not in modules or "OMP_NUM_THREADS" in os.environ:
        return None
    import subprocess

    # At the lowest priority: where CPUs are few it must not slow the first
    # attempt's fresh ranks, which import torch at the same time.
    probe = subprocess.Popen([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             preexec_fn=lambda: os.nice(19))
    os.environ["OMP_NUM_THREADS"] = "1"
    return probe


def _fresh_threads(probe):
    """The probe's answer (a thread count), or None when it gave none."""
    try:
        out, _ = probe.communicate(timeout=300)
        count = int(out.decode().strip().splitlines()[-1])
        return count if count > 0 else None
    except Exception:
        probe.kill()
        probe.wait()
        return None


def _uncap_threads():
    """In a rank, once its environment is set: torch's thread count as a
    fresh interpreter of the rank sets it, the rank's MKL_NUM_THREADS or
    OMP_NUM_THREADS (first number) when it has one, as torch reads them,
    else what the probe said."""
    count = _FRESH_TORCH_THREADS
    for name in ("MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        text = os.environ.get(name, "").split(",")[0].strip()
        if text.isdigit() and int(text) > 0:
            count = int(text)
            break
    torch = sys.modules.get("torch")
    if torch is not None and count and torch.get_num_threads() != count:
        torch.set_num_threads(count)


def _become_rank(request, fds, middle, gate, sock):
    """In the rank, before any of its code runs. `gate`: a pipe's read end
    whose writer is the middle process, so EOF says it is leaving."""
    stdin_fd, stdout_fd, stderr_fd, ready_fd = fds[:4]
    cgroup_fd = fds[4] if len(fds) > 4 else -1
    sock.detach()  # the fd is closed below, never again by this object
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; a rank must not
    os.setpgid(0, 0)
    # Wait for the middle process to be gone: from then on the parent is
    # air-run. Blocked, not spinning: on a busy host the spinning ranks would
    # take the CPU the middle processes need to leave. Its fds close a moment
    # before its children are handed on, hence the short wait after.
    os.read(gate, 1)
    os.close(gate)
    while os.getppid() == middle:
        time.sleep(0.0002)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    if os.getppid() != request["parent"]:
        os._exit(127)  # air-run died before the rank got going
    if cgroup_fd >= 0:
        try:
            os.write(cgroup_fd, str(os.getpid()).encode())
        except OSError:
            pass  # air-run finds it outside and gives the cgroup up, as for a refused move
    if request.get("cpus"):
        try:
            os.sched_setaffinity(0, request["cpus"])
        except OSError as e:
            _fail_setup(ready_fd, _FAILED_AFFINITY | e.errno)
    node = request.get("mem_node", -1)
    number = _SET_MEMPOLICY.get(os.uname().machine)
    if node >= 0 and number is not None:
        mask = (ctypes.c_ulong * 16)()
        mask[node // 64] = 1 << (node % 64)
        if libc.syscall(number, _MPOL_PREFERRED, mask, 16 * 64 + 1) != 0:
            _fail_setup(ready_fd, _FAILED_MEMPOLICY | ctypes.get_errno())
    try:
        os.chdir(request["cwd"])
    except OSError as e:
        _fail_setup(ready_fd, _FAILED_CHDIR | e.errno)
    for fd, target in ((stdin_fd, 0), (stdout_fd, 1), (stderr_fd, 2)):
        os.dup2(fd, target)
    for fd in set(fds) | {3}:  # 3: the zygote's socket
        if fd > 2 and fd != ready_fd:
            try:
                os.close(fd)
            except OSError:
                pass
    _set_environment(request["env"])
    if _FRESH_TORCH_THREADS is not None:
        _uncap_threads()
    _reopen_std_streams(request.get("unbuffered", False))
    _reseed()
    start = getattr(sys, "_air_run_rank_start", None)
    if start is not None:
        start()
    os.close(ready_fd)  # the rank is set up: air-run's "exec" is done


# The environment this process started with (main() takes it first), as
# bytes: what air-run's requests are changes of (warm_start.cpp).
_START_ENVIRONMENT = None
# The names whose value the zygote itself changed since (the OpenMP cap, an
# import that sets a variable): put back to the start's in every rank.
_ZYGOTE_CHANGED = frozenset()


def _environ_data():
    """os.environ's own mapping of bytes to bytes (the C environment's
    mirror), read without encoding or decoding each variable; a copy where
    an interpreter has no such attribute."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        return data
    return {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}


def _zygote_changes(start, now):
    """The names whose value differs between `start` and `now` (bytes
    dicts): one comparison when none does, as when nothing set a variable."""
    if start == now:
        return frozenset()
    return frozenset(set(start.keys() ^ now.keys()) | {n for n, v in now.items() if n in start and start[n] != v})


def _set_environment(changes):
    """Makes os.environ (and the C environment under it) the rank's: the
    start environment with `changes` (name: value, None to unset) applied,
    and what the zygote changed put back. Only those few names are looked
    at and only those that differ are set or unset, through os.environ, so
    that it and the C environment agree: the cost is the rank's own
    variables', not the environment's size (with 100,000 variables, taking
    the whole environment in each request cost a warm rank 1.5 s)."""
    start = _START_ENVIRONMENT if _START_ENVIRONMENT is not None else dict(_environ_data())
    wanted = {name: start.get(name) for name in _ZYGOTE_CHANGED}
    for name, value in changes.items():
        wanted[os.fsencode(name)] = None if value is None else os.fsencode(value)
    data = _environ_data()
    for name, value in wanted.items():
        if data.get(name) == value:
            continue
        if value is None:
            del os.environ[os.fsdecode(name)]
        else:
            os.environ[os.fsdecode(name)] = os.fsdecode(value)


def _sync_c_environment():
    """Makes the C environment (what getenv reads) os.environ again. A library
    that a preloaded module loads may call setenv() itself, which os.environ
    never sees: GNU readline, loaded by torch's imports on Python 3.13, sets
    LINES and COLUMNS. A fresh rank has neither, and the ranks forked from
    here would have them in C but not in os.environ."""
    try:
        import ctypes

        environ = ctypes.POINTER(ctypes.c_char_p).in_dll(ctypes.CDLL(None), "environ")
    except Exception:
        return
    c_env, i = {}, 0
    while environ[i] is not None:
        name, _, value = environ[i].partition(b"=")
        c_env[name] = value
        i += 1
    data = _environ_data()
    for name, value in c_env.items():
        if name not in data:
            os.unsetenv(name)
        elif data[name] != value:
            os.putenv(name, data[name])


def _reseed():
    """The generators a fresh interpreter seeds from entropy when it starts
    or imports: one state per rank and per attempt, never the zygote's.
    Python's random reseeds itself after a fork (os.register_at_fork);
    numpy's global generator and torch's default CPU generator (from which
    a DataLoader draws its base seed) are seeded here. CUDA's generators are
    left alone: a fresh interpreter gives them a fixed default seed when CUDA
    starts, and CUDA never started in the zygote, so they start the same."""
    if "numpy.random" in sys.modules:
        try:
            sys.modules["numpy.random"].seed()
        except Exception:
            pass
    torch = sys.modules.get("torch")
    generator = getattr(torch, "default_generator", None) if torch is not None else None
    if generator is not None:
        try:
            generator.seed()  # non-deterministic, as at torch's import; torch.seed() would seed CUDA too
        except Exception:
            pass


def _reopen_std_streams(unbuffered):
    """The standard streams a fresh interpreter would have opened on the
    rank's fds 0-2 (the zygote's are on fds that now point elsewhere)."""
    encoding = sys.stdout.encoding if sys.stdout else "utf-8"

    def writer(fd, errors, stderr):
        raw = io.FileIO(fd, "w", closefd=False)
        tty = raw.isatty()
        buffer = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(buffer, encoding=encoding, errors=errors,
                                line_buffering=(stderr or tty) and not unbuffered, write_through=unbuffered)

    reader = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=encoding,
                              errors="strict")
    sys.stdin = sys.__stdin__ = reader
    sys.stdout = sys.__stdout__ = writer(1, "strict", False)
    sys.stderr = sys.__stderr__ = writer(2, "backslashreplace", True)


# Requests whose rank's pid has not been read yet, in request order:
# [read end of the middle process's pipe, bytes read, reply or None].
_pending = []


def _serve(sock):
    """Forks a rank for every request. Returns only in a rank, with its
    request. air-run sends a whole attempt's requests at once: each middle
    process is forked as its request arrives, and the replies go back in
    request order as their pids come in, so the forks overlap."""
    import select

    while True:
        waiting = [p[0] for p in _pending if p[2] is None]
        readable, _, _ = select.select([sock] + waiting, [], [])
        if sock in readable:
            got = _recv_request(sock)
            if got is None:
                os._exit(0)
            request, fds = got
            result = _fork_rank(request, fds, sock)
            if isinstance(result, tuple):
                return result  # we are the rank
            for fd in fds:
                os.close(fd)
            rank = request["env"].get("RANK")
            _pending.append([result, b"", None, rank] if isinstance(result, int) else [-1, b"", result, rank])
        for p in _pending:
            if p[2] is None and p[0] in readable:
                chunk = os.read(p[0], 32)
                p[1] += chunk
                if not chunk or p[1].endswith(b"\n"):
                    os.close(p[0])
                    text = p[1].decode().strip()
                    p[2] = ("pid " + text) if text else "error fork failed"
                    _test_die_after_fork(p)
        while _pending and _pending[0][2] is not None:
            sock.sendall(_pending.pop(0)[2].encode() + b"\n")


def _test_die_after_fork(pending):
    """Tests only (tests/e2e/test_warm_start.sh): AIR_RUN_WARM_TEST_DIE_AFTER_FORK=N
    ends this process once rank N is forked, before its pid is answered: the
    interpreter dying mid-fork, which must not start rank N twice."""
    rank = os.environ.get("AIR_RUN_WARM_TEST_DIE_AFTER_FORK")
    if rank is not None and len(pending) > 3 and pending[3] == rank and pending[2].startswith("pid "):
        os._exit(1)


def _fork_rank(request, fds, sock):
    """Forks the middle process, which forks the rank and exits. Returns the
    read end the rank's pid arrives on (or an error text); in the rank, its
    (request, fds)."""
    if len(fds) < 4:
        return "error expected at least 4 fds, got %d" % len(fds)
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        me = os.getpid()
        try:
            gate, gate_open = os.pipe()
            rank = os.fork()
        except BaseException:
            os._exit(0)
        if rank == 0:
            try:
                os.close(r)
                os.close(w)
                os.close(gate_open)
                for p in _pending:  # other requests' pipes: not the rank's
                    if p[0] >= 0 and p[2] is None:
                        os.close(p[0])
                _become_rank(request, fds, me, gate, sock)
            except BaseException:
                _fail_setup(fds[3], 5)  # EIO: air-run reports a rank that could not be set up
            return request, fds
        try:
            try:
                os.setpgid(rank, rank)  # both sides, so the group exists before anyone signals it
            except OSError:
                pass
            os.write(w, str(rank).encode() + b"\n")
        except BaseException:
            pass
        os._exit(0)
    # The middle process leaves (reaped by the kernel: SIGCHLD is ignored
    # here) on its own. The rank waits until it is air-run's child before it
    # says it is set up, and air-run reaps nothing of a rank before that.
    os.close(w)
    return r


def _exit(code):
    """The interpreter's exit without its final teardown: non-daemon threads
    joined, atexit handlers run, streams flushed, as Python does, then gone.
    Tearing down every module would write to each page the rank shares with
    the zygote (reference counts), copying them all: seconds of exit for
    nothing, as the kernel frees the memory anyway."""
    if isinstance(code, SystemExit):
        code = code.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        try:
            print(code, file=sys.stderr)
        except Exception:
            pass
        code = 1
    sys._air_run_exit_status = code  # for the shim's exit handlers: the store's linger (air_run_store.py)
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except Exception:
            pass
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code & 0xFF)


def _record(e):
    """Hands the exception the rank dies of to the shim's recorder directly:
    the script may have replaced sys.excepthook, and a fresh interpreter's
    exit-time fallback (sys.last_exc) is never set here."""
    record = getattr(sys, "_air_run_record_exception", None)
    if record is not None:
        try:
            record(type(e), e, e.__traceback__)
        except Exception:
            pass


def _path_first(entry):
    """sys.path's first entry as a fresh `python script` or `python -m`
    makes it; none under PYTHONSAFEPATH (3.11+), as there. The zygote's
    path has none: its '' was taken off before any import (warm_start.cpp)."""
    if not getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, entry)


def _run(request):
    """The rank's target, run as `python [-u] script args` or `python [-u] -m
    module args` would run it: in __main__, with the interpreter's exit."""
    import runpy

    argv = request["argv"]
    at = 1
    while at < len(argv) and argv[at] == "-u":
        at += 1
    sys.orig_argv = list(argv)
    try:
        if argv[at] == "-m":
            sys.argv = argv[at + 1:]
            _path_first(os.getcwd())
            runpy._run_module_as_main(argv[at + 1], alter_argv=True)
        else:
            script = argv[at]
            sys.argv = argv[at:]
            try:
                with open(script, "rb") as f:
                    source = f.read()
            except OSError as e:
                print("%s: can't open file %r: [Errno %d] %s" % (argv[0], os.path.abspath(script), e.errno,
                                                                  e.strerror), file=sys.stderr)
                _exit(2)
            _path_first(os.path.dirname(os.path.realpath(script)))
            if sys.version_info >= (3, 9):  # absolute since 3.9: joined to the cwd, not normalised
                script = os.path.join(os.getcwd(), script)
            import __main__
            import builtins

            main = __main__.__dict__
            main.clear()
            main.update(__name__="__main__", __doc__=None, __package__=None, __loader__=None, __spec__=None,
                        __file__=script, __cached__=None, __builtins__=builtins)
            exec(compile(source, script, "exec"), main)
    except SystemExit as e:
        _record(e)
        _exit(e)
    except BaseException as e:
        # The traceback a fresh interpreter prints: from the target's frames on.
        tb = e.__traceback__
        here = (os.path.abspath(__file__), os.path.abspath(runpy.__file__))
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in here:
            tb = tb.tb_next
        e.__traceback__ = tb  # the hook prints the exception's own traceback
        _record(e)
        sys.excepthook(type(e), e, tb)
        if isinstance(e, KeyboardInterrupt):
            import signal

            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        _exit(1)
    _exit(0)


def _refusal(modules):
    """Why forking this process would not be safe, or None."""
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        threads = 1
    if threads > 1:
        return "importing %s started %d threads: forking would copy them mid-use" % (", ".join(modules),
                                                                                    threads - 1)
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch else None
    if cuda is not None and getattr(cuda, "is_initialized", lambda: False)():
        return "importing %s initialised CUDA, which a forked child cannot use" % ", ".join(modules)
    return None


_PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper(on):
    """While importing, this process is a child subreaper: a process an
    import started and orphaned (a daemon's double fork and setsid) becomes
    its child, so _end_import_children finds it. Off again before any rank
    is forked: a rank's middle process must hand the rank on to air-run."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)


def _children():
    found = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open("/proc/self/task/%s/children" % task) as f:
                found.update(int(p) for p in f.read().split())
    except OSError:
        pass
    return found


def _end_import_children():
    """Kills and reaps every process the imports started (and what those
    started: each killed parent hands its children to this subreaper), and
    returns how many there were. Forking ranks beside them would leave them
    outside every attempt's containment, alive after the run."""
    import signal

    ended = set()
    for _ in range(1000):  # each round ends one generation; bounded all the same
        children = _children()
        if not children:
            break
        for pid in children:
            ended.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    return len(ended)


def main(modules):
    global _START_ENVIRONMENT, _ZYGOTE_CHANGED
    _START_ENVIRONMENT = dict(_environ_data())  # before anything here sets a variable
    # fd 0 is the socket to air-run; the zygote reads nothing else.
    sock = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if sock.fileno() != 3:
        os.dup2(sock.fileno(), 3)
        old = sock.detach()
        os.close(old)
        sock = socket.socket(fileno=3)
    import importlib

    global _FRESH_TORCH_THREADS
    probe = _cap_threads(modules)  # started before the subreaper: what it leaves is not the imports'
    _set_subreaper(True)
    try:
        for name in modules:
            importlib.import_module(name)
    except BaseException as e:
        if probe is not None:
            probe.kill()
            probe.wait()
        _end_import_children()
        sock.sendall(("error importing %s: %s: %s\n" % (name, type(e).__name__, str(e).splitlines()[0] if str(e)
                                                         else "")).encode())
        os._exit(1)
    if probe is not None:
        _FRESH_TORCH_THREADS = _fresh_threads(probe)
        if _FRESH_TORCH_THREADS is None:
            _end_import_children()
            sock.sendall(b"error a fresh interpreter did not say torch's thread count without OMP_NUM_THREADS\n")
            os._exit(1)
    started = _end_import_children()
    _set_subreaper(False)
    if started:
        sock.sendall(("error importing %s started %d processes (killed): a rank forked beside them would "
                      "leave them outside the run\n" % (", ".join(modules), started)).encode())
        os._exit(1)
    import gc

    # What was imported stays out of the collector's sight: a collection in a
    # rank would otherwise write to (and so copy) every shared object's page.
    gc.collect()
    gc.freeze()
    refusal = _refusal(modules)
    if refusal:
        sock.sendall(("error " + refusal + "\n").encode())
        os._exit(1)
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the middle processes reap themselves
    _sync_c_environment()
    _ZYGOTE_CHANGED = _zygote_changes(_START_ENVIRONMENT, _environ_data())
    sock.sendall(b"ready\n")
    # From here on nothing is written to air-run's pipes: they are not read.
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    request, _fds = _serve(sock)
    _run(request)
