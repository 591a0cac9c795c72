"""The rank shim's Python (core/run/python/), imported as plain modules: the
progress page's layout against the C++ header generated from the same table,
step and collective counting on a page in memory, the torch patches on fake
modules, and the stack dump armed by air_run_stacks."""

import os
import re
import signal
import struct
import sys
import textwrap
import types

import pytest

from conftest import REPO_ROOT, rank_python_path, run_python


def read_slot(page, index):
    return struct.unpack_from("<Q", page, 8 * index)[0]


def cpp_layout(generated):
    """(page bytes, {slot name: index}, [collective names]) as the C++ side
    sees them: read from the generated core/run/progress_slots.hpp."""
    with open(os.path.join(generated, "core", "run", "progress_slots.hpp")) as f:
        text = f.read()
    page = int(re.search(r"k_progress_file_size = (\d+);", text).group(1))
    slots = {m.group(1): int(m.group(2)) for m in re.finditer(r"inline constexpr int (\w+) = (\d+);", text)}
    names_block = re.search(r"k_collective_names\{(.*?)\};", text, re.S).group(1)
    return page, slots, re.findall(r'"(\w+)"', names_block)


def table_names():
    """{C++ slot name: Python constant name}, from core/run/progress_slots.def."""
    names = {}
    with open(os.path.join(REPO_ROOT, "core", "run", "progress_slots.def")) as f:
        for line in f:
            if line.startswith("slot "):
                _, _, cxx, py = line.split()[:4]
                names[cxx] = py
    return names


@pytest.fixture
def progress(rank_python, tmp_path):
    import air_run_progress

    page = bytearray(4096)
    # should_stop() installs the shim's SIGTERM handler: not pytest's for good.
    handler = signal.getsignal(signal.SIGTERM)
    yield air_run_progress._AirRunProgress(page, str(tmp_path / "rank0.progress")), page
    signal.signal(signal.SIGTERM, handler)


def test_slots_agree_with_the_generated_cpp_header(rank_python):
    import air_run_slots

    page, slots, names = cpp_layout(rank_python)
    assert page == air_run_slots._AIR_PAGE_BYTES == 4096
    py_names = table_names()
    assert set(py_names) == set(slots) and len(slots) == 17
    for cxx, index in slots.items():
        assert getattr(air_run_slots, py_names[cxx]) == index, cxx
    assert sorted(slots.values()) == list(range(len(slots)))  # distinct, none left out
    assert 8 * len(slots) <= page
    assert list(air_run_slots._AIR_COLLECTIVES) == names
    assert names[0] == "all_reduce" and names[-2:] == ["ddp_all_reduce", "work_wait"]


def test_ddp_all_reduce_is_numbered_as_air_run_names_it(rank_python):
    import air_run_patches

    _, _, names = cpp_layout(rank_python)
    assert names[air_run_patches._AIR_OP_DDP - 1] == "ddp_all_reduce"
    assert names[air_run_patches._AIR_OP_WORK_WAIT - 1] == "work_wait"


def test_the_rank_is_counted_by_its_furthest_source(progress):
    p, page = progress
    import air_run_slots as s

    assert read_slot(page, s._AIR_SLOT_PID) == os.getpid()
    p.count("opt-a", 1)
    p.count("opt-b", 1)  # two optimizers stepping once: one training step
    assert p.steps == 1 and read_slot(page, s._AIR_SLOT_STEPS) == 1
    assert read_slot(page, s._AIR_SLOT_BUSY_STEPS) == 0  # the first step has no busy time
    p.count("opt-a", 2)
    assert read_slot(page, s._AIR_SLOT_STEPS) == 2
    assert read_slot(page, s._AIR_SLOT_BUSY_STEPS) == 1
    assert read_slot(page, s._AIR_SLOT_LAST_STEP) > 0
    p.step()  # air.step(): its own source, from 0
    assert p.steps == 2
    p.step()
    p.step()
    assert p.steps == 3 and read_slot(page, s._AIR_SLOT_STEPS) == 3


def test_a_stop_request_is_honoured_at_the_agreed_step(progress):
    p, page = progress
    import air_run_slots as s

    assert not p.should_stop() and p.stop_step() is None and p.stop_deadline() is None
    assert read_slot(page, s._AIR_SLOT_POLLS_STOP) == 1
    struct.pack_into("<Q", page, 8 * s._AIR_SLOT_STOP_STEP, 2)
    struct.pack_into("<Q", page, 8 * s._AIR_SLOT_STOP_REQUESTED, 1)
    p.count("opt", 1)
    assert not p.should_stop() and p.stop_step() == 2
    p.count("opt", 2)
    assert p.should_stop()


def test_collectives_are_timed_under_their_number_and_nest_once(progress):
    p, page = progress
    import air_run_patches
    import air_run_slots as s

    seen = []

    def all_reduce(x):
        seen.append((read_slot(page, s._AIR_SLOT_COLL_SEQ), read_slot(page, s._AIR_SLOT_COLL_OP),
                     read_slot(page, s._AIR_SLOT_COLL_ENTERED) > 0))
        return x + 1

    c10d = types.ModuleType("fake_c10d")
    c10d.all_reduce = all_reduce
    c10d.broadcast = lambda x: c10d.all_reduce(x)  # a collective built on another
    c10d.not_a_collective = lambda: None
    air_run_patches._air_run_patch_collectives(c10d, p)
    assert c10d.all_reduce(1) == 2
    assert seen[-1] == (1, s._AIR_COLLECTIVES.index("all_reduce") + 1, True)
    assert read_slot(page, s._AIR_SLOT_COLL_ENTERED) == 0  # left
    c10d.broadcast(1)
    assert seen[-1] == (2, s._AIR_COLLECTIVES.index("broadcast") + 1, True)  # counted once, as broadcast
    assert c10d.all_reduce._air_run_timed and not hasattr(c10d.not_a_collective, "_air_run_timed")
    timed = c10d.all_reduce
    air_run_patches._air_run_patch_collectives(c10d, p)
    assert c10d.all_reduce is timed  # never wrapped twice


def test_modules_loaded_before_the_rank_are_patched_and_re_exported(progress, monkeypatch):
    p, page = progress
    import air_run_patches
    import air_run_slots as s

    c10d = types.ModuleType("torch.distributed.distributed_c10d")
    c10d.barrier = lambda: "done"
    exports = types.ModuleType("torch.distributed")
    exports.barrier = c10d.barrier
    monkeypatch.setitem(sys.modules, "torch.distributed.distributed_c10d", c10d)
    monkeypatch.setitem(sys.modules, "torch.distributed", exports)
    for other in ("torch.optim.optimizer", "torch.nn.parallel.distributed"):  # a real torch stays as it is
        monkeypatch.delitem(sys.modules, other, raising=False)
    air_run_patches._AirRunImportHook(p).patch_loaded()
    assert exports.barrier is c10d.barrier and exports.barrier._air_run_timed
    assert exports.barrier() == "done"
    assert read_slot(page, s._AIR_SLOT_COLL_OP) == s._AIR_COLLECTIVES.index("barrier") + 1


def test_optimizer_steps_are_counted_on_torch_1(progress):
    p, page = progress
    import air_run_patches

    class Optimizer:  # torch 1.x: no global step hook
        def __init__(self):
            pass

    class SGD(Optimizer):
        def step(self):
            return "stepped"

    class Momentum(SGD):
        def step(self):  # calls super().step(): still one step
            return super().step()

    module = types.ModuleType("torch.optim.optimizer")
    module.Optimizer = Optimizer
    air_run_patches._air_run_patch_optimizers(module, p)
    opt = Momentum()
    assert opt.step() == "stepped"
    opt.step()
    assert p.steps == 2 and read_slot(page, 1) == 2


def test_the_stack_file_gets_every_thread_on_the_signal(tmp_path):
    stack_file = tmp_path / "rank0.stack"
    script = textwrap.dedent("""\
        import os, signal, sys, time
        sys.path[:0] = %r
        os.setpgid(0, 0)  # the rank leads its group, as under air-run
        import air_run_stacks
        air_run_stacks._air_run_arm()
        os.kill(os.getpid(), signal.SIGRTMIN + 1)
        time.sleep(0.2)
        print("alive")
        """) % (rank_python_path(),)
    env = dict(os.environ, AIR_RUN_STACK_FILE=str(stack_file), AIR_RUN_STACK_SIGNAL=str(signal.SIGRTMIN + 1))
    out = run_python(["-c", script], env=env)
    assert out.returncode == 0, out.stderr
    assert "alive" in out.stdout
    stacks = stack_file.read_text()
    assert "most recent call first" in stacks and 'File "<string>"' in stacks


def test_a_torch_without_libuv_gets_the_classic_store(rank_python):
    """Debian 13's torch 2.6 has no libuv: its default store request fails
    init_process_group; the shim retries that one error without libuv."""
    import air_run_patches

    calls = []

    def create(host, port, rank, world_size, timeout, use_libuv=True):
        calls.append(use_libuv)
        if use_libuv:
            raise RuntimeError("use_libuv was requested but PyTorch was build without libuv support")
        return "store"

    rendezvous = types.SimpleNamespace(_create_c10d_store=create)
    air_run_patches._air_run_patch_rendezvous(rendezvous, None)
    assert rendezvous._create_c10d_store("h", 1, 0, 2, 30, True) == "store"
    assert calls == [True, False]
    calls.clear()
    assert rendezvous._create_c10d_store("h", 1, 0, 2, 30, use_libuv=True) == "store"
    assert calls == [True, False]

    def broken(*args, **kwargs):
        raise RuntimeError("address in use")

    other = types.SimpleNamespace(_create_c10d_store=broken)
    air_run_patches._air_run_patch_rendezvous(other, None)
    with pytest.raises(RuntimeError, match="address in use"):
        other._create_c10d_store("h", 1, 0, 2, 30, True)


def test_a_listening_port_is_seen_without_connecting(rank_python):
    import socket

    import air_run_patches

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    assert air_run_patches._air_run_listening(port) is False  # bound, not listening
    server.listen()
    assert air_run_patches._air_run_listening(port) is True
    server.close()
    assert air_run_patches._air_run_listening(port) is False
    if socket.has_ipv6:
        try:
            six = socket.socket(socket.AF_INET6)
            six.bind(("::1", 0))
        except OSError:
            return  # no IPv6 loopback here
        six.listen()
        assert air_run_patches._air_run_listening(six.getsockname()[1]) is True
        six.close()


def test_the_store_wait_ends_when_the_server_listens(rank_python):
    import socket
    import threading
    import time

    import air_run_patches

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    late = threading.Timer(0.2, server.listen)
    start = time.monotonic()
    late.start()
    assert air_run_patches._air_run_wait_for_store(port, 30) is True
    assert time.monotonic() - start >= 0.2
    late.join()
    server.close()


def test_the_store_wait_gives_up_at_the_timeout_or_without_proc_net(rank_python):
    import air_run_patches

    slept = []
    assert air_run_patches._air_run_wait_for_store(1, 0.0, sleep=slept.append, listening=lambda p: False) is False
    assert air_run_patches._air_run_wait_for_store(1, 30, sleep=slept.append, listening=lambda p: None) is False
    assert slept == []
    answers = iter([False, False, True])
    assert air_run_patches._air_run_wait_for_store(1, 30, sleep=slept.append,
                                                   listening=lambda p: next(answers)) is True
    assert slept == [0.002, 0.002]


@pytest.mark.parametrize("env, rank, waits", [
    ({"RANK": "1", "LOCAL_RANK": "1"}, 1, True),  # rank 0's node: wait for its server
    ({"RANK": "0", "LOCAL_RANK": "0"}, 0, False),  # the server itself
    ({"RANK": "5", "LOCAL_RANK": "1"}, 5, False),  # another node: torch's own retries
    ({"RANK": "1", "LOCAL_RANK": "1", "TORCHELASTIC_USE_AGENT_STORE": "True"}, 1, False),
    ({}, 1, False),  # not started by a launcher
])
def test_only_a_rank_on_rank_0s_node_waits_for_the_store(rank_python, monkeypatch, env, rank, waits):
    import datetime

    import air_run_patches

    for name in ("RANK", "LOCAL_RANK", "TORCHELASTIC_USE_AGENT_STORE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    events = []
    monkeypatch.setattr(air_run_patches, "_air_run_wait_for_store",
                        lambda port, seconds: events.append(("wait", port, seconds)))
    rendezvous = types.SimpleNamespace(_create_c10d_store=lambda *a, **k: events.append(("create",)) or "store")
    air_run_patches._air_run_patch_rendezvous(rendezvous, None)
    timeout = datetime.timedelta(seconds=90)
    assert rendezvous._create_c10d_store("127.0.0.1", 29500, rank, 8, timeout) == "store"
    assert events == ([("wait", 29500, 90.0)] if waits else []) + [("create",)]
    events.clear()
    assert rendezvous._create_c10d_store("localhost", port=29501, rank=rank, world_size=8,
                                         timeout=timeout) == "store"
    assert events == ([("wait", 29501, 90.0)] if waits else []) + [("create",)]
    events.clear()
    # A store on another machine (TEST-NET-1: never this host's), or one that
    # does not resolve: torch connects at once, as without the shim.
    for host in ("192.0.2.1", "no-such-host.invalid"):
        assert rendezvous._create_c10d_store(host, 29502, rank, 8, timeout) == "store"
    assert events == [("create",), ("create",)]


def test_a_local_address_is_told_from_another_machines(rank_python):
    import air_run_patches

    assert air_run_patches._air_run_is_local_address("127.0.0.1") is True
    assert air_run_patches._air_run_is_local_address("localhost") is True  # without /etc/hosts too
    assert air_run_patches._air_run_is_local_address("LocalHost.") is True
    assert air_run_patches._air_run_is_local_address("192.0.2.1") is False
    assert air_run_patches._air_run_is_local_address("no-such-host.invalid") is False


# A rank's SIGTERM during the stop protocol (_AirRunSigterm): each case runs
# in a Python of its own, on a page in memory, with the wait for a stop
# request cut to 0.5 s.
SIGTERM_PRELUDE = """\
import os, signal, struct, sys, threading, time
sys.path[:0] = %r
import air_run_progress, air_run_slots as s
page = bytearray(4096)
p = air_run_progress._AirRunProgress(page, "unused")
p.sigterm.WAIT_S = 0.5
p.sigterm.BURST_S = 0.3
def slot(index, value):
    struct.pack_into("<Q", page, 8 * index, value)
def sigterm():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # the handler runs between bytecodes
"""


def run_sigterm_case(body):
    script = SIGTERM_PRELUDE % (rank_python_path(),) + textwrap.dedent(body)
    return run_python(["-c", script], timeout=60)


def test_a_polling_rank_defers_sigterm_to_the_stop_step():
    out = run_sigterm_case("""\
        assert not p.should_stop() and p.sigterm.armed
        sigterm()
        assert p.sigterm.deferred and not p.should_stop()
        slot(s._AIR_SLOT_STOP_STEP, 2)
        slot(s._AIR_SLOT_STOP_REQUESTED, 1)  # air-run got the signal too
        p.count("opt", 1)
        time.sleep(1)  # past the wait: the request keeps the rank alive
        assert not p.should_stop()
        p.count("opt", 2)
        assert p.should_stop()
        print("stopped at", p.steps)
        """)
    assert out.returncode == 0, out.stderr
    assert "stopped at 2" in out.stdout


def test_a_sigterm_air_run_never_got_ends_the_rank_after_the_wait():
    out = run_sigterm_case("""\
        p.should_stop()
        began = time.monotonic()
        sigterm()
        print("deferred", flush=True)
        time.sleep(10)
        print("alive after", time.monotonic() - began)
        """)
    assert out.returncode == -signal.SIGTERM, (out.stdout, out.stderr)
    assert "deferred" in out.stdout and "alive" not in out.stdout


@pytest.mark.parametrize("case", ["tearing_down", "second", "not_polled"])
def test_sigterm_goes_through_at_once(case):
    # air-run's own teardown marks the page first; a second SIGTERM after the
    # burst means "now"; a rank that never asked should_stop() has no handler.
    body = {
        "tearing_down": "p.should_stop()\nslot(s._AIR_SLOT_TEARING_DOWN, 1)\nsigterm()\n",
        "second": "p.should_stop()\nsigterm()\nprint('deferred', flush=True)\ntime.sleep(0.4)\nsigterm()\n",
        "not_polled": "sigterm()\n",
    }[case]
    out = run_sigterm_case(body + "time.sleep(0.2)\nprint('alive')\n")
    assert out.returncode == -signal.SIGTERM, (out.stdout, out.stderr)
    assert "alive" not in out.stdout
    assert ("deferred" in out.stdout) == (case == "second")


def test_a_forked_child_defers_like_the_rank():
    # A DataLoader worker forked from the rank gets Slurm's SIGTERM too: it
    # lives on to the stop step (its rank ends it), or dies when air-run
    # tears down, or after the wait without a stop request.
    out = run_sigterm_case("""\
        p.should_stop()
        def child(then):
            pid = os.fork()
            if pid == 0:
                sigterm()
                then()
                time.sleep(2)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            return os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exited"
        def stop_requested():
            slot(s._AIR_SLOT_STOP_STEP, 5)
            slot(s._AIR_SLOT_STOP_REQUESTED, 1)
        def tearing_down():
            slot(s._AIR_SLOT_TEARING_DOWN, 1)
            sigterm()
        print("waited", child(lambda: None))
        print("asked", child(stop_requested))
        print("torn down", child(tearing_down))
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["waited %d" % signal.SIGTERM, "asked exited",
                                          "torn down %d" % signal.SIGTERM]


def test_a_child_forked_before_the_first_poll_gets_the_handler():
    # A DataLoader's workers start with the epoch, before the loop's first
    # should_stop(): armed at the fork, they defer once their rank polls, and
    # die at once as before while it does not.
    out = run_sigterm_case("""\
        def child(poll_first):
            pid = os.fork()
            if pid == 0:
                if poll_first:
                    slot(s._AIR_SLOT_POLLS_STOP, 1)  # the rank polls (the page is shared)
                    slot(s._AIR_SLOT_STOP_STEP, 5)
                    slot(s._AIR_SLOT_STOP_REQUESTED, 1)
                sigterm()
                time.sleep(1)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            return os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exited"
        print("not polling", child(False))
        print("polling", child(True))
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["not polling %d" % signal.SIGTERM, "polling exited"]


def test_a_program_s_own_sigterm_handler_is_left_alone():
    out = run_sigterm_case("""\
        def own(*_):
            print("own handler", flush=True)
        signal.signal(signal.SIGTERM, own)
        p.should_stop()
        assert not p.sigterm.armed and signal.getsignal(signal.SIGTERM) is own
        sigterm()
        """)
    assert out.returncode == 0, out.stderr
    assert "own handler" in out.stdout


def test_the_handler_waits_for_a_should_stop_on_the_main_thread():
    # Only the main thread may set a handler: a first question from another
    # thread arms nothing, the next one from the main thread does.
    out = run_sigterm_case("""\
        t = threading.Thread(target=p.should_stop)
        t.start()
        t.join()
        assert not p.sigterm.armed and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        p.should_stop()
        assert p.sigterm.armed
        print("armed")
        """)
    assert out.returncode == 0, out.stderr
    assert "armed" in out.stdout


def test_a_child_s_sigterm_goes_through_once_its_rank_stops():
    # The rank reached its stop step: it is ending its workers (torch's
    # DataLoader terminates the stragglers), which must not wait.
    out = run_sigterm_case("""\
        p.should_stop()
        slot(s._AIR_SLOT_STOP_STEP, 5)
        slot(s._AIR_SLOT_STOP_REQUESTED, 1)
        slot(s._AIR_SLOT_STEPS, 5)
        pid = os.fork()
        if pid == 0:
            sigterm()
            time.sleep(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("child", os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exited")
        """)
    assert out.returncode == 0, out.stderr
    assert "child %d" % signal.SIGTERM in out.stdout


def test_the_store_wait_is_part_of_the_timeout_not_added_to_it(rank_python, tmp_path):
    """A real torch rank 1, rank 0 never listening, a 6 s timeout: it gave up
    after twice that (the wait, then torch's own connect with the whole
    timeout again)."""
    pytest.importorskip("torch")
    import socket

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nobody listens there
    script = textwrap.dedent("""
        import datetime, sys, time
        sys.path[:0] = %r
        import torch.distributed as dist
        import torch.distributed.rendezvous
        import air_run_patches
        rendezvous = sys.modules["torch.distributed.rendezvous"]  # the name is a function's
        air_run_patches._air_run_patch_rendezvous(rendezvous, None)
        assert rendezvous._create_c10d_store.__name__ == "create_store"
        start = time.monotonic()
        try:
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d", rank=1, world_size=2,
                                    timeout=datetime.timedelta(seconds=6))
        except Exception as e:  # torch 1.13: TimeoutError; 2.x: DistNetworkError
            print("ERROR", type(e).__name__, e)
        print("TOOK %%.1f" %% (time.monotonic() - start))
        """ % (rank_python_path(), port))
    env = dict(os.environ, RANK="1", LOCAL_RANK="1", WORLD_SIZE="2")
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    done = run_python(["-c", script], env=env)
    assert "TOOK " in done.stdout, done.stderr
    took = float(done.stdout.split("TOOK ")[1])
    assert 5.5 <= took < 9.0, done.stdout  # about twice the timeout before (11 s)
    assert "ERROR " in done.stdout and "timed out after 6s" in done.stdout


@pytest.mark.parametrize("first, anchor, interrupted, sig, now, verdict", [
    (0, 0.0, False, signal.SIGTERM, 5.0, "first"),
    (0, 0.0, False, signal.SIGUSR1, 5.0, "first"),
    # Slurm's SIGTERM, SIGCONT, SIGTERM; a wrapper's copy: one request.
    (signal.SIGTERM, 5.0, True, signal.SIGTERM, 5.01, "same"),
    (signal.SIGTERM, 5.0, True, signal.SIGTERM, 5.99, "same"),
    # A deliberate second interrupt, later.
    (signal.SIGTERM, 5.0, True, signal.SIGTERM, 6.0, "now"),
    # A warning never means now; the time limit's SIGTERM after it is the same
    # request, once; a SIGTERM later than that burst is "now".
    (signal.SIGTERM, 5.0, True, signal.SIGUSR1, 60.0, "same"),
    (signal.SIGUSR1, 5.0, False, signal.SIGUSR1, 60.0, "same"),
    (signal.SIGUSR1, 5.0, False, signal.SIGTERM, 45.0, "follows"),
    (signal.SIGUSR1, 45.0, True, signal.SIGTERM, 45.005, "same"),
    (signal.SIGUSR1, 45.0, True, signal.SIGTERM, 47.0, "now"),
])
def test_which_stop_signals_are_one_request(rank_python, first, anchor, interrupted, sig, now, verdict):
    import air_run_progress

    assert air_run_progress._air_run_stop_verdict(first, anchor, interrupted, sig, now, 1.0) == verdict


def test_slurm_s_sigterm_sigcont_sigterm_is_one_request():
    # slurmd on a time limit or a preemption: SIGTERM, SIGCONT, SIGTERM within
    # milliseconds. The rank lives on to the stop step.
    out = run_sigterm_case("""\
        p.should_stop()
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGCONT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        slot(s._AIR_SLOT_STOP_STEP, 1)
        slot(s._AIR_SLOT_STOP_REQUESTED, 1)
        time.sleep(0.8)  # past the burst and the wait
        p.count("opt", 1)
        print("stopped", p.should_stop(), flush=True)
        """)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "stopped True" in out.stdout


@pytest.mark.parametrize("name", ["SIGUSR1", "SIGUSR2"])
def test_a_polling_rank_defers_slurm_s_warning(name):
    # srun forwards --signal=B:USR1@N to every process of the step: a rank
    # that polls stops at the step like for SIGTERM; one that does not poll
    # keeps the default disposition (it dies of it, as without air-run).
    body = """\
        if POLL:
            p.should_stop()
        os.kill(os.getpid(), signal.%s)
        time.sleep(0.05)
        slot(s._AIR_SLOT_STOP_STEP, 1)
        slot(s._AIR_SLOT_STOP_REQUESTED, 1)
        time.sleep(0.8)
        p.count("opt", 1)
        print("stopped", p.should_stop(), flush=True)
        """ % name
    polled = run_sigterm_case(body.replace("POLL", "True"))
    assert polled.returncode == 0, (polled.stdout, polled.stderr)
    assert "stopped True" in polled.stdout
    unpolled = run_sigterm_case(body.replace("POLL", "False"))
    assert unpolled.returncode == -getattr(signal, name), (unpolled.stdout, unpolled.stderr)


def test_a_program_s_own_usr1_handler_is_left_alone():
    out = run_sigterm_case("""\
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        p.should_stop()
        assert p.sigterm.armed and signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.8)  # past the wait: ignored, not deferred
        print("alive", flush=True)
        """)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "alive" in out.stdout


def test_air_run_s_teardown_ends_a_rank_blocked_in_native_code():
    # A gloo collective never returns to the interpreter, so no Python handler
    # runs: the shim's thread lets air-run's own SIGTERM through at once.
    out = run_sigterm_case("""\
        import ctypes
        p.should_stop()
        assert p.sigterm.watching
        libc = ctypes.CDLL(None)
        mutex = ctypes.create_string_buffer(64)  # PTHREAD_MUTEX_INITIALIZER: zeros
        libc.pthread_mutex_lock(mutex)
        def teardown():
            time.sleep(0.3)
            slot(s._AIR_SLOT_TEARING_DOWN, 1)
            print("signalled", time.monotonic(), flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
        threading.Thread(target=teardown).start()
        libc.pthread_mutex_lock(mutex)  # a native call that never returns
        print("returned", flush=True)
        """)
    assert out.returncode == -signal.SIGTERM, (out.stdout, out.stderr)
    assert "signalled" in out.stdout and "returned" not in out.stdout


def test_a_program_that_takes_the_wakeup_fd_leaves_the_decision_to_the_handler():
    # asyncio sets its own wakeup fd once its loop handles a signal: the
    # shim's thread hears nothing more, so its handler decides again.
    out = run_sigterm_case("""\
        p.should_stop()
        assert p.sigterm.watching
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        slot(s._AIR_SLOT_TEARING_DOWN, 1)
        sigterm()
        time.sleep(0.2)
        print("alive", flush=True)
        """)
    assert out.returncode == -signal.SIGTERM, (out.stdout, out.stderr)
    assert "alive" not in out.stdout
