"""The controller workload: stock brokers on a controller quorum under the nemeses, an admin
and a producer recording what they were told, and the checker of that history.

Three stock brokers (:data:`BROKER_IDS`, of the quorum's release) run in one network namespace
of their own (host ``brokers`` of the run's :class:`~compat.faults.net.Network`), so the
nemeses that cut the active controller off from the other voters leave the brokers' links to
every controller alone, and ``pause-broker`` (SIGSTOP of a broker for longer than
``broker.session.timeout.ms``) fences one. Two clients run on host ``client`` while the rounds
go on (:func:`compat.faults.rounds.run_round`):

* a kafka-python producer (:class:`compat.clients.Load`: idempotent, ``acks=all``) writing to
  :data:`DATA_TOPIC` (3 partitions, replication factor 3, ``min.insync.replicas=2``);
* :class:`AdminWorkload`, one request at a time through a broker, which forwards it to the
  active controller (KIP-590): CreateTopics of a new topic (:data:`CREATE_SHAPES`),
  IncrementalAlterConfigs of :data:`MOVES_TOPIC`'s ``retention.ms`` to a new value,
  AlterPartitionReassignments of ``moves-0`` to another pair of brokers once the last move is
  done, and DeleteTopics of the oldest topic it created once more than :data:`LIVE_TOPICS` are
  live. Each request is an
  :class:`AdminOp` with the outcomes of :mod:`compat.faults.history` (``ok`` when the broker
  answered ``NONE``; ``failed`` when nothing was sent; ``unknown`` otherwise, since a broker
  retries a forwarded request after a controller failover, and even ``TOPIC_ALREADY_EXISTS``
  may mean an earlier attempt of the same request was committed). After each acknowledged
  create, fresh kafka-python admin clients ask ``describe_topics`` until it lists the topic's
  partitions, as a new user's script would: the seconds that took are the op's ``visible_s``.

:func:`check_cluster` then names every violation: an acknowledged create, delete or config
change whose record (``TopicRecord``, ``RemoveTopicRecord``, ``ConfigRecord``) is missing from a
voter's committed log, or an acknowledged reassignment whose target it does not reach as
often as it was acknowledged (``lost``); a topic name with two ``TopicRecord``\\ s -- a deleted topic
come back, since names are never reused (``reappeared``); a record no request carried
(``phantom``); two acknowledged requests committed in the other order than they completed
(``reordered``); voters whose committed metadata differs (``diverged``); an acknowledged create
not described within :data:`VISIBLE_BOUND_S` (``invisible``); a broker whose topics at the end are
not the log's live topics, or ``moves-0``'s final target (its replicas less those being removed)
not the last acknowledged reassignment's (``final``); an acknowledged record not read back exactly once, or any record
read back twice (``records``).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from compat.clients import Load, read_all
from compat.faults.history import Findings, committed_messages, send_once
from compat.faults.net import Network
from compat.harness import (
    CLUSTER_ID,
    KafkaRelease,
    wait_until,
)
from kwire.errors import Errors
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from messages.generated.config_record import ConfigRecord
from messages.generated.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from messages.generated.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from messages.generated.metadata_request import MetadataRequest, MetadataRequestTopic
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from server.net.client import open_connection
from tools.stock_brokers import StockBrokers

BROKER_IDS = (101, 102, 103)
BROKER_PORTS = {101: 9092, 102: 9094, 103: 9096}
"""Each broker's client port on host ``brokers``: fixed and distinct. That network namespace has
a stack of its own holding these three listeners and the brokers' outgoing connections, whose
source ports the kernel takes above 32767 (``ip_local_port_range``), so nothing else can hold
them; ports drawn on the machine's loopback (``free_port``), checked there and released, were
not even checked where the brokers bind them, and two draws could meet."""
DATA_TOPIC = "acked"
MOVES_TOPIC = "moves"
"""One partition, replication factor 2, never deleted: reassigned and reconfigured."""
MOVES_TARGETS = ((101, 102), (102, 103), (103, 101))
TOPIC_CONFIG = "retention.ms"
TOPIC_RESOURCE = 2
FIRST_VALUE = 9_000_000_000
LIVE_TOPICS = 3
CREATE_SHAPES = ((3, 3), (2, 2))
"""(partitions, replication factor) of the created topics, in turn: the first is the topic a
new user's script made in a case once reported against kwire (created through a 3.9.2 broker
five seconds after the active controller's kill -9, then not described for 30 s); the second
can be placed while a broker is fenced."""
SESSION_TIMEOUT_MS = 9000
"""The controllers' ``broker.session.timeout.ms`` (Kafka's default): a broker paused longer is
fenced."""
BROKER_START_TIMEOUT_S = 120.0
VISIBLE_BOUND_S = 15.0
"""Seconds an acknowledged topic may take to be described with its partitions by a fresh
client: an election and a broker's metadata fetch, with a margin for a loaded machine."""
SETTLE_S = 60.0
RECORDS_PER_S = 250
"""The producer's rate: a few hundred acknowledged records in every round, and the machine left
to the nodes (at 1,000 a second a ten-round run took 10 CPU-seconds more)."""


@dataclass
class AdminOp:
    """One admin request: its kind (``create``, ``delete``, ``config``, ``reassign``), topic and
    value (a config value, or a reassignment's replicas), the broker it went to, when it was
    invoked and completed (``time.monotonic()`` seconds), its outcome (``ok``, ``failed``,
    ``unknown``) and why, and for an acknowledged create the seconds until it was described
    (None: not within the probe's wait)."""

    kind: str
    topic: str
    value: Any
    broker: int
    invoked_s: float
    completed_s: float = 0.0
    outcome: str = "unknown"
    detail: str = ""
    visible_s: float | None = None

    @property
    def key(self) -> str:
        return f"{self.kind} {self.topic}" + ("" if self.value is None else f" {self.value}")


@dataclass
class ClusterVerdict(Findings):
    """What :func:`check_cluster` found (see the module docstring); ``ok`` when nothing was."""

    PROBLEMS = ("lost", "reappeared", "phantom", "reordered", "diverged", "invisible", "final", "records")

    acknowledged: int
    failed: int
    unknown: int
    records_acknowledged: int
    acknowledged_by_kind: dict[str, int] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    reappeared: list[str] = field(default_factory=list)
    phantom: list[str] = field(default_factory=list)
    reordered: list[tuple[str, str]] = field(default_factory=list)
    diverged: list[int] = field(default_factory=list)
    invisible: list[str] = field(default_factory=list)
    final: list[str] = field(default_factory=list)
    records: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.acknowledged_by_kind.items()))
        return (f"{self.acknowledged} admin requests acknowledged ({kinds}), {self.failed} failed, "
                f"{self.unknown} unknown; {self.records_acknowledged} records acknowledged" + self.problems(8))


@dataclass(frozen=True)
class Event:
    """One committed metadata record the checker follows: its offset, kind (``create``,
    ``delete``, ``config``), topic name and value (a config value, else None)."""

    offset: int
    kind: str
    topic: str
    value: Any = None


def committed_events(data: Path, high_watermark: int) -> list[Event]:
    """The ``TopicRecord``, ``RemoveTopicRecord`` and :data:`MOVES_TOPIC` ``retention.ms``
    ``ConfigRecord`` events of the metadata log under the log directory ``data``, below
    ``high_watermark``, in log order, and the reassignments of ``moves-0``: a
    ``PartitionChangeRecord`` that sets its replicas moves it towards those replicas less the
    ones being removed (the target, in order), an event ``reassign`` with that target when it
    differs from the last one (a move's start and its completion are one event)."""
    events: list[Event] = []
    names: dict[Any, str] = {}
    moves_id: Any = None
    removing: list[int] = []
    target: tuple[int, ...] = ()
    for offset, message in committed_messages(data, high_watermark):
        if isinstance(message, TopicRecord):
            names[message.topic_id] = message.name
            events.append(Event(offset, "create", message.name))
        elif isinstance(message, RemoveTopicRecord):
            events.append(Event(offset, "delete", names.get(message.topic_id, str(message.topic_id))))
        elif (isinstance(message, ConfigRecord) and message.resource_type == TOPIC_RESOURCE
              and message.resource_name == MOVES_TOPIC and message.name == TOPIC_CONFIG
              and message.value is not None):
            events.append(Event(offset, "config", MOVES_TOPIC, int(message.value)))
        elif isinstance(message, PartitionRecord) and message.partition_id == 0:
            if names.get(message.topic_id) == MOVES_TOPIC:
                moves_id, removing = message.topic_id, list(message.removing_replicas)
                target = tuple(r for r in message.replicas if r not in removing)
        elif (isinstance(message, PartitionChangeRecord) and message.topic_id == moves_id
              and message.partition_id == 0 and message.replicas is not None):
            if message.removing_replicas is not None:  # None: unchanged
                removing = list(message.removing_replicas)
            moved = tuple(r for r in message.replicas if r not in removing)
            if moved != target:
                target = moved
                events.append(Event(offset, "reassign", MOVES_TOPIC, target))
    return events


def live_topics(events: Sequence[Event]) -> set[str]:
    """The topics created and not deleted, by ``events``."""
    live: set[str] = set()
    for event in events:
        if event.kind == "create":
            live.add(event.topic)
        elif event.kind == "delete":
            live.discard(event.topic)
    return live


def check_cluster(ops: Sequence[AdminOp], events: Mapping[int, Sequence[Event]], *,
                  broker_topics: Mapping[int, set[str]], moves_target: Sequence[int] | None,
                  acked_records: Sequence[str], read_back: Counter[str]) -> ClusterVerdict:
    """Check an admin history against each voter's committed events (node id -> events in log
    order), the topics each broker lists at the end (internal ones left out), ``moves-0``'s
    final target (:class:`MovesState`), and the producer's acknowledged records against how often each was read
    back. See the module docstring for each finding."""
    verdict = ClusterVerdict(
        acknowledged=sum(op.outcome == "ok" for op in ops), failed=sum(op.outcome == "failed" for op in ops),
        unknown=sum(op.outcome == "unknown" for op in ops), records_acknowledged=len(acked_records),
        acknowledged_by_kind=dict(Counter(op.kind for op in ops if op.outcome == "ok")),
    )
    keyed = {(e.kind, e.topic, e.value) for e in itertools.chain.from_iterable(events.values())}
    sequences = {node: [(e.kind, e.topic, e.value) for e in evs] for node, evs in events.items()}
    reference = sequences[min(sequences)]
    verdict.diverged = sorted(node for node, seq in sequences.items() if seq != reference)
    sent = {_entry(op) for op in ops if op.outcome != "failed" and op.kind != "reassign"}
    # a target can be asked for again: reassignments are counted per target
    moves_sent = Counter(tuple(op.value) for op in ops if op.kind == "reassign" and op.outcome != "failed")
    moves_acked = Counter(tuple(op.value) for op in ops if op.kind == "reassign" and op.outcome == "ok")
    for node, seq in sequences.items():
        created = Counter(topic for kind, topic, _ in seq if kind == "create")
        verdict.reappeared += sorted(f"{topic} (node {node})" for topic, n in created.items() if n > 1)
        for op in ops:
            if op.outcome == "ok" and op.kind != "reassign" and _entry(op) not in seq:
                verdict.lost.append(f"{op.key} (node {node})")
        moved = Counter(value for kind, _, value in seq if kind == "reassign")
        verdict.lost += [f"reassign {MOVES_TOPIC} {t} (node {node})" for t, n in sorted(moves_acked.items())
                         if moved[t] < n]
        if node == min(sequences):
            verdict.phantom += [f"reassign {MOVES_TOPIC} {t}" for t, n in sorted(moved.items()) if n > moves_sent[t]]
    for kind, topic, value in sorted(keyed, key=str):
        if (topic in (DATA_TOPIC, MOVES_TOPIC) and kind == "create") or kind == "reassign":
            continue  # the run's own set-up; reassignments are counted above
        if (kind, topic, value) not in sent:
            verdict.phantom.append(f"{kind} {topic}" + ("" if value is None else f" {value}"))
    position = {entry: i for i, entry in reversed(list(enumerate(reference)))}
    acknowledged = sorted((op for op in ops if op.outcome == "ok" and op.kind != "reassign" and _entry(op) in position),
                          key=lambda op: position[_entry(op)])
    latest_invoked, latest = -1.0, ""
    for op in acknowledged:  # in log order, none completed before an earlier-committed one was invoked
        if op.completed_s < latest_invoked:
            verdict.reordered.append((op.key, latest))
        if op.invoked_s > latest_invoked:
            latest_invoked, latest = op.invoked_s, op.key
    verdict.invisible = [op.topic for op in ops if op.kind == "create" and op.outcome == "ok"
                         and (op.visible_s is None or op.visible_s > VISIBLE_BOUND_S)]
    live = live_topics(events[min(events)])
    for broker, topics in sorted(broker_topics.items()):
        if topics != live:
            verdict.final.append(f"broker {broker} lists {sorted(topics - live)} deleted and lacks "
                                 f"{sorted(live - topics)}")
    reassigns = [op for op in ops if op.kind == "reassign" and op.outcome != "failed"]
    last_ok = max((i for i, op in enumerate(reassigns) if op.outcome == "ok"), default=None)
    if last_ok is not None:
        allowed = {tuple(op.value) for op in reassigns[last_ok:]}
        if moves_target is None or tuple(moves_target) not in allowed:
            verdict.final.append(f"{MOVES_TOPIC}-0 moves to {moves_target}, not one of {sorted(allowed)}")
    acked = Counter(acked_records)
    verdict.records = sorted(
        [f"{v} read {read_back[v]} times" for v in acked if read_back[v] != 1]
        + [f"{v} read {n} times" for v, n in read_back.items() if n > 1 and v not in acked])
    return verdict


def _entry(op: AdminOp) -> tuple[str, str, Any]:
    """An op as the event it should commit: ``(kind, topic, value)``, the value a config's."""
    return op.kind, op.topic, op.value if op.kind == "config" else None


class AdminWorkload:
    """The admin of the module docstring, through the brokers at ``addresses`` (broker id ->
    ``(host, port)``), until :meth:`stop`. Run :meth:`run` in the thread (and network
    namespace) the client should use; ``ops`` is the history."""

    def __init__(self, addresses: Mapping[int, tuple[str, int]], *, interval_s: float = 0.02,
                 timeout_s: float = 8.0, probe_s: float = VISIBLE_BOUND_S + 5, paused: set[int] | None = None,
                 moves: bool = True) -> None:
        self.addresses = dict(addresses)
        self.moves = moves
        """whether it reassigns ``moves-0`` (whose ISR changes are the brokers' own writes)"""
        self.paused = set() if paused is None else paused
        """brokers a nemesis has stopped (shared with it): the describe probe leaves them out"""
        self.interval_s, self.timeout_s, self.probe_s = interval_s, timeout_s, probe_s
        self.ops: list[AdminOp] = []
        self._stopped = threading.Event()
        self._brokers = itertools.cycle(sorted(self.addresses))
        self._target = next(self._brokers)

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        trio.run(self._run)

    async def _run(self) -> None:
        live: list[str] = []
        for n in itertools.count():
            if self._stopped.is_set():
                return
            topic = f"w-{n:05d}"
            shape = CREATE_SHAPES[n % len(CREATE_SHAPES)]
            create = await self._op("create", topic, None, CreateTopicsRequest(
                topics=[CreatableTopic(name=topic, num_partitions=shape[0], replication_factor=shape[1])],
                timeout_ms=int(self.timeout_s * 1000) - 1000))
            if create.outcome == "ok":
                live.append(topic)
                create.visible_s = self._describe_until_listed(topic, shape[0])
            value = FIRST_VALUE + n
            await self._op("config", MOVES_TOPIC, value, IncrementalAlterConfigsRequest(resources=[
                AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=MOVES_TOPIC, configs=[
                    AlterableConfig(name=TOPIC_CONFIG, config_operation=0, value=str(value))])]))
            target = await self._next_move() if self.moves else None
            if target is not None:
                await self._op("reassign", MOVES_TOPIC, target, AlterPartitionReassignmentsRequest(
                    timeout_ms=int(self.timeout_s * 1000) - 1000, topics=[ReassignableTopic(
                        name=MOVES_TOPIC, partitions=[ReassignablePartition(partition_index=0, replicas=list(target))])]))
            if len(live) > LIVE_TOPICS:
                victim = live.pop(0)  # by name, whichever version the broker takes
                await self._op("delete", victim, None, DeleteTopicsRequest(
                    topics=[DeleteTopicState(name=victim)], topic_names=[victim],
                    timeout_ms=int(self.timeout_s * 1000) - 1000))

    async def _next_move(self) -> tuple[int, ...] | None:
        """The next target for ``moves-0``: the first of :data:`MOVES_TARGETS` that is neither
        its current target (:func:`moves_state`) nor the last target acknowledged, so that
        every acknowledged move changes the partition and commits a record; None while a move
        is in progress or the broker does not answer. A reassignment sent while another is in
        progress replaces it and is stuck, so the admin moves one at a time, as the
        reassignment tool's ``--verify`` has an operator do; but a deposed controller can still
        answer that no move is in progress, so a stuck move can happen, and the next move,
        sent then, completes it."""
        try:
            state = await moves_state(*self.addresses[self._target], self.timeout_s)
        except Exception:  # asked again next time  # noqa: BLE001
            self._target = next(self._brokers)
            return None
        if state.in_progress and not state.stuck:
            return None
        current = state.target
        last = next((tuple(op.value) for op in reversed(self.ops) if op.kind == "reassign" and op.outcome == "ok"), None)
        return next(t for t in MOVES_TARGETS if t not in (current, last))

    async def _op(self, kind: str, topic: str, value: Any, request: Any) -> AdminOp:
        op = AdminOp(kind, topic, value, self._target, time.monotonic())
        self.ops.append(op)
        await self._send(op, request)
        op.completed_s = time.monotonic()
        if op.outcome != "ok":
            self._target = next(self._brokers)
        await trio.sleep(self.interval_s)
        return op

    async def _send(self, op: AdminOp, request: Any) -> None:
        host, port = self.addresses[op.broker]
        outcome, op.detail, response = await send_once(host, port, request, self.timeout_s, "kwire-admin-history")
        if response is None:
            op.outcome = outcome
            return
        errors = _error_codes(response)
        if errors and all(e == Errors.NONE for e in errors):
            op.outcome = "ok"
        else:
            op.outcome, op.detail = "unknown", f"error codes {errors}"

    def _describe_until_listed(self, topic: str, partitions: int) -> float | None:
        """Seconds until a fresh kafka-python admin client's ``describe_topics`` lists
        ``partitions`` partitions of ``topic`` (None: not within ``probe_s``). Blocks this
        thread's trio loop, which runs nothing else meanwhile."""
        from kafka.admin import KafkaAdminClient

        # a stopped broker would make the probe time a client's timeouts, not the metadata
        bootstrap = ",".join(f"{h}:{p}" for i, (h, p) in self.addresses.items() if i not in self.paused)
        started = time.monotonic()
        while time.monotonic() - started < self.probe_s:  # to the end, even when stopped meanwhile
            try:
                admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-new-user",
                                         request_timeout_ms=5000)
                try:
                    [described] = admin.describe_topics([topic])
                finally:
                    admin.close()
                if len(described.get("partitions") or []) == partitions:
                    return round(time.monotonic() - started, 2)
            except Exception:  # a paused or restarting broker: ask again  # noqa: BLE001
                pass
            time.sleep(0.2)  # poll interval
        return None


def _error_codes(response: Any) -> list[int]:
    """Every error code in an admin response: the request's own (when it has one) and each
    resource's, topic's or partition's."""
    codes = [response.error_code] if hasattr(response, "error_code") else []
    for name in ("topics", "responses"):
        for item in getattr(response, name, None) or []:
            if hasattr(item, "error_code"):
                codes.append(item.error_code)
            codes += [p.error_code for p in getattr(item, "partitions", None) or []]
    return codes


async def _request(host: str, port: int, request: Any, timeout_s: float = 10.0) -> Any:
    with trio.fail_after(timeout_s):
        async with await open_connection(host, port, "kwire-cluster-faults",
                                         request_timeout_ms=int(timeout_s * 1000)) as connection:
            return await connection.request(request)


def create_topic(host: str, port: int, name: str, partitions: int, replication_factor: int,
                 configs: Mapping[str, str] | None = None) -> None:
    """Create a topic through the broker at ``host:port`` (run on the client host); raises
    RuntimeError with the error code when the broker refuses."""
    response = trio.run(_request, host, port, CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication_factor,
                               configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=10_000))
    codes = _error_codes(response)
    if any(codes):
        raise RuntimeError(f"CreateTopics {name}: error codes {codes}")


def broker_topics(host: str, port: int) -> set[str]:
    """The topics the broker at ``host:port`` lists (Metadata of all topics), internal ones
    (``__``) left out."""
    response = trio.run(_request, host, port, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return {t.name for t in response.topics if t.name and not t.name.startswith("__")}


@dataclass(frozen=True)
class MovesState:
    """``moves-0`` as asked through one broker: ``target`` (its replicas less those being
    removed; None when the broker does not list the partition), whether a move is in progress
    (an error answer counts as one), whether that move is ``stuck``, and how many replicas the
    broker lists."""

    target: tuple[int, ...] | None
    in_progress: bool
    stuck: bool
    listed: int


async def moves_state(host: str, port: int, timeout_s: float = 10.0) -> MovesState:
    """``moves-0``'s state: ListPartitionReassignments (which the broker forwards to the
    controller), then the broker's Metadata. A move is ``stuck`` when every replica it adds is
    also being removed: a move that replaced one in progress, which Kafka's controller
    completes only once another move or a cancel comes (``ReplicationControlManager
    .changePartitionReassignment`` keeps the first move's adding replicas); its target is
    still its replicas less the removing ones."""
    ongoing = await _request(host, port, ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None), timeout_s)
    metadata = await _request(host, port, MetadataRequest(
        topics=[MetadataRequestTopic(name=MOVES_TOPIC)], allow_auto_topic_creation=False), timeout_s)
    listed = next((tuple(p.replica_nodes) for t in metadata.topics if t.name == MOVES_TOPIC
                   for p in t.partitions if p.partition_index == 0), None)
    move = next((p for t in ongoing.topics if t.name == MOVES_TOPIC for p in t.partitions if p.partition_index == 0),
                None)
    if ongoing.error_code != Errors.NONE:
        return MovesState(listed, True, False, len(listed or ()))
    if move is None:
        return MovesState(listed, bool(ongoing.topics), False, len(listed or ()))
    target = tuple(r for r in move.replicas if r not in move.removing_replicas)
    stuck = bool(move.adding_replicas) and set(move.adding_replicas) <= set(move.removing_replicas)
    return MovesState(target, True, stuck, len(listed or ()))


def start_brokers(kafka: KafkaRelease, root: Path, network: Network, bootstrap_controllers: str,
                  quorum_voters: str | None) -> StockBrokers:
    """Format and start :data:`BROKER_IDS` of ``kafka``'s release on host ``brokers`` of
    ``network``; returns once each lists all three (as asked from host ``client``)."""
    brokers = StockBrokers.create(
        root / "brokers", kafka.version, cluster_id=CLUSTER_ID, bootstrap_controllers=bootstrap_controllers,
        ports=BROKER_PORTS, host=network.address("brokers"), quorum_voters=quorum_voters,
        prefix=network.command("brokers", []),
    )
    with brokers.starting():  # a broker that does not come up: all three stopped
        network.call("client", lambda: brokers.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S, exited_fails=True))
    return brokers


@dataclass
class ClusterLoad:
    """The two clients of a run and what they recorded."""

    admin: AdminWorkload
    load: Load
    thread: threading.Thread

    def stop(self) -> None:
        self.admin.stop()
        self.thread.join(timeout=60)
        self.load.stop()


def start_load(brokers: StockBrokers, network: Network, paused: set[int], moves: bool = True) -> ClusterLoad:
    """Create the run's topics and start both clients on host ``client``; returns once the
    admin has had a request of each kind but ``delete`` acknowledged. ``paused`` is the set
    of brokers a nemesis has stopped, which the admin's describe probe leaves out; without
    ``moves`` the admin reassigns nothing."""
    host = brokers.host
    first = brokers.nodes[BROKER_IDS[0]].port
    network.call("client", lambda: create_topic(host, first, DATA_TOPIC, 3, 3, {"min.insync.replicas": "2"}))
    network.call("client", lambda: create_topic(host, first, MOVES_TOPIC, 1, 2))
    admin = AdminWorkload({i: (host, n.port) for i, n in brokers.nodes.items()}, paused=paused, moves=moves)
    load = network.call("client", lambda: Load(brokers.bootstrap_servers, DATA_TOPIC, RECORDS_PER_S))
    network.call("client", load.start)  # its thread, and the producer's, are the client host's
    thread = threading.Thread(target=network.call, args=("client", admin.run), daemon=True)
    thread.start()
    # the rounds start once requests of every kind have been acknowledged: the admin is under way
    wait_until("the admin's first requests acknowledged",
               lambda: {op.kind for op in admin.ops if op.outcome == "ok"} >= {"create", "config"} | (
                   {"reassign"} if moves else set()),
               SETTLE_S, alive=[n.process for n in brokers.nodes.values() if n.process is not None])
    return ClusterLoad(admin, load, thread)


def settle_and_check(brokers: StockBrokers, network: Network, clients: ClusterLoad,
                     events: Mapping[int, Sequence[Event]]) -> ClusterVerdict:
    """After the rounds and :meth:`ClusterLoad.stop`: wait (within :data:`SETTLE_S`) until every
    broker runs and lists all three, no reassignment is in progress and every broker lists the
    committed log's live topics; read :data:`DATA_TOPIC` back; check (:func:`check_cluster`)."""
    host = brokers.host
    network.call("client", lambda: brokers.wait_listed(set(BROKER_IDS), SETTLE_S))
    ports = {i: n.port for i, n in brokers.nodes.items()}
    live = live_topics(events[min(events)])

    def views() -> dict[int, set[str]]:
        return network.call("client", lambda: {i: broker_topics(host, p) for i, p in ports.items()})

    try:
        topics = wait_until("every broker to list the live topics", views, SETTLE_S,
                            ok=lambda v: all(t == live for t in v.values()))
    except AssertionError:
        topics = views()

    def moved() -> MovesState:
        return network.call("client", lambda: trio.run(moves_state, host, ports[BROKER_IDS[0]]))

    # the controller may answer that the move is done before the broker's metadata shows it;
    # a stuck move (see moves_state) does not finish by itself, and its target is final
    try:
        state = wait_until("moves-0's reassignment to finish", moved, SETTLE_S,
                           ok=lambda s: s.stuck or (not s.in_progress and s.listed == len(MOVES_TARGETS[0])))
    except AssertionError:
        state = moved()
    acked = list(clients.load.acked)
    back = network.call("client", lambda: read_all(brokers.bootstrap_servers, DATA_TOPIC, len(acked)))
    return check_cluster(clients.admin.ops, events, broker_topics=topics, moves_target=state.target,
                         acked_records=acked, read_back=back)

