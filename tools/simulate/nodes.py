"""A simulated node (``tools.simulate.cluster``): its in-memory log, its persisted election
state, its core while it runs, and the target its core's Outbox is carried out on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from server.raft.events import AppendResult, CommittedBatch, OutboundRequest, Outbox, Reply
from server.raft.log import MemoryRaftLog
from server.raft.outbox import apply_log_changes
from server.raft.roles import Leader
from server.raft.types import ElectionState, OffsetAndEpoch, ReplicaKey

if TYPE_CHECKING:
    from server.raft.core import RaftCore
    from tools.simulate.cluster import Cluster

__all__ = ["ADMIN", "SimNode", "SimTarget"]

ADMIN = -1000
"""Source id of admin requests delivered by the simulation itself."""


@dataclass
class SimNode:
    """One simulated controller node: what survives its crashes (log, election state, votes)
    and what its running core has delivered."""

    node_id: int
    log: MemoryRaftLog = field(default_factory=MemoryRaftLog)
    election: ElectionState | None = None
    core: RaftCore | None = None
    incarnation: int = 0
    tick_generation: int = 0
    last_hwm: int = 0
    delivered_next: int = 0
    next_request_id: int = 1
    pending_replies: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    """request id -> (requester, its correlation id, its incarnation, the id it sent to)"""
    persisted_epochs: list[int] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    votes: dict[int, ReplicaKey] = field(default_factory=dict)
    """epoch -> the one replica this node ever voted for in it (across restarts)"""

    @property
    def running(self) -> bool:
        """Whether the node is up (has a core)."""
        return self.core is not None


class SimTarget:
    """An Outbox's effects on a simulated node: quorum-state durable at once, the in-memory
    log, the router, a flush that completes 0-4 ms later, the invariant checks on what the
    state machine receives, and the node's next tick."""

    def __init__(self, cluster: Cluster, node: SimNode) -> None:
        self.cluster = cluster
        self.node = node

    async def persist_election(self, election: ElectionState) -> None:
        self.cluster.persist(self.node, election)

    async def write_log(self, out: Outbox) -> None:
        if out.install_snapshot is not None:
            core = self.node.core
            if core is not None and isinstance(core.state, Leader):
                self.cluster.fail(f"LeaderNeverLoadSnapshot: leader {self.node.node_id} installs a snapshot")
            self.cluster.snapshot_installs += 1
        apply_log_changes(self.node.log, out)

    def send(self, request: OutboundRequest) -> None:
        self.cluster.route_request(self.node, request.destination_id, request.correlation_id, request.request)

    def reply(self, reply: Reply) -> None:
        node = self.node
        src, correlation, src_incarnation, named = node.pending_replies.pop(reply.request_id)
        if src == ADMIN:
            self.cluster.admin_responses[correlation] = reply.response
            return
        self.cluster.route_response(node.node_id, src, src_incarnation, correlation, reply.response, named)

    async def flush(self) -> None:
        cluster, node = self.cluster, self.node
        token = node.log.begin_flush()
        cluster.schedule(cluster.now + cluster.rng.randint(0, 4), "flush", (node.node_id, node.incarnation, token))

    async def load_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        self.cluster.on_load_snapshot(self.node, snapshot_id)

    def commit(self, batch: CommittedBatch) -> None:
        self.cluster.on_committed(self.node, batch)

    def append_result(self, result: AppendResult) -> None:
        self.cluster.on_append_result(self.node, result)

    def schedule(self, deadline_ms: int | None) -> None:
        if deadline_ms is not None:
            node = self.node
            node.tick_generation += 1
            self.cluster.schedule(max(deadline_ms, self.cluster.now), "tick", (node.node_id, node.tick_generation))

