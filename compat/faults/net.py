"""A private network of Linux network namespaces, for partitioning real processes.

:class:`Network` makes, per host, a network namespace with one interface (``eth0``) on a bridge
that lives in a namespace of its own (the hub), and gives it the address ``10.213.0.<n>/24``.
Every namespace, interface and address is created by the run and removed by :meth:`close`; the
machine's own namespace is never touched, so nothing outside the run can be reached or
disturbed (the same addresses in two runs are on two separate bridges).

A process runs on a host through :meth:`Network.command` (``ip netns exec``); Python code runs
there through :meth:`Network.call`, in a thread that has joined the host's namespace (Linux keeps
the network namespace per thread). Faults are routes: :meth:`cut` adds a blackhole route on
``src`` for ``dst``'s address, so every packet ``src`` sends to ``dst`` is dropped (one way: what
``dst`` sends still arrives, though a TCP connection then stalls for want of acknowledgements);
:meth:`partition` cuts both ways between two sides; :meth:`slow` makes a host's link a slow one:
what it sends leaves at a given rate through a token bucket (``tc`` ``tbf``), and a packet that
would wait longer than a given latency in its queue is dropped -- so the link delays and loses
what exceeds its rate, as Trogdor's ``DegradedNetworkFaultSpec`` degrades a link by rate and
latency. :meth:`heal` removes every cut and every slow link. Blackhole routes and ``tbf`` need
no packet filter and no ``netem``, which these machines lack (``tc qdisc add ... netem``
fails with "Specified qdisc kind is unknown", a ``gact`` drop action with "Failed to load TC
action module", and ``iptables`` is not installed): a fixed delay and random loss on an idle
link, as netem gives them, cannot be made here. Within one TCP connection nothing can be
reordered for the application anyway.

Needs root, ``ip`` and ``tc`` (iproute2).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

__all__ = ["Network"]

T = TypeVar("T")

SUBNET = "10.213.0"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class Network:
    """Hosts ``hosts`` (names: letters, digits) on one bridge; ``tag`` makes the namespace
    names unique to this run. Use as a context manager, or call :meth:`close`. Raises
    RuntimeError when not root or when ``ip`` fails."""

    def __init__(self, hosts: Iterable[str], tag: str) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("network fault tests create network namespaces, which needs root")
        self.hosts = list(hosts)
        self.prefix = f"kw{os.getpid()}{tag}"
        self.hub = f"{self.prefix}-hub"
        self._cuts: set[tuple[str, str]] = set()
        self._slow: set[str] = set()
        self._made: list[str] = []
        try:
            self._add_namespace(self.hub)
            _ip(["-n", self.hub, "link", "add", "br0", "type", "bridge"])
            _ip(["-n", self.hub, "link", "set", "br0", "up"])
            for n, host in enumerate(self.hosts, start=1):
                ns = self.namespace(host)
                self._add_namespace(ns)
                _ip(["-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{n}", "netns", self.hub])
                _ip(["-n", self.hub, "link", "set", f"p{n}", "master", "br0", "up"])
                _ip(["-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0"])
                _ip(["-n", ns, "link", "set", "eth0", "up"])
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def namespace(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def address(self, host: str) -> str:
        """``host``'s IPv4 address on the bridge."""
        return f"{SUBNET}.{self.hosts.index(host) + 1}"

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run on ``host`` (``ip netns exec`` replaces itself with it, so the process
        started is the command's own, for signals)."""
        return ["ip", "netns", "exec", self.namespace(host), *argv]

    def call(self, host: str, fn: Callable[[], T]) -> T:
        """``fn()`` run on ``host``: in a new thread that joined its network namespace, so its
        sockets are ``host``'s. Returns what ``fn`` returns and raises what it raises."""
        result: list[T] = []
        error: list[BaseException] = []

        def run() -> None:
            try:
                fd = os.open(f"/run/netns/{self.namespace(host)}", os.O_RDONLY)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), f"setns into {self.namespace(host)}")
                finally:
                    os.close(fd)
                result.append(fn())
            except BaseException as exc:  # handed to the caller's thread
                error.append(exc)

        thread = threading.Thread(target=run, name=f"netns-{host}")
        thread.start()
        thread.join()
        if error:
            raise error[0]
        return result[0]

    def cut(self, src: str, dst: str) -> None:
        """Drop every packet ``src`` sends to ``dst``."""
        if (src, dst) not in self._cuts:
            _ip(["-n", self.namespace(src), "route", "add", "blackhole", f"{self.address(dst)}/32"])
            self._cuts.add((src, dst))

    def partition(self, side: Iterable[str], other: Iterable[str]) -> None:
        """Cut both ways between every host of ``side`` and every host of ``other``."""
        other = list(other)
        for a in side:
            for b in other:
                self.cut(a, b)
                self.cut(b, a)

    def slow(self, host: str, rate_kbit: int, latency_ms: int) -> None:
        """Send what ``host`` sends at ``rate_kbit`` kilobits per second at most, queueing the
        rest and dropping a packet that would wait more than ``latency_ms`` (``tc`` ``tbf`` on
        its interface, with a burst of one full-size frame)."""
        _run(["tc", "-n", self.namespace(host), "qdisc", "replace", "dev", "eth0", "root", "tbf",
              "rate", f"{rate_kbit}kbit", "burst", "1540", "latency", f"{latency_ms}ms"])
        self._slow.add(host)

    def heal(self) -> None:
        """Remove every cut and every slow link."""
        for src, dst in sorted(self._cuts):
            _ip(["-n", self.namespace(src), "route", "del", "blackhole", f"{self.address(dst)}/32"])
        self._cuts.clear()
        for host in sorted(self._slow):
            _run(["tc", "-n", self.namespace(host), "qdisc", "del", "dev", "eth0", "root"])
        self._slow.clear()

    def close(self) -> None:
        """Delete every namespace this network made (their interfaces go with them)."""
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._made.clear()
        self._cuts.clear()
        self._slow.clear()

    def _add_namespace(self, ns: str) -> None:
        _ip(["netns", "add", ns])
        self._made.append(ns)
        _ip(["-n", ns, "link", "set", "lo", "up"])


def _ip(args: list[str]) -> None:
    _run(["ip", *args])


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()}")
