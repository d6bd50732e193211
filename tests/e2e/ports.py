"""Free loopback TCP ports for the tests, one implementation for every helper.

The end-to-end suite runs on several pytest-xdist workers at once (scripts/test.sh), and a
port picked by binding port 0 is free only until the socket closes: another worker's pick can
land on it before the server it was meant for binds. So each worker takes its ports from a
slice of its own below the kernel's ephemeral range (where bind(0) and outgoing connections
never land), in turn, and checks each is free now. A run without xdist has the whole range.
"""
import itertools
import os
import socket

_LOW = 10000


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _slice():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    size = (_ephemeral_low() - _LOW) // max(count, 1)
    start = _LOW + index * size
    return start, start + size


_START, _END = _slice()
# Where this process begins in its slice: spread by pid, so two pytest runs on one machine
# (a session's and CI's) rarely walk the same ports.
_next = itertools.cycle(range(_START, _END))
for _ in range(os.getpid() % (_END - _START)):
    next(_next)


def free_port() -> int:
    """A 127.0.0.1 port no one listens on now and no other worker of this run will pick."""
    for _ in range(_END - _START):
        port = next(_next)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_START}-{_END}")
