"""A 3-node kwire quorum run with leader failovers, and the on-disk checks of its logs.

Shared by the failover test (tests/server/test_failover.py), the stock-tool interop tests over
a multi-node quorum (compat/) and the audit tests (tests/audit/), which all need real directories
written by real processes.

:func:`run_failovers` starts a :class:`~tools.local_cluster.DevCluster` whose leader writes a
steady load (``kwire test-raft-server``), kills the leader with SIGKILL ``kills`` times (each
time waiting for a new leader's first commit, then restarting the killed node), lets every node
catch up to the last committed offset any leader reported, and stops the nodes gracefully.
:func:`read_node_log` and :func:`check_logs` then judge the directories.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from messages.metadata import decode_record
from storage.log import MetadataLog
from tools.local_cluster import DevCluster, DevClusterError
from tools.raft_load_records import parse_workload_record

__all__ = ["Failover", "FailoverRun", "LogRecord", "check_logs", "read_node_log", "run_failovers"]


@dataclass(frozen=True)
class Failover:
    """One kill: the leader killed, when (wall ms), and the leader that committed next."""

    killed: int
    killed_epoch: int
    kill_ms: int
    new_leader: int
    new_epoch: int
    first_commit_ms: int

    @property
    def recovery_ms(self) -> int:
        return self.first_commit_ms - self.kill_ms


@dataclass
class FailoverRun:
    cluster: DevCluster
    failovers: list[Failover] = field(default_factory=list)
    committed: list[dict[str, Any]] = field(default_factory=list)
    """Every ``committed`` report of every node: ``epoch``, ``offset``, ``counter``, the
    reporting leader in ``node``."""

    @property
    def node_dirs(self) -> list[Path]:
        """Each node's metadata log directory (``.../data``)."""
        return [n.data_dir for n in self.cluster.nodes.values()]


@dataclass(frozen=True)
class LogRecord:
    """A data record of a node's log: its offset, batch epoch, and for workload records the
    ``(epoch, counter, node)`` written in the value (None for other records)."""

    offset: int
    batch_epoch: int
    value: bytes
    workload: tuple[int, int, int] | None


def _events_since(cluster: DevCluster, node_id: int, since_ms: int, kind: str) -> list[dict[str, Any]]:
    return [e for e in cluster.events(node_id) if e["event"] == kind and e["time_ms"] >= since_ms]


def _wait_first_commit(cluster: DevCluster, kill_ms: int, old_epoch: int, timeout_s: float) -> tuple[int, dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for node_id, node in cluster.nodes.items():
            if not node.running:
                continue
            for event in _events_since(cluster, node_id, kill_ms, "first-commit"):
                if event["epoch"] > old_epoch:
                    return node_id, event
        time.sleep(0.02)
    raise DevClusterError(f"no new leader committed within {timeout_s} s of the kill")


def _wait_caught_up(cluster: DevCluster, offset: int, timeout_s: float) -> None:
    """Until every voter's log end offset (as the leader sees it) exceeds ``offset``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            view = cluster.describe()
            ends = [v.log_end_offset for v in view.partition.current_voters]
            last = ends
            if len(ends) == len(cluster.nodes) and min(ends) > offset:
                return
        except Exception as exc:  # noqa: BLE001 - a leader change mid-poll; retried
            last = exc
        time.sleep(0.1)
    raise DevClusterError(f"voters did not reach offset {offset} in {timeout_s} s (last: {last!r})")


def run_failovers(
    root: Path,
    kills: int,
    *,
    throughput: int = 500,
    record_size: int = 256,
    settle_s: float = 1.0,
    commit_timeout_s: float = 20.0,
    properties: dict[str, str] | None = None,
) -> FailoverRun:
    """Run the quorum and its failovers (see the module docstring); the nodes are stopped on
    return, also on failure. ``properties`` are extra server.properties for every node. Raises
    DevClusterError when the quorum does not recover."""
    cluster = DevCluster.create(
        root, 3, base_port=None, workload=(throughput, record_size), properties=properties
    )
    run = FailoverRun(cluster)
    try:
        cluster.start()
        leader, epoch = cluster.wait_for_leader(60.0)
        _wait_first_commit(cluster, 0, epoch - 1, commit_timeout_s)
        for _ in range(kills):
            time.sleep(settle_s)
            leader, epoch = cluster.wait_for_leader(30.0)
            kill_ms = time.time_ns() // 1_000_000
            cluster.kill(leader, signal.SIGKILL)
            new_leader, event = _wait_first_commit(cluster, kill_ms, epoch, commit_timeout_s)
            run.failovers.append(
                Failover(leader, epoch, kill_ms, new_leader, event["epoch"], event["time_ms"])
            )
            cluster.start([leader])
        time.sleep(settle_s)
        for node_id in cluster.nodes:
            for event in cluster.events(node_id):
                if event["event"] == "committed":
                    run.committed.append({**event, "node": node_id})
        last = max(e["offset"] for e in run.committed)
        _wait_caught_up(cluster, last, 60.0)
    finally:
        cluster.stop()
    return run


def read_node_log(data_dir: Path) -> list[LogRecord]:
    """Every data record of the ``__cluster_metadata-0`` log under ``data_dir``, in offset order
    (the log is opened, and so recovered, as a node would)."""
    records: list[LogRecord] = []
    with MetadataLog.open(str(data_dir)) as log:
        for batch in log.iter_batches():
            if batch.is_control:
                continue
            view = batch
            view.ensure_valid()
            for delta, value in enumerate(view.iter_values()):
                assert value is not None
                message, _ = decode_record(value)
                workload = parse_workload_record(message)
                records.append(LogRecord(view.base_offset + delta, view.partition_leader_epoch, bytes(value), workload))
    return records


def check_logs(run: FailoverRun) -> dict[int, list[LogRecord]]:
    """Assert what a correct quorum guarantees about the directories after ``run``:

    * every record a leader reported committed is, on every node, at the reported offset with
      the reported epoch and counter (nothing committed was lost);
    * on every node the workload records' ``(epoch, counter)`` strictly increase with the
      offset and each carries its batch's epoch (nothing was reordered or rewritten);
    * the nodes' logs agree record for record up to the last committed offset.

    Returns each node's records."""
    logs = {node_id: read_node_log(node.data_dir) for node_id, node in run.cluster.nodes.items()}
    by_offset = {node_id: {r.offset: r for r in records} for node_id, records in logs.items()}
    assert run.committed, "no leader reported a committed record"
    for report in run.committed:
        for node_id, records in by_offset.items():
            record = records.get(report["offset"])
            assert record is not None, f"node {node_id} lost committed offset {report['offset']} ({report})"
            assert record.workload is not None, (node_id, report, record)
            assert record.workload[:2] == (report["epoch"], report["counter"]), (node_id, report, record)
    for node_id, records in logs.items():
        previous: tuple[int, int] | None = None
        for record in records:
            if record.workload is None:
                continue
            key = record.workload[:2]
            assert record.workload[0] == record.batch_epoch, (node_id, record)
            assert previous is None or key > previous, f"node {node_id}: {key} after {previous} at {record.offset}"
            previous = key
    last = max(r["offset"] for r in run.committed)
    reference = [(r.offset, r.batch_epoch, r.value) for r in logs[min(logs)] if r.offset <= last]
    for node_id, records in logs.items():
        assert [(r.offset, r.batch_epoch, r.value) for r in records if r.offset <= last] == reference, node_id
    return logs
