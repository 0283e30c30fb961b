"""The invariants of a simulated quorum (``tools.simulate.cluster``), checked after every event
(``Cluster.check_invariants``) and as the state machine receives what the cores commit:

* ``SingleLeader`` -- at most one leader per epoch, over every election state ever persisted
  and every live core;
* ``MonotonicEpoch`` -- each node's persisted epoch never decreases;
* ``OneVotePerEpoch`` -- no node ever persists votes for two replicas in one epoch;
* ``MonotonicHighWatermark`` -- a node's high watermark never decreases while it is up;
* ``ConsistentCommittedData`` -- every committed batch any node delivers is byte-identical to
  what every other node delivered at that offset, and each node delivers offsets in order;
* ``SnapshotAtLogStart`` -- a log that starts after 0 starts at its earliest snapshot, and no
  snapshot lies below the log start;
* ``LeaderCompleteness`` -- a node that becomes leader holds every batch committed so far
  (so committed data is never lost), and committed data is on a majority of durable logs.

A violation raises :class:`InvariantViolation` naming the seed, the time and the invariant.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_request import PartitionData as DqPartition
from messages.generated.describe_quorum_request import TopicData as DqTopic
from server.raft.control import voters_record
from server.raft.events import AppendResult
from server.raft.log import MemoryRaftLog
from server.raft.roles import Leader
from server.raft.types import OffsetAndEpoch
from storage.records import RecordBatch
from storage.snapshots import SnapshotId, build_snapshot_batches, read_snapshot_content

if TYPE_CHECKING:
    from tools.simulate.nodes import SimNode

__all__ = ["InvariantViolation", "QuorumInvariants", "describe"]


class InvariantViolation(AssertionError):
    """A safety or liveness property of the simulated quorum failed (module docstring)."""


class QuorumInvariants:
    """The checks part of :class:`~tools.simulate.cluster.Cluster` (a mixin: the state it
    reads is the cluster's)."""

    seed: int
    now: int
    nodes: dict[int, SimNode]
    voter_ids: list[int]
    committed: dict[int, tuple[int, bytes]]
    committed_end: int
    committed_values: list[bytes]
    batch_contents: dict[bytes, tuple[list[bytes], bytes]]
    leaders_by_epoch: dict[int, int]
    live_leaders: dict[int, int]
    touched: set[int]
    elections: int
    snapshots_taken: int
    admin_responses: dict[int, Any]

    if TYPE_CHECKING:  # the cluster's own methods, which these parts call

        def leader(self) -> int | None: ...

        def admin_request(self, node_id: int, request: Any, version: int = 0) -> int: ...

    def fail(self, message: str) -> None:
        raise InvariantViolation(f"seed {self.seed} at t={self.now}ms: {message}\n{describe(self)}")

    def on_committed(self, node: SimNode, batch: Any) -> None:
        if batch.base_offset != node.delivered_next:
            self.fail(
                f"ConsistentCommittedData: node {node.node_id} delivered {batch.base_offset}, "
                f"expected {node.delivered_next}"
            )
        node.delivered_next = batch.last_offset + 1
        contents = self.batch_contents.get(batch.data)
        if contents is None:
            values = []
            if not batch.is_control:
                for record in RecordBatch(batch.data).iter_records():
                    assert record.value is not None
                    values.append(record.value)
            contents = self.batch_contents[batch.data] = (values, hashlib.blake2b(batch.data, digest_size=16).digest())
        values, digest = contents
        for value in values:
            index = len(node.values)
            node.values.append(value)
            if index < len(self.committed_values):
                if self.committed_values[index] != value:
                    self.fail(f"ConsistentCommittedData: node {node.node_id} value #{index} differs")
            else:
                self.committed_values.append(value)
        known = self.committed.get(batch.base_offset)
        if known is None:
            if batch.base_offset < self.committed_end:
                self.fail(f"ConsistentCommittedData: batch at {batch.base_offset} inside a committed batch")
            self.committed[batch.base_offset] = (batch.last_offset, digest)
            self.committed_end = max(self.committed_end, batch.last_offset + 1)
        elif known != (batch.last_offset, digest):
            self.fail(f"ConsistentCommittedData: node {node.node_id} differs at offset {batch.base_offset}")

    def on_append_result(self, node: SimNode, result: AppendResult) -> None:
        """Where an append will land: the workload reads what commits, not what was promised."""

    def take_snapshot(self, node: SimNode, epoch: int) -> None:
        """The state machine snapshots what it has applied (cf. ReplicatedCounter), and the
        log drops the prefix the snapshot covers."""
        core = node.core
        assert core is not None
        snapshot_id = OffsetAndEpoch(node.delivered_next, epoch)
        core.view.validate_snapshot_id(snapshot_id)
        voters = voters_record(core.voters) if core.kraft_version >= 1 else None
        data = b"".join(
            build_snapshot_batches(
                SnapshotId(snapshot_id.offset, snapshot_id.epoch),
                last_contained_log_timestamp=self.now,
                records=node.values,
                append_time_ms=self.now,
                kraft_version=core.kraft_version,
                voters=voters,
            )
        )
        node.log.create_snapshot(snapshot_id, data)
        node.log.delete_before_snapshot()
        self.snapshots_taken += 1

    def on_load_snapshot(self, node: SimNode, snapshot_id: OffsetAndEpoch) -> None:
        size = node.log.snapshot_size(snapshot_id)
        assert size is not None
        values = read_snapshot_content(node.log.read_snapshot(snapshot_id, 0, size)).data_records()
        if values != self.committed_values[: len(values)]:
            self.fail(f"ConsistentCommittedData: snapshot {snapshot_id} on node {node.node_id} differs")
        node.values = list(values)
        node.delivered_next = snapshot_id.offset

    def log_holds_committed(self, log: MemoryRaftLog, durable_only: bool) -> bool:
        found: dict[int, tuple[int, bytes]] = {}
        limit = log.flushed_offset if durable_only else log.log_end_offset
        for stored in log.batches:
            if stored.last_offset >= limit:
                break
            found[stored.base_offset] = (
                stored.last_offset,
                hashlib.blake2b(stored.data, digest_size=16).digest(),
            )
        start = log.log_start_offset  # below it, the snapshot holds the data (checked on load)
        return all(
            found.get(offset) == value for offset, value in self.committed.items() if offset >= start
        )

    def on_new_leader(self, node: SimNode, epoch: int) -> None:
        self.elections += 1
        known = self.leaders_by_epoch.get(epoch)
        if known is not None and known != node.node_id:
            self.fail(f"SingleLeader: epoch {epoch} led by {known} and {node.node_id}")
        self.leaders_by_epoch[epoch] = node.node_id
        if not self.log_holds_committed(node.log, durable_only=False):
            self.fail(f"LeaderCompleteness: new leader {node.node_id} of epoch {epoch} lacks committed data")

    def check_invariants(self) -> None:
        """Checks every node an event touched (the others cannot have changed)."""
        touched, self.touched = self.touched, set()
        for node_id in touched:
            node = self.nodes[node_id]
            core = node.core
            if core is None:
                continue
            hwm = core.high_watermark
            if hwm < node.last_hwm:
                self.fail(f"MonotonicHighWatermark: node {node.node_id} went from {node.last_hwm} to {hwm}")
            node.last_hwm = hwm
            if isinstance(core.state, Leader):
                other_id = self.live_leaders.setdefault(core.epoch, node.node_id)
                if other_id != node.node_id:
                    other = self.nodes[other_id].core
                    if other is not None and isinstance(other.state, Leader) and other.epoch == core.epoch:
                        self.fail(f"SingleLeader: {other_id} and {node.node_id} both lead epoch {core.epoch}")
                    self.live_leaders[core.epoch] = node.node_id
            earliest = node.log.earliest_snapshot_id()
            start = node.log.log_start_offset
            if (earliest is not None and earliest.offset < start) or (start > 0 and earliest is None):
                self.fail(f"SnapshotAtLogStart: node {node.node_id} starts at {start}, earliest snapshot {earliest}")
            if node.election is not None and core.persisted_election.epoch != node.election.epoch:
                self.fail(f"MonotonicEpoch: node {node.node_id} runs epoch {core.epoch}, persisted {node.election.epoch}")

    def check_describe_quorum(self) -> None:
        """DescribeQuorum v2 on the leader agrees with the leader's own state."""
        leader_id = self.leader()
        if leader_id is None:
            return
        core = self.nodes[leader_id].core
        assert core is not None
        request = DescribeQuorumRequest(
            topics=[DqTopic(topic_name="__cluster_metadata", partitions=[DqPartition(partition_index=0)])]
        )
        handle = self.admin_request(leader_id, request, version=2)
        response = self.admin_responses.pop(handle)
        response = type(response).decode(response.encode(2), 2)
        part = response.topics[0].partitions[0]
        state = core.state
        assert isinstance(state, Leader)
        expected_hwm = -1 if state.high_watermark is None else state.high_watermark
        rows = {row.replica_id: row for row in part.current_voters}
        if (
            part.error_code != 0
            or part.leader_id != leader_id
            or part.leader_epoch != core.epoch
            or part.high_watermark != expected_hwm
            or set(rows) != set(core.voters.ids)
            or {n.node_id for n in response.nodes} != set(core.voters.ids)
            or (leader_id in rows and rows[leader_id].log_end_offset != core.log.log_end_offset)
        ):
            self.fail(f"DescribeQuorum disagrees with leader {leader_id}: {part}")

    def current_voter_ids(self) -> list[int]:
        """The voter set of the running node with the highest epoch (the static set if none)."""
        cores = [n.core for n in self.nodes.values() if n.core is not None]
        if not cores:
            return self.voter_ids
        newest = max(cores, key=lambda c: (c.epoch, c.log.log_end_offset))
        return sorted(newest.voters.ids)

    def check_committed_on_majority(self) -> None:
        """Committed batches survive on a majority of durable voter logs."""
        voters = self.current_voter_ids()
        holders = sum(
            1 for i in voters if self.log_holds_committed(self.nodes[i].log, durable_only=True)
        )
        if holders < len(voters) // 2 + 1:
            self.fail(f"committed data on only {holders} of {len(voters)} durable voter logs")

    # ------------------------------------------------------------------ liveness

    def max_high_watermark(self) -> int:
        return max((n.core.high_watermark for n in self.nodes.values() if n.core is not None), default=0)



def describe(cluster: QuorumInvariants) -> str:
    """One line per node: its role, high watermark, log end, flushed offset and election state."""
    rows = []
    for node in cluster.nodes.values():
        core = node.core
        state = repr(core.state) if core is not None else "down"
        hwm = core.high_watermark if core is not None else "-"
        rows.append(
            f"node {node.node_id}: {state} hwm={hwm} leo={node.log.log_end_offset} "
            f"flushed={node.log.flushed_offset} persisted={node.election}"
        )
    return "\n".join(rows)
