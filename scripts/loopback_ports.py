"""Free TCP ports on 127.0.0.1 for the processes a test or benchmark starts.

The ports lie below the kernel's ephemeral range (ip_local_port_range): a node
that connects to a peer's port before the peer listens could otherwise be
handed that very port as its own source port (a TCP self-connect; CI run 44b
saw the peer's listen fail so), which a port from bind(0), inside the range,
allows. Used by tests/launcher/pd_processes_test.py, bench/pd_bench.py and
bench/serve_bench.py (each puts this folder on sys.path).
"""
from __future__ import annotations

import random
import socket


class NoFreePorts(Exception):
    """Fewer free ports than asked for below the ephemeral range."""


def ephemeral_low(default: int = 32768) -> int:
    """The first port of the kernel's ephemeral range (32768 where unreadable)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """n distinct ports free on `host` (bound together, then released), drawn at
    random from 10000 up to the ephemeral range; a bounded search that raises
    NoFreePorts when the range is too busy."""
    low = ephemeral_low()
    rng = random.Random()
    socks, ports = [], []
    try:
        for _ in range(2000):
            if len(ports) == n:
                break
            p = rng.randrange(10000, max(10001, low))
            if p in ports:
                continue
            s = socket.socket()
            try:
                s.bind((host, p))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(p)
    finally:
        for s in socks:
            s.close()
    if len(ports) < n:
        raise NoFreePorts(f"found {len(ports)} of {n} free ports on {host} below {low}")
    return ports
