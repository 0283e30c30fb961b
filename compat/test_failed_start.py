"""A start of several stock processes that fails part-way leaves nothing running.

Three stock brokers of the newest release are started together on a kwire controller
(``StockBrokers.starting``, as the fault runs start theirs); the second's client port is
already taken, so it exits with Kafka's "Address already in use" once it has registered. The
wait fails at once on that exit, and the brokers that did start are stopped: SIGTERM, then
SIGKILL after the deadline. The controller is paused (SIGSTOP) as the wait fails, so that the
brokers cannot finish a controlled shutdown -- how brokers whose controllers were gone once
ignored SIGTERM and lived on with parent pid 1 -- and the SIGKILL is what ends them. Afterwards
no broker's pid is alive and this process has no child it did not have before the start.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from compat.harness import CLUSTER_ID, Quorum, free_port, newest_pinned_release
from tools.stock_brokers import StockBrokerError, StockBrokers

pytestmark = pytest.mark.compat

STOP_DEADLINE_S = 5.0


def _children(pid: int) -> set[int]:
    """The pids whose parent is ``pid`` (zombies included: an unreaped child remains one)."""
    children = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children.add(int(entry.name))
    return children


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_broker_start_that_fails_part_way_stops_every_broker_it_started(tmp_path: Path) -> None:
    kafka = newest_pinned_release()
    (tmp_path / "controller").mkdir()
    quorum = Quorum(kafka, tmp_path / "controller", {1}, dynamic=True, ids=(1,))
    ports = {101: free_port(), 102: free_port(), 103: free_port()}
    brokers = StockBrokers.create(tmp_path / "brokers", kafka.version, cluster_id=CLUSTER_ID,
                                  bootstrap_controllers=quorum.bootstrap, ports=ports)
    before = _children(os.getpid())
    with quorum.running(), socket.socket() as taken:
        taken.bind(("127.0.0.1", ports[102]))
        taken.listen()
        controller = quorum.procs[1]
        started = time.monotonic()
        with pytest.raises(StockBrokerError, match=r"brokers \[102\] exited while starting"), \
                brokers.starting(stop_timeout_s=STOP_DEADLINE_S):
            try:
                brokers.wait_listed({101, 102, 103}, 120.0, exited_fails=True)
            finally:
                controller.send_signal(signal.SIGSTOP)  # no controlled shutdown can finish now
        took = time.monotonic() - started
        controller.send_signal(signal.SIGCONT)
    out = brokers.nodes[102].stdout_path.read_text(errors="replace")
    assert "Address already in use" in out, out[-2000:]
    codes = {i: n.process.returncode for i, n in brokers.nodes.items() if n.process is not None}
    assert codes[101] == codes[103] == -signal.SIGKILL, codes  # SIGTERM alone did not end them
    pids = {i: n.process.pid for i, n in brokers.nodes.items() if n.process is not None}
    assert sorted(pids) == [101, 102, 103]
    assert not [i for i, pid in pids.items() if _alive(pid)], pids
    assert _children(os.getpid()) - before == set()
    assert took < 120.0, took  # the exit failed the wait at once, not at its timeout
