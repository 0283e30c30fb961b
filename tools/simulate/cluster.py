"""Deterministic simulation of a KRaft quorum of ``RaftCore``s (cf. Kafka's
``RaftEventSimulationTest`` in ``raft/src/test/java/org/apache/kafka/raft/``).

Everything runs on one virtual clock from one seeded ``random.Random``: an event queue ordered
by (time, sequence), an in-memory router (``tools.simulate.network``) with per-message loss,
latency jitter, late duplicates of requests, directed link cuts and voters without Vote v2,
``MemoryRaftLog``s whose unflushed batches a crash loses, quorum-state that is durable as soon
as the Outbox is applied, and restarts that rebuild the core from the log and the persisted
election state. The driver applies each Outbox in the order its docstring prescribes. The
invariants (``tools.simulate.invariants``) are checked after every event, beside the core's
and the log's own assertions (no truncation below the HWM, no HWM moving backwards, no second
leader in an epoch); every step goes into the run's trace digest (``tools.simulate.trace``).

The tests run it seeded (``tests/raft/test_simulation.py``, scenarios in
``tools.simulate.scenarios``); ``kwire simulate`` runs its controller variant
(``tools.simulate.brokers``) at a fleet's size (``tools.simulate.fleet``).
"""

from __future__ import annotations

import hashlib
import heapq
import os
import random
from collections.abc import Callable
from typing import Any

from kwire.uuid import ZERO_UUID, Uuid
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.api_versions_response import ApiVersionsResponse, SupportedFeatureKey
from server.raft.core import RaftCore
from server.raft.events import (
    ClientAppend,
    Event,
    FlushCompleted,
    Outbox,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
    Tick,
)
from server.raft.log import MemoryRaftLog
from server.raft.outbox import apply_now
from server.raft.roles import Leader
from server.raft.types import (
    ElectionState,
    Endpoint,
    QuorumConfig,
    ReplicaIdentity,
    ReplicaKey,
    VoterNode,
    VoterSet,
)
from tools.simulate.invariants import QuorumInvariants
from tools.simulate.network import API_VERSIONS, Router
from tools.simulate.nodes import ADMIN, SimNode, SimTarget
from tools.simulate.trace import trace_line

__all__ = ["ADMIN", "API_VERSIONS", "Cluster"]


class Cluster(Router, QuorumInvariants):
    """A simulated quorum (module docstring): ``voters`` voters and ``observers`` observers on
    one clock, driven by :meth:`run_until`."""

    tracing = True
    """Whether steps go into :attr:`trace` (a fleet run, which reports no digest, skips it)."""

    def __init__(
        self,
        seed: int,
        voters: int = 3,
        observers: int = 0,
        *,
        drop_rate: float = 0.0,
        config: QuorumConfig | None = None,
        kraft_version: int = 0,
        snapshot_every: int = 0,
        log_factory: Callable[[], MemoryRaftLog] = MemoryRaftLog,
        observers_bootstrap: bool = False,
        wire: bool = False,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0
        self.config = config or QuorumConfig()
        self.drop_rate = drop_rate
        self.kraft_version = kraft_version
        self.voter_ids = list(range(1, voters + 1))
        self.observer_ids = list(range(voters + 1, voters + observers + 1))
        self.directory_ids = {
            i: Uuid.from_longs(seed & 0xFFFFFFFF, i) if kraft_version >= 1 else ZERO_UUID
            for i in self.voter_ids + self.observer_ids
        }
        if kraft_version >= 1:
            # what the bootstrap checkpoint of `kafka-storage format --initial-controllers` holds
            self.voter_set = VoterSet(
                tuple(
                    VoterNode(
                        ReplicaKey(i, self.directory_ids[i]),
                        (Endpoint("CONTROLLER", f"node{i}", 9000 + i),),
                        (0, 1),
                    )
                    for i in self.voter_ids
                )
            )
        else:
            self.voter_set = VoterSet.static({i: (f"node{i}", 9000 + i) for i in self.voter_ids})
        self.nodes = {i: SimNode(i, log_factory()) for i in self.voter_ids + self.observer_ids}
        self.targets = {i: SimTarget(self, node) for i, node in self.nodes.items()}
        """Each node's Outbox target (it reads the node's state as it is at each step)."""
        self.bootstrap_map = {-2 - index: voter for index, voter in enumerate(self.voter_ids)}
        self.port_bump: dict[int, int] = {}
        """Listener port changes a restarted node comes back with (KIP-853 UpdateRaftVoter)."""
        self.wire = wire or os.environ.get("KWIRE_SIM_WIRE") == "1"
        """Encode and decode every message (also forced on by KWIRE_SIM_WIRE=1)."""
        self.duplicate_rate = 0.0
        self.vote_v1_nodes: set[int] = set()
        """Voters that, like Kafka 3.9, do not support Vote v2 (pre-vote)."""
        self.observers_bootstrap = observers_bootstrap
        self.queue: list[tuple[int, int, str, Any]] = []
        self.sequence = 0
        self.cut: set[tuple[int, int]] = set()
        self.committed: dict[int, tuple[int, bytes]] = {}
        """offset of each committed batch -> (last offset, sha of the batch bytes)"""
        self.committed_end = 0
        self.leaders_by_epoch: dict[int, int] = {}
        self.leaders_seen: set[tuple[int, int]] = set()
        self.live_leaders: dict[int, int] = {}
        self.touched: set[int] = set()
        self.events = 0
        self.next_token = 1
        self.acked: dict[int, int] = {}
        self.elections = 0
        self.admin_responses: dict[int, Any] = {}
        self.next_admin = 0
        self.voter_changes = 0
        self.strays = 0
        """Stray requests delivered (the "stray" scenario)."""
        self.committed_values: list[bytes] = []
        self.batch_contents: dict[bytes, tuple[list[bytes], bytes]] = {}
        """Bytes of a committed batch -> (its record values, its digest): every node commits the
        same batches, which are parsed and hashed once (``on_committed``)."""
        self.snapshot_every = snapshot_every
        self.snapshots_taken = 0
        self.snapshot_installs = 0
        self.trace = hashlib.blake2b(digest_size=16)
        """Digest of every step: the event, the Outbox and the role after it (``trace_line``)."""
        self.texts: dict[int, tuple[Any, str]] = {}
        """The trace text of each message the last step sent or answered (``trace_line``'s
        ``texts``): the router hands it on with the message, for the receiver's trace line."""
        for node_id in self.nodes:
            self.start(node_id)

    # ------------------------------------------------------------------ scheduling

    def schedule(self, at: int, kind: str, payload: Any) -> None:
        self.sequence += 1
        heapq.heappush(self.queue, (at, self.sequence, kind, payload))

    def run_until(self, end_ms: int) -> None:
        while self.queue and self.queue[0][0] <= end_ms:
            at, _, kind, payload = heapq.heappop(self.queue)
            self.now = at
            self.dispatch(kind, payload)
            self.events += 1
            self.check_invariants()
        self.now = max(self.now, end_ms)

    def dispatch(self, kind: str, payload: Any) -> None:
        if kind == "tick":
            node_id, generation = payload
            node = self.nodes[node_id]
            if node.running and node.tick_generation == generation:
                self.step(node_id, Tick())
        elif kind == "deliver_request":
            src, dst, src_incarnation, correlation, request, named, text = payload
            node = self.nodes[dst]
            if not node.running:
                return
            if isinstance(request, ApiVersionsRequest):
                # answered by the node's network layer, not by the KRaft core
                features = [SupportedFeatureKey(name="kraft.version", min_version=0, max_version=1)]
                self.route_response(
                    dst, src, src_incarnation, correlation, ApiVersionsResponse(supported_features=features), named
                )
                return
            request_id = node.next_request_id
            node.next_request_id += 1
            node.pending_replies[request_id] = (src, correlation, src_incarnation, named)
            version = API_VERSIONS[type(request).__name__]
            self.step(dst, RequestReceived(request_id, version, request), text)
        elif kind == "deliver_response":
            dst, dst_incarnation, src, correlation, response, text = payload
            node = self.nodes[dst]
            if not node.running or node.incarnation != dst_incarnation:
                return
            self.step(dst, ResponseReceived(correlation, src, response), text)
        elif kind == "request_failed":
            node_id, incarnation, peer, correlation, reason = payload
            node = self.nodes[node_id]
            if node.running and node.incarnation == incarnation:
                self.step(node_id, RequestFailed(correlation, peer, reason))
        elif kind == "flush":
            node_id, incarnation, token = payload
            node = self.nodes[node_id]
            if not node.running or node.incarnation != incarnation:
                return
            node.log.complete_flush(token)
            self.step(node_id, FlushCompleted())
        elif kind == "call":
            payload()
        else:
            raise AssertionError(kind)

    # ------------------------------------------------------------------ nodes

    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.incarnation += 1
        node.pending_replies.clear()
        # a controller formatted without initial controllers knows only the bootstrap servers
        bootstrap_only = self.observers_bootstrap and node_id in self.observer_ids
        node.core = RaftCore(
            identity=ReplicaIdentity(
                node_id,
                directory_id=self.directory_ids[node_id],
                cluster_id="sim-cluster",
                endpoints=(Endpoint("CONTROLLER", f"node{node_id}", self.port_of(node_id)),),
            ),
            log=node.log,
            voters=VoterSet(()) if bootstrap_only else self.voter_set,
            bootstrap_servers=[
                Endpoint("CONTROLLER", f"node{v}", 9000 + v) for v in self.voter_ids
            ]
            if bootstrap_only
            else (),
            rng=random.Random(self.rng.getrandbits(64)),
            now_ms=self.now,
            election=node.election,
            kraft_version=self.kraft_version,
            config=self.config,
        )
        node.last_hwm = node.core.high_watermark
        node.delivered_next = node.log.log_start_offset
        node.values = []
        self.step(node_id, Tick())

    def port_of(self, node_id: int) -> int:
        return 9000 + node_id + self.port_bump.get(node_id, 0)

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if not node.running:
            return
        node.core = None
        node.log.crash()
        node.tick_generation += 1

    def restart(self, node_id: int) -> None:
        if not self.nodes[node_id].running:
            self.start(node_id)

    def step(self, node_id: int, event: Event, seen_text: str | None = None) -> None:
        """``seen_text``: the trace text of the event's message, if the sender's step made it."""
        node = self.nodes[node_id]
        assert node.core is not None
        self.touched.add(node_id)
        outbox = node.core.step(self.now, event)
        if self.tracing:
            texts = self.texts = {}
            self.trace.update(trace_line(self.now, node_id, event, outbox, node.core, seen_text, texts))
        self.apply(node, outbox)

    def apply(self, node: SimNode, out: Outbox) -> None:
        core = node.core
        assert core is not None
        apply_now(out, self.targets[node.node_id])
        if (
            self.snapshot_every
            and out.committed
            and node.delivered_next - node.log.log_start_offset >= self.snapshot_every
        ):
            self.take_snapshot(node, out.committed[-1].epoch)
        if isinstance(core.state, Leader) and (core.state.epoch, node.node_id) not in self.leaders_seen:
            self.leaders_seen.add((core.state.epoch, node.node_id))
            self.on_new_leader(node, core.state.epoch)

    def persist(self, node: SimNode, election: ElectionState) -> None:
        if node.election is not None and election.epoch < node.election.epoch:
            self.fail(f"MonotonicEpoch: node {node.node_id} persisted epoch {election.epoch} after {node.election.epoch}")
        if election.voted_key is not None:
            earlier = node.votes.setdefault(election.epoch, election.voted_key)
            if earlier != election.voted_key:
                self.fail(
                    f"OneVotePerEpoch: node {node.node_id} voted for {earlier} and "
                    f"{election.voted_key} in epoch {election.epoch}"
                )
        node.election = election
        node.persisted_epochs.append(election.epoch)
        if election.leader_id is not None:
            known = self.leaders_by_epoch.get(election.epoch)
            if known is not None and known != election.leader_id:
                self.fail(
                    f"SingleLeader: epoch {election.epoch} has leaders {known} and {election.leader_id}"
                )
            self.leaders_by_epoch[election.epoch] = election.leader_id

    def admin_request(self, node_id: int, request: Any, version: int = 0) -> int:
        """Deliver an admin request (AddRaftVoter, RemoveRaftVoter, DescribeQuorum) to a node
        at once; its response lands in ``admin_responses[handle]``."""
        self.next_admin += 1
        handle = self.next_admin
        node = self.nodes[node_id]
        if node.running:
            request_id = node.next_request_id
            node.next_request_id += 1
            node.pending_replies[request_id] = (ADMIN, handle, 0, node_id)
            self.step(node_id, RequestReceived(request_id, version, request))
        return handle

    # ------------------------------------------------------------------ workload

    def leader(self) -> int | None:
        leaders = [
            (n.core.epoch, n.node_id)
            for n in self.nodes.values()
            if n.core is not None and isinstance(n.core.state, Leader)
        ]
        return max(leaders)[1] if leaders else None

    def append(self) -> None:
        leader = self.leader()
        if leader is None:
            return
        token = self.next_token
        self.next_token += 1
        self.step(leader, ClientAppend(token, (f"value-{token}".encode(),)))

    def start_workload(self, period_ms: int, until_ms: int) -> None:
        def tick() -> None:
            self.append()
            if self.now + period_ms <= until_ms:
                self.schedule(self.now + period_ms, "call", tick)

        self.schedule(self.now + period_ms, "call", tick)

