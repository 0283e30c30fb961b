"""Deterministic simulation of a KRaft quorum of ``RaftCore``s (cf. Kafka's
``RaftEventSimulationTest`` in ``raft/src/test/java/org/apache/kafka/raft/``).

Everything runs on one virtual clock from one seeded ``random.Random``: an event queue ordered
by (time, sequence), an in-memory router with per-message loss (seen by the requester as a
broken connection, as over TCP), latency jitter, late duplicates of requests, directed link
cuts (silent partitions) and voters without Vote v2 (Kafka 3.9, no pre-vote),
``MemoryRaftLog``s whose unflushed batches a crash loses, quorum-state
that is durable as soon as the Outbox is applied, and restarts that rebuild the core from the
log and the persisted election state. The driver applies each Outbox in the order its
docstring prescribes.

Invariants checked after every event (``Cluster.check_invariants``):

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

Plus the core's and the log's own assertions (no truncation below the HWM, no HWM moving
backwards, no second leader in an epoch).
"""

from __future__ import annotations

import hashlib
import heapq
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kwire.uuid import METADATA_TOPIC_ID, ZERO_UUID, Uuid
from messages.generated import begin_quorum_epoch_request as bqe
from messages.generated import end_quorum_epoch_request as eqe
from messages.generated import fetch_request as fr
from messages.generated import vote_request as vr
from messages.generated.add_raft_voter_request import AddRaftVoterRequest, Listener
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.api_versions_response import ApiVersionsResponse, SupportedFeatureKey
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_request import PartitionData as DqPartition
from messages.generated.describe_quorum_request import TopicData as DqTopic
from messages.generated.remove_raft_voter_request import RemoveRaftVoterRequest
from messages.generated.vote_request import VoteRequest
from server.raft import registry
from server.raft.control import voters_record
from server.raft.core import RaftCore
from server.raft.events import (
    AppendResult,
    ClientAppend,
    CommittedBatch,
    Event,
    FailureReason,
    FlushCompleted,
    OutboundRequest,
    Outbox,
    Reply,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
    Tick,
)
from server.raft.log import MemoryRaftLog
from server.raft.outbox import apply_log_changes, apply_now
from server.raft.roles import Leader
from server.raft.types import (
    ElectionState,
    Endpoint,
    OffsetAndEpoch,
    QuorumConfig,
    ReplicaIdentity,
    ReplicaKey,
    VoterNode,
    VoterSet,
)
from storage.records import RecordBatch
from storage.snapshots import SnapshotId, build_snapshot_batches, read_snapshot_content

ADMIN = -1000
"""Source id of admin requests delivered by the simulation itself."""

API_VERSIONS = {
    message_type.__name__.replace("Response", "Request"): version
    for message_type, version in registry.DEFAULT.highest_versions().items()
}
"""``{request class name: version}`` the simulated peers speak: the highest each handler in
``server.raft.registry`` accepts (one table for the core, the node's ApiVersions and this)."""


class InvariantViolation(AssertionError):
    pass


def _key(key: Any) -> Any:
    return None if key is None else (key.id, key.directory_id)


def _endpoint(endpoint: Any) -> Any:
    return None if endpoint is None else (endpoint.name, endpoint.host, endpoint.port)


def _bytes(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _quoted(message: Any) -> str:
    """``repr(repr(message))``, the text of a message's repr as a string literal, without the
    escaping pass when nothing in the text needs escaping but backslashes: the text is a
    repr, so printable (the reprs inside it escaped whatever is not), and an ASCII one holds
    no character repr() would escape but quotes and backslashes."""
    text = repr(message)
    if text.isascii():
        if "\\" in text:
            if "'" not in text:
                return "'" + text.replace("\\", "\\\\") + "'"
            if '"' not in text:
                return '"' + text.replace("\\", "\\\\") + '"'
        elif "'" not in text:
            return "'" + text + "'"
        elif '"' not in text:
            return '"' + text + '"'
    return repr(text)


def _noted(message: Any, texts: dict[int, tuple[Any, str]] | None) -> str:
    """:func:`_quoted` of ``message``, kept in ``texts`` (by id, with the message, so that the
    id is not reused meanwhile) for the receiver's trace line."""
    text = _quoted(message)
    if texts is not None:
        texts[id(message)] = (message, text)
    return text


def _seen(event: Event, seen_text: str | None) -> str:
    """The ``seen`` part of a trace line for one event (:func:`trace_line`)."""
    if isinstance(event, RequestReceived):
        if seen_text is None:
            seen_text = _quoted(event.request)
        return f"('request', {event.request_id!r}, {event.api_version!r}, {seen_text}, {event.listener!r})"
    if isinstance(event, ResponseReceived):
        if seen_text is None:
            seen_text = _quoted(event.response)
        return f"('response', {event.correlation_id!r}, {event.source_id!r}, {seen_text})"
    if isinstance(event, RequestFailed):
        return repr(("failed", event.correlation_id, event.source_id, str(event.reason)))
    if isinstance(event, ClientAppend):
        return repr(("append", event.token, event.values))
    return f"({type(event).__name__!r},)"


def trace_line(
    now: int, node_id: int, event: Event | Sequence[Event], out: Outbox, core: RaftCore,
    seen_text: str | None = None, texts: dict[int, tuple[Any, str]] | None = None,
) -> bytes:
    """One step of a run as the core saw and answered it, in field values only (no class of the
    core's own but the role's name), so that a refactoring of the core that keeps its
    behaviour keeps every run's digest (``tests/raft/sim_traces.txt``).

    The line is ``repr((now, node_id, seen, did, role, epoch))`` with ``seen`` the event's
    fields (a tuple of each event's for a step of several), ``did`` the Outbox's in its field order (a message as the text of its repr, batch
    bytes as their ``_bytes`` digests) and ``role`` the name of the role's class, written
    out piece by piece: a step does little, and the repr of a tuple of mostly empty parts
    costs more than the parts.

    ``seen_text`` is ``_quoted`` of the event's message when the caller has it (the sender's
    line made it), and ``texts`` collects the ``_quoted`` of each message sent or answered,
    by id (with the message, which it keeps alive), for the receiver's line."""
    if isinstance(event, Sequence):  # one step of several events (appends merged)
        seen = _seen(event[0], seen_text) if len(event) == 1 else "(" + ", ".join(_seen(e, None) for e in event) + ",)"
    else:
        seen = _seen(event, seen_text)
    election = out.election_state
    install = out.install_snapshot
    # most of an Outbox is empty: its lists are made only when they hold something
    appends = [_bytes(data) for data in out.appends] if out.appends else []
    sends = ", ".join(
        f"({s.correlation_id!r}, {s.destination_id!r}, {_endpoint(s.endpoint)!r}, {_noted(s.request, texts)}, "
        f"{s.timeout_ms!r})" for s in out.sends
    ) if out.sends else ""
    replies = ", ".join(
        f"({r.request_id!r}, {_noted(r.response, texts)})" for r in out.replies
    ) if out.replies else ""
    committed = [
        (b.base_offset, b.last_offset, b.epoch, b.is_control, _bytes(b.data)) for b in out.committed
    ] if out.committed else []
    results = [
        (r.token, r.base_offset, r.last_offset, r.epoch, int(r.error_code)) for r in out.append_results
    ] if out.append_results else []
    did = (
        f"{None if election is None else (election.epoch, election.leader_id, _key(election.voted_key))!r}, "
        f"{out.truncate_to!r}, {None if install is None else (tuple(install[0]), _bytes(install[1]))!r}, "
        f"{appends!r}, {out.high_watermark!r}, [{sends}], [{replies}], {out.flush!r}, "
        f"{None if out.load_snapshot is None else tuple(out.load_snapshot)!r}, {committed!r}, {results!r}, "
        f"{out.next_deadline_ms!r}"
    )
    return f"({now!r}, {node_id!r}, {seen}, ({did}), {type(core.state).__name__!r}, {core.epoch!r})".encode()


@dataclass
class SimNode:
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
        return self.core is not None


class _SimTarget:
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


class Cluster:
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
        self.targets = {i: _SimTarget(self, node) for i, node in self.nodes.items()}
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

    # ------------------------------------------------------------------ network

    def reachable(self, src: int, dst: int) -> bool:
        return (src, dst) not in self.cut

    def route_request(self, node: SimNode, named: int, correlation: int, request: Any) -> None:
        """``named`` is the destination as the core knows it: a node id, or a bootstrap
        server's negative id (-2, -3, ...), which the router maps to a voter."""
        dst = self.bootstrap_map.get(named, named)
        if dst not in self.nodes or not self.reachable(node.node_id, dst):
            return
        if dst in self.vote_v1_nodes and isinstance(request, VoteRequest) and request.topics[0].partitions[0].pre_vote:
            # a Kafka 3.9 voter: Vote stops at v1, a pre-vote cannot be sent to it
            self.fail_connection(node.node_id, node.incarnation, named, correlation, FailureReason.UNSUPPORTED_VERSION)
            return
        text = self.text_of(request)
        if self.wire:
            request = self.over_the_wire(request)
        if self.drop_rate and self.rng.random() < self.drop_rate:
            self.fail_connection(node.node_id, node.incarnation, named, correlation)
            return
        self.schedule(
            self.now + self.rng.randint(1, 5),
            "deliver_request",
            (node.node_id, dst, node.incarnation, correlation, request, named, text),
        )
        if self.duplicate_rate and self.rng.random() < self.duplicate_rate:
            # a stale copy arrives much later (after newer traffic): it must be harmless
            self.schedule(
                self.now + self.rng.randint(5, 2000),
                "deliver_request",
                (node.node_id, dst, node.incarnation, correlation, request, named, text),
            )

    def route_response(
        self, src: int, dst: int, dst_incarnation: int, correlation: int, response: Any, named: int
    ) -> None:
        if not self.reachable(src, dst):
            return
        text = self.text_of(response)
        if self.wire:
            response = self.over_the_wire(response)
        if self.drop_rate and self.rng.random() < self.drop_rate:
            self.fail_connection(dst, dst_incarnation, named, correlation)
            return
        self.schedule(
            self.now + self.rng.randint(1, 5),
            "deliver_response",
            (dst, dst_incarnation, named, correlation, response, text),
        )

    def text_of(self, message: Any) -> str | None:
        """The trace text the last step made of ``message`` (None if it made none, or if the
        wire will hand the receiver another object, whose repr differs)."""
        entry = self.texts.get(id(message))
        return entry[1] if entry is not None and entry[0] is message and not self.wire else None

    def over_the_wire(self, message: Any) -> Any:
        """Encode and decode a message at the version this simulated network uses, proving
        that what the core builds is valid at that version."""
        name = type(message).__name__.replace("Response", "Request")
        version = API_VERSIONS[name]
        return type(message).decode(message.encode(version), version)

    def fail_connection(
        self, requester: int, incarnation: int, peer: int, correlation: int, reason: FailureReason = FailureReason.DISCONNECTED
    ) -> None:
        """A lost message breaks the connection, as over TCP: the requester learns it soon
        (a link cut by a partition, by contrast, is a silent black hole)."""
        self.schedule(
            self.now + self.rng.randint(1, 30),
            "request_failed",
            (requester, incarnation, peer, correlation, reason),
        )

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

    def isolate(self, node_id: int) -> None:
        for other in self.nodes:
            if other != node_id:
                self.cut.add((node_id, other))
                self.cut.add((other, node_id))

    def partition(self, *groups: list[int]) -> None:
        self.cut.clear()
        for a in groups:
            for b in groups:
                if a is b:
                    continue
                for x in a:
                    for y in b:
                        self.cut.add((x, y))

    def heal(self) -> None:
        self.cut.clear()

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

    # ------------------------------------------------------------------ invariants

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


# ---------------------------------------------------------------------- scenarios

SCENARIOS = ("steady", "leader_crash", "partition_leader", "chaos", "reconfig")


@dataclass
class RunStats:
    seed: int
    scenario: str
    events: int
    elections: int
    committed_end: int
    simulated_ms: int
    snapshots_taken: int = 0
    snapshot_installs: int = 0
    voter_changes: int = 0
    trace_digest: str = ""
    """``Cluster.trace``: equal for two runs of a seed iff the cores did exactly the same."""
    topics_created: int = 0
    """Topics the "brokers" scenario's admin created."""
    isr_changes: int = 0
    """Partition changes AlterPartition made in the "brokers" scenario."""
    controlled_shutdowns: int = 0
    """Brokers the "brokers" scenario's controller let shut down after a controlled shutdown."""
    reassignments: int = 0
    """Partition changes the "brokers" scenario's AlterPartitionReassignments wrote."""
    reassignments_completed: int = 0
    """Reassignments an AlterPartition completed in the "brokers" scenario."""
    leader_moves: int = 0
    """Partition changes a broker's fencing, unfencing or shutdown made in the "brokers" scenario."""
    image_snapshot_loads: int = 0
    """Controller images the "brokers" scenario's nodes loaded from snapshots."""
    speculative_commits: int = 0
    """Batches the "brokers" scenario committed while the active controller's image held
    records applied beyond them."""
    reverts: int = 0
    """Times a "brokers" scenario's controller went back to its committed image."""


def _liveness(cluster: Cluster, what: str, duration_ms: int) -> None:
    before = cluster.committed_end
    end = cluster.now + duration_ms
    cluster.start_workload(100, end)
    cluster.run_until(end)
    if cluster.committed_end <= before:
        cluster.fail(f"liveness: nothing committed within {duration_ms} ms after {what}")


def _voter_change(cluster: Cluster, make_request: Any, attempts: int = 20) -> bool:
    """Send a voter change to the leader until it answers NONE; False if it never does."""
    for _ in range(attempts):
        leader = _await_leader(cluster, 15_000)
        handle = cluster.admin_request(leader, make_request())
        deadline = cluster.now + 3000
        while handle not in cluster.admin_responses and cluster.now < deadline:
            cluster.run_until(cluster.now + 20)
        response = cluster.admin_responses.pop(handle, None)
        if response is not None and response.error_code == 0:
            cluster.voter_changes += 1
            return True
        cluster.run_until(cluster.now + 200)
    return False


STRAY_ID = 77
"""A replica id no simulated node has: the sender of the stray requests."""
STRAY_DIR = Uuid.from_longs(0x57, 0x77)


def stray_request(rng: random.Random, cluster: Cluster, node: SimNode) -> tuple[Any, int]:
    """``(request, version)``: one request of the shapes the differential probe
    (``compat/test_differential_probe.py``) sends a stock controller and a kwire node, as a
    replica outside the quorum (or a delayed, stale copy) can send it. Vote v0-2, pre-votes
    too, at epochs E-1..E+2 with every last-epoch and offset relation, from a replica or to a
    voter key that is not the receiver's; Fetch from an unknown observer at the start, the end,
    past the end, a later epoch or a negative offset; BeginQuorumEpoch and EndQuorumEpoch that
    are stale, name no leader or come from another cluster (and an EndQuorumEpoch from the
    real leader of the epoch); AddRaftVoter of an existing voter, without listeners or for
    another cluster. None of them forges a leadership the quorum did not elect."""
    core = node.core
    assert core is not None
    epoch, end = core.epoch, core.log.log_end_offset
    own_dir = cluster.directory_ids[node.node_id]
    cluster_id: str | None = rng.choice(("sim-cluster", "sim-cluster", "sim-cluster", "other", None))
    kind = rng.choice(("vote", "vote", "fetch", "begin", "end", "add"))
    if kind == "vote":
        version = rng.randint(0, 2)
        replica_epoch = max(0, epoch + rng.randint(-1, 2))
        last_epoch = max(0, min(replica_epoch, replica_epoch + rng.randint(-2, 0)))
        last_offset = rng.choice((0, end, end + 100, -1))
        return (
            vr.VoteRequest(
                cluster_id=cluster_id,
                voter_id=rng.choice((node.node_id, node.node_id, 7)),
                topics=[vr.TopicData(topic_name=rng.choice(("__cluster_metadata",) * 5 + ("other",)), partitions=[vr.PartitionData(
                    partition_index=0, replica_epoch=replica_epoch, replica_id=rng.choice((STRAY_ID, STRAY_ID, -1)),
                    replica_directory_id=STRAY_DIR, voter_directory_id=rng.choice((own_dir, own_dir, STRAY_DIR)),
                    last_offset_epoch=last_epoch, last_offset=last_offset, pre_vote=version == 2 and rng.random() < 0.5,
                )])],
            ),
            version,
        )
    if kind == "fetch":
        offset, last = rng.choice(((0, 0), (end, epoch), (end + 5, epoch), (end, epoch + 1), (-1, 0)))
        return (
            fr.FetchRequest(
                cluster_id=cluster_id, replica_id=-1, replica_state=fr.ReplicaState(replica_id=STRAY_ID, replica_epoch=-1),
                max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                topics=[fr.FetchTopic(topic="__cluster_metadata", topic_id=METADATA_TOPIC_ID, partitions=[fr.FetchPartition(
                    partition=0, current_leader_epoch=epoch + rng.randint(-1, 1), fetch_offset=offset,
                    last_fetched_epoch=last, log_start_offset=0, partition_max_bytes=1 << 20, replica_directory_id=STRAY_DIR,
                )])],
            ),
            API_VERSIONS["FetchRequest"],
        )
    if kind == "begin":
        leader, stale = rng.choice(((rng.choice(cluster.voter_ids), True), (-1, False)))
        return (
            bqe.BeginQuorumEpochRequest(
                cluster_id=cluster_id if stale else rng.choice(("other", "sim-cluster")), voter_id=node.node_id,
                topics=[bqe.TopicData(topic_name="__cluster_metadata", partitions=[bqe.PartitionData(
                    partition_index=0, voter_directory_id=own_dir, leader_id=leader,
                    leader_epoch=epoch - 1 if stale else epoch,
                )])],
            ),
            rng.randint(0, 1),
        )
    if kind == "end":
        current = core.leader_and_epoch.leader_id
        leader, at = rng.choice(((rng.choice(cluster.voter_ids), epoch - 1), (-1, epoch), (current if current is not None else -1, epoch)))
        return (
            eqe.EndQuorumEpochRequest(
                cluster_id=cluster_id if at < epoch else "sim-cluster",
                topics=[eqe.TopicData(topic_name="__cluster_metadata", partitions=[eqe.PartitionData(
                    partition_index=0, leader_id=leader, leader_epoch=at, preferred_successors=[], preferred_candidates=[],
                )])],
            ),
            rng.randint(0, 1),
        )
    existing = rng.choice(cluster.voter_ids)
    voter, directory, listeners = rng.choice((
        (existing, cluster.directory_ids[existing], True), (STRAY_ID, STRAY_DIR, False),
    ))
    return (
        AddRaftVoterRequest(
            cluster_id=rng.choice(("sim-cluster", "other")), timeout_ms=5000, voter_id=voter, voter_directory_id=directory,
            listeners=[Listener(name="CONTROLLER", host="localhost", port=1)] if listeners else [],
        ),
        API_VERSIONS["AddRaftVoterRequest"],
    )


def _run_stray(seed: int, rng: random.Random) -> RunStats:
    """A quorum under load receives a stray request every 20-200 ms for 10 s
    (:func:`stray_request`), with a crash and restart of one node midway; every invariant
    holds after every event, and the quorum commits again afterwards."""
    cluster = Cluster(
        seed,
        rng.choice((3, 3, 5)),
        rng.choice((0, 1)),
        config=QuorumConfig(pre_vote=rng.random() < 0.8, append_linger_ms=_linger_ms(seed)),
        kraft_version=rng.choice((0, 1)),
    )
    _liveness(cluster, "start", 3500)
    cluster.start_workload(80, cluster.now + 10_000)
    crash_at = cluster.now + rng.randint(2000, 6000)
    end = cluster.now + 10_000
    crashed: int | None = None
    while cluster.now < end:
        cluster.run_until(cluster.now + rng.randint(20, 200))
        if crashed is None and cluster.now >= crash_at:
            crashed = rng.choice(list(cluster.nodes))
            cluster.crash(crashed)
        running = [n for n in cluster.nodes.values() if n.running and n.core is not None]
        if running:
            target = rng.choice(running)
            request, version = stray_request(rng, cluster, target)
            cluster.admin_request(target.node_id, request, version)
            cluster.strays += 1
    if crashed is not None:
        cluster.restart(crashed)
    _liveness(cluster, "the stray requests", 8000)
    cluster.check_committed_on_majority()
    return RunStats(
        seed, "stray", cluster.events, cluster.elections, cluster.committed_end, cluster.now,
        cluster.snapshots_taken, cluster.snapshot_installs, trace_digest=cluster.trace.hexdigest(),
    )


def _linger_ms(seed: int) -> int:
    """``append.linger.ms`` of a run: half the seeds batch at once, half linger Kafka's 25 ms.
    Taken from the seed, not the run's random stream, so other choices of a seed stay put."""
    return (0, 25)[seed % 2]


def _run_reconfig(seed: int, rng: random.Random) -> RunStats:
    """KIP-853: grow the quorum with observers, shrink it (possibly removing the leader), with
    message loss and a crash, on a kraft.version 1 cluster."""
    cluster = Cluster(
        seed,
        rng.choice((1, 3, 3)),
        rng.choice((1, 2)),
        drop_rate=rng.choice((0.0, 0.0, 0.02)),
        config=QuorumConfig(pre_vote=rng.random() < 0.8, append_linger_ms=_linger_ms(seed)),
        kraft_version=1,
        snapshot_every=rng.choice((0, 15)),
        observers_bootstrap=rng.random() < 0.5,
    )
    cluster.start_workload(200, 60_000)
    _await_leader(cluster, 10_000)
    cluster.run_until(cluster.now + 1000)
    for observer in cluster.observer_ids:
        key_dir = cluster.directory_ids[observer]

        def add(observer: int = observer, key_dir: Uuid = key_dir) -> AddRaftVoterRequest:
            return AddRaftVoterRequest(
                cluster_id="sim-cluster",
                voter_id=observer,
                voter_directory_id=key_dir,
                listeners=[Listener(name="CONTROLLER", host=f"node{observer}", port=9000 + observer)],
            )

        if not _voter_change(cluster, add):
            cluster.fail(f"could not add observer {observer} as a voter")
        if rng.random() < 0.3:
            victim = rng.choice(cluster.current_voter_ids())
            cluster.crash(victim)
            cluster.run_until(cluster.now + rng.randint(100, 2000))
            cluster.restart(victim)
    moved = None
    if rng.random() < 0.5:
        # a voter restarts listening on another port: it must tell the leader (UpdateRaftVoter)
        moved = rng.choice(cluster.current_voter_ids())
        cluster.crash(moved)
        cluster.port_bump[moved] = 100
        cluster.run_until(cluster.now + rng.randint(50, 500))
        cluster.restart(moved)
        cluster.run_until(cluster.now + 4000)
    voters = cluster.current_voter_ids()
    if len(voters) > 1:
        victim = rng.choice(voters)

        def remove() -> RemoveRaftVoterRequest:
            return RemoveRaftVoterRequest(
                cluster_id="sim-cluster", voter_id=victim, voter_directory_id=cluster.directory_ids[victim]
            )

        if not _voter_change(cluster, remove):
            cluster.fail(f"could not remove voter {victim}")
    _liveness(cluster, "the voter changes", 5000)
    if moved is not None:
        # an UpdateRaftVoter refused while another change was pending is retried only after
        # 3 x fetch.timeout.ms (Kafka's update-voter period)
        cluster.run_until(cluster.now + 3 * cluster.config.fetch_timeout_ms + 1000)
    leader = _await_leader(cluster, 10_000)
    leader_core = cluster.nodes[leader].core
    assert leader_core is not None
    entry = leader_core.voters.get(moved) if moved is not None else None
    if entry is not None and entry.endpoints[0].port != cluster.port_of(moved):  # type: ignore[arg-type]
        cluster.fail(f"voter {moved} moved to port {cluster.port_of(moved)}, the voter set says {entry}")  # type: ignore[arg-type]
    cluster.check_committed_on_majority()
    cluster.check_describe_quorum()
    return RunStats(
        seed,
        "reconfig",
        cluster.events,
        cluster.elections,
        cluster.committed_end,
        cluster.now,
        cluster.snapshots_taken,
        cluster.snapshot_installs,
        cluster.voter_changes,
        cluster.trace.hexdigest(),
    )


def _await_leader(cluster: Cluster, within_ms: int) -> int:
    deadline = cluster.now + within_ms
    while cluster.now < deadline:
        leader = cluster.leader()
        if leader is not None:
            return leader
        cluster.run_until(cluster.now + 50)
    cluster.fail(f"no leader elected within {within_ms} ms")
    raise AssertionError("unreachable")


def run_scenario(seed: int, scenario: str | None = None) -> RunStats:
    """Run one seeded scenario, raising InvariantViolation (or the core's own assertion) on a
    safety or liveness failure. The scenario is picked by the seed unless given."""
    rng = random.Random(seed ^ 0x5EED)
    name = scenario or SCENARIOS[seed % len(SCENARIOS)]
    if name == "reconfig":
        return _run_reconfig(seed, rng)
    if name == "stray":
        return _run_stray(seed, rng)
    if name == "brokers":
        from tests.raft.sim_brokers import run_brokers  # it builds on this module

        return run_brokers(seed, rng)
    voters = rng.choice((1, 3, 3, 5)) if name == "steady" else rng.choice((3, 3, 5))
    observers = rng.choice((0, 0, 1, 2))
    drop = rng.choice((0.0, 0.0, 0.01, 0.05)) if name != "chaos" else rng.choice((0.0, 0.02, 0.1))
    pre_vote = rng.random() < 0.8
    kraft_version = rng.choice((0, 1))
    cluster = Cluster(
        seed,
        voters,
        observers,
        drop_rate=drop,
        config=QuorumConfig(pre_vote=pre_vote, append_linger_ms=_linger_ms(seed)),
        kraft_version=kraft_version,
        snapshot_every=rng.choice((0, 0, 10, 25)),
    )
    if pre_vote and voters > 1 and rng.random() < 0.2:
        cluster.vote_v1_nodes = {rng.choice(cluster.voter_ids)}
    if name == "chaos":
        cluster.duplicate_rate = rng.choice((0.0, 0.02, 0.05))
    if name == "steady":
        _liveness(cluster, "start", 4000)
    elif name == "leader_crash":
        _liveness(cluster, "start", 3500)
        leader = _await_leader(cluster, 10_000)
        cluster.crash(leader)
        if len(cluster.voter_ids) > 1:
            _liveness(cluster, "the leader crashed", 6000)
        cluster.restart(leader)
        _liveness(cluster, "the old leader restarted", 3000)
    elif name == "partition_leader":
        _liveness(cluster, "start", 3500)
        leader = _await_leader(cluster, 10_000)
        cluster.isolate(leader)
        cluster.start_workload(100, cluster.now + 5000)
        cluster.run_until(cluster.now + 5000)
        cluster.heal()
        _liveness(cluster, "healing the partition", 6000)
    else:  # chaos
        cluster.start_workload(80, 12000)
        for _ in range(12):
            cluster.run_until(cluster.now + rng.randint(200, 1500))
            action = rng.random()
            target = rng.choice(list(cluster.nodes))
            if action < 0.3:
                cluster.crash(target)
            elif action < 0.55:
                cluster.restart(target)
            elif action < 0.75:
                cluster.isolate(target)
            elif action < 0.85:
                ids = list(cluster.nodes)
                rng.shuffle(ids)
                cut = rng.randint(1, len(ids) - 1)
                cluster.partition(ids[:cut], ids[cut:])
            else:
                cluster.heal()
        cluster.run_until(12000)
        cluster.heal()
        cluster.drop_rate = 0.0
        cluster.duplicate_rate = 0.0
        for node_id in cluster.nodes:
            cluster.restart(node_id)
        _liveness(cluster, "healing and restarting everything", 8000)
    cluster.check_committed_on_majority()
    cluster.check_describe_quorum()
    return RunStats(
        seed,
        name,
        cluster.events,
        cluster.elections,
        cluster.committed_end,
        cluster.now,
        cluster.snapshots_taken,
        cluster.snapshot_installs,
        trace_digest=cluster.trace.hexdigest(),
    )


def describe(cluster: Cluster) -> str:
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
