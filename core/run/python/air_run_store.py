"""The c10d store outlives its host's exit while peers still use it: the rank
that hosts torch.distributed's TCPStore (rank 0: air-run sets
TORCHELASTIC_USE_AGENT_STORE=False, so the store's server runs inside it)
lingers at exit while other processes hold connections to it.
"""
import os
import sys

# ---- air-run embeds this file from the next line on ----


def _air_run_store_connections(port):
    """(hosts, peers) for TCP `port` among this process's own sockets:
    whether it listens there, and how many connections to it from other
    processes it holds open. Its own client connection to its own store is
    not a peer: its far end is one of this process's sockets too."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                link = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return False, 0
    hosts = False
    served = []  # far ends of connections accepted on `port`
    own = set()  # near ends of this process's connections to `port`
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[9] not in inodes:
                continue
            local, remote, state = cols[1], cols[2], cols[3]
            try:
                local_port = int(local.rsplit(":", 1)[1], 16)
                remote_port = int(remote.rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if local_port == port and state == "0A":  # LISTEN
                hosts = True
            elif state == "01":  # ESTABLISHED
                if local_port == port:
                    served.append(remote)
                if remote_port == port:
                    own.add(local)
    return hosts, sum(1 for far in served if far not in own)


def _air_run_store_linger(limit=30.0, period=0.02):
    """At the rank's exit: while this process hosts the store on MASTER_PORT
    and another process is still connected to it, wait (at most `limit`
    seconds), so that a peer between its last two store calls (torch 1.13's
    init_process_group ends in a barrier on the store) does not lose the
    store with "Connection reset by peer". A peer that ends, even by a crash,
    closes its connection, so no one waits for a dead peer; a node that
    vanishes without closing is what the limit is for. Only a clean exit
    lingers: a rank that fails ends at once, for air-run to see."""
    import atexit

    real_exit = sys.exit
    failing = []
    leader = os.getpid()

    def exit(status=None):
        failing[:] = [status is not None and status != 0]
        return real_exit(status)

    def at_exit():
        try:
            port = int(os.environ.get("MASTER_PORT", ""))
        except ValueError:
            return
        # The rank itself (the warm start's ranks are their own group's
        # leader, as fresh ones are), not a forked worker or the zygote.
        if os.getpid() != os.getpgid(0) and os.getpid() != leader:
            return
        if failing and failing[0] or getattr(sys, "_air_run_exit_status", 0):
            return
        if getattr(sys, "last_exc", None) is not None or getattr(sys, "last_value", None) is not None:
            return
        import time

        until = time.monotonic() + limit
        while time.monotonic() < until:
            hosts, peers = _air_run_store_connections(port)
            if not hosts or peers == 0:
                return
            time.sleep(period)

    exit.__doc__ = real_exit.__doc__
    sys.exit = exit
    atexit.register(at_exit)
