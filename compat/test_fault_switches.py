"""The fault switches the nemeses use, each shown to do what it says and to be undone by its
heal: a slow link (``compat.faults.net.Network.slow``, ``tc`` ``tbf``) and a slow disk
(``compat.faults.disk.SlowFsync``, ``fsync_fault.c`` preloaded). Needs root (namespaces) and a
C compiler, as the fault tests do. And the failpoint nemeses (``compat.faults.failpoints``)
against three ``/failpoints`` endpoints served in this process: armed on every kwire node,
disarmed by the heal, a round failed when its point never fired, and refused on a quorum with
a stock node."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from compat.faults import failpoints
from compat.faults.disk import SlowFsync, fsync_fault_library
from compat.faults.net import Network
from compat.faults.rounds import Round
from compat.harness import free_port
from server.failpoints import Failpoints, parse_action
from server.node.metrics import MetricsServer

PAYLOAD = 96 * 1024
"""Bytes sent across the link: about 3 s at 256 kbit/s, a few milliseconds on a healthy link."""


def _transfer_s(net: Network) -> float:
    """Seconds for ``PAYLOAD`` bytes to go from host a to host b over TCP."""
    server = net.call("b", lambda: socket.create_server((net.address("b"), 0)))
    received = bytearray()

    def receive() -> None:
        conn, _ = server.accept()
        with conn:
            while len(received) < PAYLOAD and (chunk := conn.recv(65536)):
                received.extend(chunk)

    reader = threading.Thread(target=receive)
    reader.start()
    started = time.monotonic()
    with net.call("a", lambda: socket.create_connection((net.address("b"), server.getsockname()[1]), timeout=30)) as c:
        c.sendall(b"x" * PAYLOAD)
        reader.join(timeout=60)
    elapsed = time.monotonic() - started
    server.close()
    assert len(received) == PAYLOAD, f"{len(received)} of {PAYLOAD} bytes arrived"
    return elapsed


def _qdisc(net: Network, host: str) -> str:
    return subprocess.run(["tc", "-n", net.namespace(host), "qdisc", "show", "dev", "eth0"],
                          capture_output=True, text=True, check=True).stdout


def test_a_slow_link_holds_what_exceeds_its_rate_until_healed() -> None:
    with Network(["a", "b"], tag=f"s{os.getpid() % 1000}") as net:
        healthy = _transfer_s(net)
        net.slow("a", rate_kbit=256, latency_ms=2000)
        assert "tbf" in _qdisc(net, "a")
        slowed = _transfer_s(net)
        net.heal()
        assert "tbf" not in _qdisc(net, "a")
        healed = _transfer_s(net)
    # 96 KiB at 256 kbit/s is 3 s; TCP resends what the full queue dropped. The healthy
    # transfers are bounded against the slowed one, not the clock: on a loaded machine a healthy
    # transfer of 96 KiB took 1.1 s, the slowed one stays above 3 s
    assert slowed >= 2.0, (healthy, slowed, healed)
    assert healthy < slowed / 2 and healed < slowed / 2, (healthy, slowed, healed)


FLUSHES = """
import json, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)
times = []
for line in sys.stdin:  # one flush per line read, timed
    os.write(fd, b"x")
    started = time.monotonic()
    os.fsync(fd)
    os.fdatasync(fd)
    times.append(time.monotonic() - started)
    print(json.dumps(times[-1]), flush=True)
"""


def test_a_slow_disk_delays_each_flush_only_while_set(tmp_path: Path) -> None:
    disk = SlowFsync(fsync_fault_library(), tmp_path / "slow-fsync")
    proc = subprocess.Popen([sys.executable, "-c", FLUSHES, str(tmp_path / "data")], env=disk.env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def flush() -> float:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        return float(json.loads(proc.stdout.readline()))

    try:
        before = flush()
        disk.slow(400)
        slowed = flush()  # an fsync and an fdatasync, each waiting 400 ms first
        disk.heal()
        after = flush()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert slowed >= 0.8, (before, slowed, after)
    assert before < 0.8 and after < 0.8, (before, slowed, after)


@pytest.fixture
def failpoint_run(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[set[int]], tuple[SimpleNamespace, dict[int, Failpoints]]]]:
    """Makes a run (as :func:`compat.faults.failpoints.arm` sees it) of three nodes, ``kwire_ids``
    kwire's, whose ``/failpoints`` are real metrics servers, one per loopback address, over
    registries drawing 0.0 (a point of any probability fires on each hit); closed at the end."""
    servers: list[MetricsServer] = []

    def make(kwire_ids: set[int]) -> tuple[SimpleNamespace, dict[int, Failpoints]]:
        port = free_port()
        monkeypatch.setattr(failpoints, "METRICS_PORT", port)
        registries = {i: Failpoints(lambda: 0.0) for i in (1, 2, 3)}
        servers.extend(MetricsServer(f"127.0.0.{i}", port, registries[i]) for i in (1, 2, 3))
        quorum = SimpleNamespace(ports=dict.fromkeys((1, 2, 3), 0), kwire_ids=kwire_ids,
                                 hosts={i: f"127.0.0.{i}" for i in (1, 2, 3)})
        run = SimpleNamespace(quorum=quorum, network=SimpleNamespace(call=lambda host, fn: fn()), brokers=None,
                              rounds=[Round("not-controller", 1, 1, time.monotonic())])
        return run, registries

    yield make
    for server in servers:
        server.close()


def test_a_failpoint_nemesis_arms_every_kwire_node_and_its_heal_disarms_them(failpoint_run: Any) -> None:
    run, registries = failpoint_run({1, 2, 3})
    heal = failpoints.arm(run, "not-controller")
    for registry in registries.values():
        assert registry.armed == {"controller.request": parse_action("error(41)", 0.5)}
    for _ in range(3):
        assert registries[2].hit("controller.request") is not None
    heal()
    assert run.rounds[-1].figures["fired"] == 3
    assert all(not registry.armed for registry in registries.values())


def test_a_failpoint_nemesis_that_never_fired_fails_its_round_disarmed(failpoint_run: Any) -> None:
    run, registries = failpoint_run({1, 2, 3})
    heal = failpoints.arm(run, "slow-commit")
    with pytest.raises(AssertionError, match="never fired"):
        heal()
    assert all(not registry.armed for registry in registries.values())


def test_a_quorum_with_a_stock_node_cannot_take_a_failpoint_nemesis(failpoint_run: Any) -> None:
    for kwire_ids, why in ((set(), failpoints.NOT_IN_STOCK), ({1, 2}, failpoints.NOT_IN_MIXED)):
        run, registries = failpoint_run(kwire_ids)
        with pytest.raises(ValueError, match=re.escape(why)):
            failpoints.arm(run, "fetch-drop")
        assert all(not registry.armed for registry in registries.values())
