"""A fleet of simulated brokers against the node's own controller quorum (``kwire simulate``).

Three controllers (node ids 1-3) run the node's controller host beside its KRaft core, built
from server.properties as ``kwire server-start`` builds them (``server.node.startup``:
``KRaftConfig.from_properties``, ``controller_config`` with the plug-ins loaded, the core's
``QuorumConfig``), so every timer is the node's: ``broker.session.timeout.ms`` (9 s),
``leader.imbalance.check.interval.seconds`` (300 s), ``metadata.max.idle.interval.ms``, the
snapshot triggers, the raft timeouts; ``kwire.replica.placer.class`` names the placer. The
network is the simulation's (1-5 ms a message, no loss) and fsyncs take 0-4 ms.

``brokers`` simulated brokers (ids from :data:`FIRST_BROKER_ID`, rack ``rack-a``, ``rack-b``, ...
in turn) register and heartbeat every ``broker.heartbeat.interval.ms`` (2 s), each with one
request in flight, reporting the leader's high watermark as their metadata offset (they are
caught up). Once every broker is unfenced, ``partitions`` partitions of replication factor 3 are
created in topics of :data:`PARTITIONS_PER_TOPIC`, one CreateTopics at a time. Partition leaders
expand their ISR as Kafka's leaders do (``AlterPartition``, one request per leader with all its
partitions) with each replica that has been alive and unfenced for :data:`CATCH_UP_MS`; a dead
broker's partitions shrink when the controller fences it (session expiry), as in Kafka.

Every ``sample_ms`` of simulated time a sample of the active controller's image is taken
(:class:`Sample`): leaders per broker, offline partitions (no leader), partitions whose leader
is a broker that is in fact down (the controller has not fenced it yet), under-replicated
partitions (ISR smaller than the replicas), leader changes since the last sample, records
committed since the last sample, fenced brokers; and, apart from these, the process CPU time
the controllers' steps took (wall-clock, so not part of the deterministic figures).

What a run does besides is a scenario (``tools.simulate.fleet_scenarios``).
"""

from __future__ import annotations

import functools
import operator
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.alter_partition_request import AlterPartitionRequest, BrokerState
from messages.generated.alter_partition_request import PartitionData as AlterData
from messages.generated.alter_partition_request import TopicData as AlterTopic
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from server.config import KRaftConfig
from server.controller.operation_context import ControllerConfig
from server.controller.partition_registration import PartitionRegistration
from server.node.startup import controller_config
from server.raft.events import Event
from server.raft.types import OffsetAndEpoch
from storage.snapshots import read_snapshot_content
from tools.simulate.broker_clients import CLUSTER_ID, SimBroker
from tools.simulate.brokers import BrokerCluster
from tools.simulate.fleet_spec import (
    FIRST_BROKER_ID,
    VOTERS,
    FleetSpec,
    PlacementFailed,
    Sample,
    node_properties,
    rack_name,
)
from tools.simulate.nodes import SimNode

__all__ = ["CATCH_UP_MS", "PARTITIONS_PER_TOPIC", "FleetCluster"]

PARTITIONS_PER_TOPIC = 1000
CATCH_UP_MS = 5000
"""How long a replica that came back takes to catch up before its leader adds it to the ISR."""
METADATA_VERSION = 26
"""4.1-IV1, the newest level the simulated brokers support."""

_REPLICAS, _ISR, _LEADER = operator.itemgetter(0), operator.itemgetter(2), operator.itemgetter(5)
"""The fields of a ``PartitionRegistration`` (a named tuple) the samples read."""
assert PartitionRegistration._fields[0:6:] == ("replicas", "directories", "isr", "removing_replicas", "adding_replicas", "leader")


class _QuietLog:
    """A fleet host's log: nothing is printed (the figures tell what happened)."""

    def info(self, msg: str, *args: Any) -> None:
        """Dropped."""

    def error(self, msg: str, *args: Any) -> None:
        """Dropped."""


class FleetCluster(BrokerCluster):
    """The quorum and the fleet of one run (module docstring). Raises ConfigError for a
    property or plug-in the node would refuse."""

    tracing = False

    def __init__(self, spec: FleetSpec) -> None:
        self.spec = spec
        self.configs = {i: KRaftConfig.from_properties(node_properties(i, spec.properties)) for i in range(1, VOTERS + 1)}
        first = self.configs[1]
        self.heartbeat_ms = first.broker_heartbeat_interval_ms
        self.fleet_rng = random.Random(f"fleet/{spec.seed}")
        self.brokers = [
            SimBroker(FIRST_BROKER_ID + i, Uuid.from_longs(spec.seed & 0xFFFFFFFF, FIRST_BROKER_ID + i),
                      rack=rack_name(i % spec.racks), alive=False)
            for i in range(spec.brokers)
        ]
        self.by_id = {b.broker_id: b for b in self.brokers}
        self.incarnations = 0
        self.unfenced_since: dict[int, int] = {}
        self.isr_in_flight: dict[int, tuple[int, int]] = {}
        """leader broker id -> (serial, sent at) of its AlterPartition."""
        self.created = 0
        self.create_in_flight: tuple[int, int] | None = None
        self.created_at_ms: int | None = None
        self.all_unfenced_at_ms: int | None = None
        self.failure: PlacementFailed | None = None
        self.samples: list[Sample] = []
        self.events_log: list[tuple[float, str]] = []
        self.previous_leaders: dict[Uuid, list[int]] = {}
        """Topic id -> the leader of each partition at the last sample."""
        self.rejoined: set[int] = set()
        """Brokers started again whose leaders may not have taken them back into every ISR."""
        self.committed_mark = 0
        self.step_cpu_s = 0.0
        self.cpu_mark = 0.0
        self.process_mark = time.process_time()
        super().__init__(
            spec.seed, VOTERS, metadata_version=METADATA_VERSION, elr=False,
            snapshot_bytes=first.metadata_log_max_record_bytes_between_snapshots, config=first.quorum_config(),
        )

    # ------------------------------------------------------------------ the controllers

    def controller_config(self, node: SimNode) -> ControllerConfig:
        """The node's own settings and plug-ins, from its server.properties."""
        return controller_config(self.configs[node.node_id], CLUSTER_ID)

    def host_log(self, node: SimNode) -> Any:
        """Quiet: a run is judged by its figures."""
        return _QuietLog()

    def turn(self, node: SimNode, events: list[Event], *, load: bool, seen_text: str | None = None) -> None:
        """:meth:`BrokerCluster.turn`, its CPU time counted (``thread_time``: the simulation
        runs on one thread)."""
        started = time.thread_time()
        super().turn(node, events, load=load, seen_text=seen_text)
        self.step_cpu_s += time.thread_time() - started

    def on_committed(self, node: SimNode, batch: Any) -> None:
        """Hand the batch to the node's host (the seeded runs' per-batch image checks cost a
        walk of every partition, too much at this size)."""
        node.delivered_next = batch.last_offset + 1
        self.committed_end = max(self.committed_end, batch.last_offset + 1)
        self.host(node).commit(self.now, batch)

    def on_load_snapshot(self, node: SimNode, snapshot_id: OffsetAndEpoch) -> None:
        """The node's host starts again from the snapshot."""
        size = node.log.snapshot_size(snapshot_id)
        assert size is not None
        records = read_snapshot_content(node.log.read_snapshot(snapshot_id, 0, size)).data_records()
        node.delivered_next = snapshot_id.offset
        self.host(node).load_snapshot(self.now, snapshot_id, records)

    # ------------------------------------------------------------------ brokers

    def every(self, period_ms: int, action: Callable[[], None], *, phase_ms: int | None = None) -> None:
        """Run ``action`` every ``period_ms`` from ``phase_ms`` (default: a random point of the
        first period)."""
        def tick() -> None:
            action()
            self.schedule(self.now + period_ms, "call", tick)

        start = self.fleet_rng.randrange(period_ms) if phase_ms is None else phase_ms
        self.schedule(self.now + start, "call", tick)

    def start_broker(self, broker: SimBroker) -> None:
        """The broker starts (again): a new incarnation, which registers."""
        if self.incarnations >= len(self.brokers):
            self.rejoined.add(broker.broker_id)
        self.incarnations += 1
        broker.alive, broker.epoch, broker.shutting_down, broker.in_flight, broker.fenced = True, None, False, None, True
        broker.incarnation = Uuid.from_longs(self.incarnations, broker.broker_id)
        self.unfenced_since.pop(broker.broker_id, None)
        self.isr_in_flight.pop(broker.broker_id, None)

    def stop_broker(self, broker: SimBroker) -> None:
        """The broker dies: it stops heartbeating, and its session expires."""
        broker.alive = False
        self.unfenced_since.pop(broker.broker_id, None)

    def start_fleet(self, *, storm: bool) -> None:
        """Start every broker (at once for a registration storm, else over the first second)
        and their heartbeats, the topic creation and the sampling."""
        for broker in self.brokers:
            at = 0 if storm else self.fleet_rng.randrange(1000)
            self.schedule(self.now + at, "call", functools.partial(self.start_broker, broker))
            self.every(self.heartbeat_ms, functools.partial(self.broker_tick, broker), phase_ms=at + 1)
        self.every(100, self.create_tick, phase_ms=100)
        self.every(self.spec.sample_ms, self.sample, phase_ms=self.spec.sample_ms)

    def _broker_reply(self, broker: SimBroker, serial: int, incarnation: Uuid, response: Any) -> None:
        was_alive = broker.alive
        super()._broker_reply(broker, serial, incarnation, response)
        if broker.alive and not broker.fenced:
            self.unfenced_since.setdefault(broker.broker_id, self.now)
        elif broker.fenced:
            self.unfenced_since.pop(broker.broker_id, None)
        if was_alive and not broker.alive:  # the controller let it shut down
            self.unfenced_since.pop(broker.broker_id, None)
            self.on_shut_down(broker)

    def on_shut_down(self, broker: SimBroker) -> None:
        """A controlled shutdown completed (a scenario may restart the broker)."""

    # ------------------------------------------------------------------ topics and ISRs

    def create_tick(self) -> None:
        """Create the next topic once every broker is unfenced, one CreateTopics at a time."""
        controller = self.active_image()
        if controller is None or self.created >= self.spec.partitions or self.failure is not None:
            return
        if self.create_in_flight is not None and self.now - self.create_in_flight[1] < 5000:
            return
        registrations = controller.cluster.registrations
        unfenced = sum(1 for r in registrations.values() if not r.fenced)
        if self.all_unfenced_at_ms is None:
            if unfenced < len(self.brokers):
                return
            self.all_unfenced_at_ms = self.now
            self.note(f"all {len(self.brokers)} brokers registered and unfenced")
        count = min(PARTITIONS_PER_TOPIC, self.spec.partitions - self.created)
        body = CreateTopicsRequest(topics=[CreatableTopic(
            name=f"t{self.created // PARTITIONS_PER_TOPIC:05d}", num_partitions=count,
            replication_factor=self.spec.replication_factor,
        )])
        self.create_in_flight = (self.next_serial + 1, self.now)  # an answer may come at once
        if self.send(("create", count), body, 7) is None:
            self.create_in_flight = None

    def ready(self, registrations: Mapping[int, Any]) -> set[int]:
        """The brokers unfenced for :data:`CATCH_UP_MS` in this incarnation: caught up."""
        return {b for b, since in self.unfenced_since.items()
                if self.now - since >= CATCH_UP_MS and b in registrations and not registrations[b].fenced}

    def isr_tick(self, controller: Any) -> None:
        """Each live leader adds the replicas that caught up to its partitions' ISRs."""
        registrations = controller.cluster.registrations
        ready = self.ready(registrations)
        candidates = self.rejoined & ready
        if not candidates:
            return
        wanted: dict[int, list[tuple[Any, int, Any]]] = {}
        needed: set[int] = set()
        for topic in controller.replication.topics.values():
            for index, p in topic.partitions.items():
                if len(p.isr) < len(p.replicas):
                    missing = candidates.intersection(p.replicas).difference(p.isr)
                    if missing:
                        needed |= missing
                        if p.leader in ready:
                            wanted.setdefault(p.leader, []).append((topic.topic_id, index, p))
        self.rejoined -= candidates - needed
        for leader, items in sorted(wanted.items()):
            flight = self.isr_in_flight.get(leader)
            if flight is not None and self.now - flight[1] < 5000:
                continue
            topics: dict[Any, list[AlterData]] = {}
            for topic_id, index, p in items:
                isr = [b for b in p.replicas if b in p.isr or b in ready]
                if len(isr) == len(p.isr):
                    continue
                topics.setdefault(topic_id, []).append(AlterData(
                    partition_index=index, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                    new_isr_with_epochs=[BrokerState(broker_id=b, broker_epoch=registrations[b].epoch) for b in isr],
                ))
            if not topics:
                continue
            body = AlterPartitionRequest(
                broker_id=leader, broker_epoch=registrations[leader].epoch,
                topics=[AlterTopic(topic_id=topic_id, partitions=parts) for topic_id, parts in topics.items()],
            )
            self.isr_in_flight[leader] = (self.next_serial + 1, self.now)  # an answer may come at once
            if self.send(("isr", leader), body, 3) is None:
                del self.isr_in_flight[leader]

    def on_reply(self, serial: int, response: Any) -> None:
        """Answers to the creation and the AlterPartitions; the brokers' as before."""
        asker, memo = self.pending.get(serial, (None, None))
        if not (isinstance(asker, tuple) and asker[0] in ("create", "isr")):
            super().on_reply(serial, response)
            return
        del self.pending[serial]
        if asker[0] == "isr":
            if self.isr_in_flight.get(asker[1], (None,))[0] == serial:
                del self.isr_in_flight[asker[1]]
            return
        if self.create_in_flight is None or self.create_in_flight[0] != serial:
            return
        self.create_in_flight = None
        result = response.topics[0]
        error = Errors.of(result.error_code)
        if error == Errors.NONE:
            self.created += asker[1]
            if self.created >= self.spec.partitions:
                self.created_at_ms = self.now
                self.note(f"{self.created} partitions created")
        elif error not in (Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT):
            self.failure = PlacementFailed(f"CreateTopics {result.name}: {error.name}: {result.error_message}")

    # ------------------------------------------------------------------ figures

    def note(self, what: str) -> None:
        """An event of the run, at the current simulated time."""
        self.events_log.append((self.now / 1000, what))

    def sample(self) -> None:
        """Take a :class:`Sample` of the active controller's image (module docstring): one
        pass over each topic's partitions in C (``map`` over the named tuples' fields), as a
        walk in Python costs seconds a sample at 100,000 partitions."""
        controller = self.active_image()
        cpu = self.step_cpu_s - self.cpu_mark
        self.cpu_mark = self.step_cpu_s
        process = time.process_time()
        process_cpu, self.process_mark = process - self.process_mark, process
        records = self.committed_end - self.committed_mark
        self.committed_mark = self.committed_end
        counts: Counter[int] = Counter()
        under = moves = fenced = partitions = 0
        if controller is not None:
            previous = self.previous_leaders
            current: dict[Uuid, list[int]] = {}
            for topic in controller.replication.topics.values():
                parts = list(topic.partitions.values())
                leaders = list(map(_LEADER, parts))
                counts.update(leaders)
                partitions += len(parts)
                under += sum(map(operator.ne, map(len, map(_ISR, parts)), map(len, map(_REPLICAS, parts))))
                before = previous.get(topic.topic_id)
                if before is not None and len(before) == len(leaders):
                    moves += sum(map(operator.ne, before, leaders))
                current[topic.topic_id] = leaders
            self.previous_leaders = current
            fenced = sum(1 for r in controller.cluster.registrations.values() if r.fenced)
            if under:
                self.isr_tick(controller)
            else:  # every ISR is whole: the brokers back and caught up are in them all
                self.rejoined -= self.ready(controller.cluster.registrations)
        dead = sum(counts[b.broker_id] for b in self.brokers if not b.alive)
        self.samples.append(Sample(
            self.now / 1000, [counts[b.broker_id] for b in self.brokers], counts[-1], dead, under, moves, records,
            fenced, sum(1 for b in self.brokers if b.alive), partitions, cpu, process_cpu,
        ))
