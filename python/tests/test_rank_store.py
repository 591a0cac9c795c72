"""The store's linger (core/run/python/air_run_store.py): how the rank that
hosts the c10d store counts the peers still connected to it, from its own
sockets in /proc."""
import socket
import subprocess
import sys
import time


def test_peers_are_other_processes_connected_to_the_port(rank_python):
    from air_run_store import _air_run_store_connections

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    assert _air_run_store_connections(port) == (False, 0)  # bound, not listening: no store here
    server.listen(8)
    assert _air_run_store_connections(port) == (True, 0)
    # Its own client connection to its own store is no peer.
    own = socket.create_connection(("127.0.0.1", port))
    own_served, _ = server.accept()
    assert _air_run_store_connections(port) == (True, 0)
    peer = subprocess.Popen([sys.executable, "-c", "import socket, sys, time; s = socket.create_connection("
                             "('127.0.0.1', %d)); sys.stdin.read()" % port], stdin=subprocess.PIPE)
    served, _ = server.accept()
    assert _air_run_store_connections(port) == (True, 1)
    # The peer ends (a crash would do the same): its connection closes.
    peer.stdin.close()
    peer.wait()
    deadline = time.monotonic() + 10
    while _air_run_store_connections(port) != (True, 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _air_run_store_connections(port) == (True, 0)
    for s in (served, own_served, own, server):
        s.close()
