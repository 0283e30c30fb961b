"""The "brokers" simulation: simulated brokers register and heartbeat with the simulated quorum's
active controller (``server.controller``) while leaders crash and the network splits.

Every simulated node runs a :class:`~server.controller.controller.QuorumController` beside its
core, fed with what the core commits (a loaded snapshot resets it). The leader's controller is
activated once it has replayed everything before its epoch's start, appends its activation
records (the bootstrap metadata.version), then takes the brokers' requests one at a time, each
after the writes before it committed, as ``server.node.driver`` runs them: BrokerRegistration,
BrokerHeartbeat (the broker reports the leader's high watermark as its metadata offset) and,
every ``session/8`` ms, the expiry check that fences one broker. Brokers crash (they stop
heartbeating), shut down in a controlled way (heartbeats asking to shut down until the
controller says they may) and come back as new incarnations; each fencing, unfencing, controlled
shutdown and new incarnation moves leadership and ISR as Kafka's ``ReplicationControlManager``
does (``server.controller.alter_partition.BrokerPartitionEffects``). An admin creates and deletes topics
(``server.controller.topics``) and starts and cancels partition reassignments
(``server.controller.reassignments``), and partition leaders shrink and expand their ISR
through AlterPartition (``server.controller.alter_partition``), which completes a reassignment
once its new replicas are in sync.

Checked after every committed batch, on every node:

* the records replay without a fault (a change of an unknown broker or epoch fails the run);
* a new incarnation's broker epoch is the offset its registration's batch starts at (the
  changes of its predecessor's partitions, then its RegisterBrokerRecord), so broker epochs
  are unique; the same incarnation re-registering keeps its epoch;
* every node that replayed up to the same offset holds the same image (registrations, feature
  levels, topics, partitions, configs and producer ids);
* a node's snapshot holds its controller's image (``QuorumController.snapshot_records``), and a
  node that loads one holds the image every node held at its offset;
* every partition's leader is in its ISR (or there is none), its ISR is within its replicas,
  its epochs never go back, and no two leaders ever share one leader epoch of a partition;
* a partition's replicas are distinct, its adding and removing replicas are among them, and
  the image's index of reassigning partitions names exactly those with either (the two lists
  may overlap: a move that replaces one in progress and adds nothing keeps the old adding
  replicas, as Kafka's controller does);
* no partition is led by a broker that is fenced or in controlled shutdown.

At the end, with the network healed and every broker back, each broker is registered and
unfenced within a bounded time.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from kwire.uuid import Uuid
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from messages.generated.alter_partition_request import AlterPartitionRequest, BrokerState
from messages.generated.alter_partition_request import PartitionData as AlterData
from messages.generated.alter_partition_request import TopicData as AlterTopic
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.metadata import decode_record, encode_record
from server.controller.alter_partition import (
    BrokerPartitionEffects,
    TopicConfigLayers,
    alter_partition,
)
from server.controller.cluster import ReplayError
from server.controller.controller import QuorumController
from server.controller.errors import ApiError
from server.controller.reassignments import alter_partition_reassignments
from server.controller.topics import TopicDefaults, create_topics, delete_topics
from server.raft.control import voters_record
from server.raft.events import ClientAppend
from server.raft.roles import Leader
from server.raft.types import OffsetAndEpoch
from storage.records import RecordBatch
from storage.snapshots import SnapshotId, build_snapshot_batches, read_snapshot_content
from tests.raft.sim import Cluster, RunStats, SimNode, _linger_ms, _liveness

__all__ = ["run_brokers"]

METADATA_VERSION = 21  # 3.9-IV0
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 300
CLUSTER_ID = "sim-cluster"
FAULT_ROUNDS = 20
ADMIN_INTERVAL_MS = 400


@dataclass
class SimBroker:
    broker_id: int
    incarnation: Uuid
    epoch: int | None = None
    alive: bool = True
    fenced: bool = True
    shutting_down: bool = False


class BrokerCluster(Cluster):
    """A simulated quorum whose nodes run a controller each (module docstring)."""

    def __init__(self, seed: int, voters: int, **kwargs: Any) -> None:
        self.controllers: dict[int, QuorumController] = {}
        self.pending_until: dict[int, int] = {}
        """node id -> last offset of its controller's newest uncommitted write."""
        self.image_snapshot_loads = 0
        self.values_before: dict[int, int] = {}
        """snapshot end offset -> how many data records were committed before it."""
        self.images: dict[int, bytes] = {}
        """offset -> digest of the image every node holds once it replayed up to it."""
        self.epochs_seen: dict[tuple[int, int], Uuid] = {}
        """(broker id, broker epoch) -> the incarnation that registered with it."""
        self.broker_ops = 0
        self.partition_leaders: dict[tuple[Uuid, int, int], int] = {}
        """(topic id, partition, leader epoch) -> the leader any node replayed for it."""
        self.admin_rng = random.Random(f"admin/{seed}")
        self.topics_created = 0
        self.topics_ever: set[str] = set()
        """Names of the topics any node replayed."""
        self.isr_changes = 0
        self.reassignments = 0
        """PartitionChangeRecords AlterPartitionReassignments wrote (moves and cancels)."""
        self.reassignments_completed = 0
        """AlterPartition changes that completed a reassignment."""
        self.controlled_shutdowns = 0
        self.leader_moves = 0
        """PartitionChangeRecords written for a broker's fencing, unfencing or shutdown."""
        super().__init__(seed, voters, **kwargs)

    def _controller(self) -> QuorumController:
        bootstrap = [(FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION), 0)]
        return QuorumController(bootstrap=bootstrap, cluster_id=CLUSTER_ID, session_timeout_ms=SESSION_TIMEOUT_MS)

    def start(self, node_id: int) -> None:
        self.controllers[node_id] = self._controller()
        self.pending_until.pop(node_id, None)
        super().start(node_id)

    def take_snapshot(self, node: SimNode, epoch: int) -> None:
        """The node's controller writes its image (``QuorumController.snapshot_records``), as
        ``server.node.driver`` does; none before metadata.version or inside a transaction."""
        core, controller = node.core, self.controllers[node.node_id]
        assert core is not None
        if controller.metadata_version is None or controller.transaction_open:
            return
        snapshot_id = OffsetAndEpoch(node.delivered_next, epoch)
        core.view.validate_snapshot_id(snapshot_id)
        voters = voters_record(core.voters) if core.kraft_version >= 1 else None
        records = [encode_record(record, version) for record, version in controller.snapshot_records()]
        data = b"".join(
            build_snapshot_batches(
                SnapshotId(snapshot_id.offset, snapshot_id.epoch), last_contained_log_timestamp=self.now,
                records=records, append_time_ms=self.now, kraft_version=core.kraft_version, voters=voters,
            )
        )
        self.values_before[snapshot_id.offset] = len(node.values)
        node.log.create_snapshot(snapshot_id, data)
        node.log.delete_before_snapshot()
        self.snapshots_taken += 1

    def on_load_snapshot(self, node: SimNode, snapshot_id: OffsetAndEpoch) -> None:
        """A fresh controller replays the snapshot's image records; it must then hold the image
        every node held at that offset (SnapshotImage). The committed-data check of the base
        scenario goes on from the values committed before the snapshot."""
        size = node.log.snapshot_size(snapshot_id)
        assert size is not None
        records = read_snapshot_content(node.log.read_snapshot(snapshot_id, 0, size)).data_records()
        node.values = list(self.committed_values[: self.values_before[snapshot_id.offset]])
        node.delivered_next = snapshot_id.offset
        controller = self.controllers[node.node_id] = self._controller()
        try:
            controller.reset(records, snapshot_id.offset - 1)
        except ReplayError as exc:
            self.fail(f"ReplayFault: node {node.node_id} loading snapshot {snapshot_id}: {exc}")
        self.image_snapshot_loads += 1
        if _image_digest(controller) != self.images[snapshot_id.offset]:
            self.fail(f"SnapshotImage: node {node.node_id} loaded snapshot {snapshot_id} into another image")

    def on_committed(self, node: SimNode, batch: Any) -> None:
        super().on_committed(node, batch)
        controller = self.controllers[node.node_id]
        if not batch.is_control:
            partition_changes_since = batch.base_offset  # where a run of PartitionChangeRecords began
            for offset, value in enumerate(RecordBatch(batch.data).iter_values(), batch.base_offset):
                if value is not None and len(value) > 2 and value[1] == RegisterBrokerRecord.API_KEY:
                    self._check_registration(node, controller, value, (partition_changes_since, offset))
                if value is None or len(value) <= 2 or value[1] != PartitionChangeRecord.API_KEY:
                    partition_changes_since = offset + 1
                try:
                    controller.replay(value, offset)
                except ReplayError as exc:
                    self.fail(f"ReplayFault: node {node.node_id} at offset {offset}: {exc}")
        self._check_partitions(node, controller)
        self.topics_ever.update(controller.replication.topic_ids)
        digest = _image_digest(controller)
        known = self.images.setdefault(batch.last_offset + 1, digest)
        if known != digest:
            self.fail(f"SameImage: node {node.node_id} differs from another node at offset {batch.last_offset + 1}")

    def _check_partitions(self, node: SimNode, controller: QuorumController) -> None:
        reassigning = {(topic_id, index) for topic_id, indexes in controller.replication.reassigning.items() for index in indexes}
        for topic in controller.replication.topics.values():
            for index, p in topic.partitions.items():
                where = f"node {node.node_id}, {topic.name}-{index}"
                adding, removing = set(p.adding_replicas), set(p.removing_replicas)
                if len(set(p.replicas)) != len(p.replicas) or not (adding | removing) <= set(p.replicas):
                    self.fail(f"Reassignment: {where}: replicas {p.replicas}, adding {adding}, removing {removing}")
                if ((topic.topic_id, index) in reassigning) != p.reassigning:
                    self.fail(f"ReassigningIndex: {where}: {p} is {'' if p.reassigning else 'not '}reassigning")
                if p.leader != -1 and p.leader not in p.isr:
                    self.fail(f"LeaderInIsr: {where}: leader {p.leader} not in ISR {p.isr}")
                if not set(p.isr) <= set(p.replicas):
                    self.fail(f"IsrInReplicas: {where}: ISR {p.isr} outside replicas {p.replicas}")
                if p.leader_epoch < 0 or p.partition_epoch < 0:
                    self.fail(f"Epochs: {where}: {p}")
                registration = controller.cluster.registrations.get(p.leader)
                if registration is not None and (registration.fenced or registration.in_controlled_shutdown):
                    self.fail(f"ActiveLeader: {where}: leader {p.leader} is fenced or in controlled shutdown")
                holder = self.partition_leaders.setdefault((topic.topic_id, index, p.leader_epoch), p.leader)
                if holder != p.leader:
                    self.fail(f"OneLeaderPerEpoch: {where}: leaders {holder} and {p.leader} in leader epoch {p.leader_epoch}")

    def _check_registration(
        self, node: SimNode, controller: QuorumController, value: bytes, offsets: tuple[int, int]
    ) -> None:
        """``offsets``: from where the run of partition changes just before the record began
        (its own offset when none came before it) to the record's offset."""
        message, _ = decode_record(value)
        if not isinstance(message, RegisterBrokerRecord):
            return
        previous = controller.cluster.registrations.get(message.broker_id)
        if previous is None or previous.incarnation_id != message.incarnation_id:
            first, offset = offsets
            if not first <= message.broker_epoch <= offset:  # the offset the registration's write starts at
                self.fail(f"BrokerEpoch: node {node.node_id}: {message} at offset {offset} (changes from {first})")
        elif message.broker_epoch != previous.epoch:
            self.fail(f"BrokerEpoch: node {node.node_id}: the same incarnation moved from {previous.epoch}: {message}")
        holder = self.epochs_seen.setdefault((message.broker_id, message.broker_epoch), message.incarnation_id)
        if holder != message.incarnation_id:
            self.fail(f"UniqueBrokerEpoch: epoch {message.broker_epoch} of broker {message.broker_id} given twice")

    # ------------------------------------------------------------------ the active controller

    def active(self) -> tuple[int, QuorumController] | None:
        """The leader's controller once it may take requests: activated (its activation
        records appended), and no write of its own uncommitted."""
        leader = self.leader()
        if leader is None:
            return None
        node, controller = self.nodes[leader], self.controllers[leader]
        core = node.core
        assert core is not None and isinstance(core.state, Leader)
        if controller.active_epoch != core.epoch:
            if node.delivered_next < core.state.epoch_start_offset:
                return None
            for other_id, other in self.controllers.items():
                if other_id != leader:
                    other.renounce()
            activation = controller.activate(core.epoch, self.now)
            self.pending_until.pop(leader, None)
            if activation is not None and activation.records:
                self._append(leader, activation.records)
            return None
        if self.pending_until.get(leader, -1) >= node.delivered_next:
            return None
        if controller.metadata_version is None:
            return None
        return leader, controller

    def _append_broker_change(self, node_id: int, records: list[tuple[Any, int]]) -> None:
        self.leader_moves += sum(1 for message, _ in records if isinstance(message, PartitionChangeRecord))
        self._append(node_id, records)

    def _append(self, node_id: int, records: list[tuple[Any, int]]) -> None:
        core = self.nodes[node_id].core
        assert core is not None
        start = core.next_append_offset
        assert start is not None
        token = self.next_token
        self.next_token += 1
        self.pending_until[node_id] = start + len(records) - 1
        self.step(node_id, ClientAppend(token, tuple(encode_record(m, v) for m, v in records), drain_now=True))

    def broker_tick(self, broker: SimBroker) -> None:
        """One request of a live broker: a registration until it has an epoch, else a
        heartbeat (a STALE_BROKER_EPOCH answer sends it back to registering)."""
        found = self.active()
        if found is None or not broker.alive:
            return
        leader, controller = found
        core = self.nodes[leader].core
        assert core is not None and controller.metadata_version is not None
        self.broker_ops += 1
        registered = controller.cluster.registrations.get(broker.broker_id)
        if broker.epoch is None and registered is not None and registered.incarnation_id == broker.incarnation:
            broker.epoch = registered.epoch
        if broker.epoch is None:
            request = BrokerRegistrationRequest(
                broker_id=broker.broker_id, cluster_id=CLUSTER_ID, incarnation_id=broker.incarnation,
                listeners=[Listener(name="PLAINTEXT", host="broker", port=9092, security_protocol=0)],
                features=[Feature(name="metadata.version", min_supported_version=1, max_supported_version=METADATA_VERSION),
                          Feature(name="kraft.version", min_supported_version=0, max_supported_version=1)],
                rack=None, log_dirs=[Uuid.from_longs(broker.broker_id, 7)],
            )
            finalized = {"metadata.version": controller.metadata_version, "kraft.version": core.kraft_version}
            next_offset = core.next_append_offset
            assert next_offset is not None
            try:
                records, _ = controller.cluster.register_broker(
                    request, new_epoch=next_offset, finalized=finalized,
                    metadata_version=controller.metadata_version, now_ms=self.now,
                    partitions=_effects(leader, controller),
                )
            except ApiError:
                return  # e.g. the old incarnation's session is still valid: retried later
            self._append_broker_change(leader, records)
            return
        controller.cluster.track_heartbeat(broker.broker_id, broker.epoch, self.now)
        heartbeat = BrokerHeartbeatRequest(
            broker_id=broker.broker_id, broker_epoch=broker.epoch, current_metadata_offset=core.high_watermark - 1,
            want_fence=False, want_shut_down=broker.shutting_down,
        )
        try:
            records, reply = controller.cluster.process_heartbeat(
                heartbeat, metadata_version=controller.metadata_version, partitions=_effects(leader, controller)
            )
        except ApiError:
            broker.epoch = None  # stale: register again
            return
        broker.fenced = reply.is_fenced
        if reply.should_shut_down:  # the controller let it go: it stops
            broker.alive, broker.shutting_down = False, False
            self.controlled_shutdowns += 1
        if records:
            self._append_broker_change(leader, records)

    def admin_tick(self) -> None:
        """One admin or partition-leader request at the active controller: create a topic,
        delete one, or change a partition's ISR from its leader."""
        found = self.active()
        if found is None:
            return
        leader, controller = found
        assert controller.metadata_version is not None
        rng = self.admin_rng
        roll = rng.random()
        image, cluster = controller.replication, controller.cluster
        if roll < 0.4 or not image.topics:
            name = f"t{self.topics_created}"
            self.topics_created += 1
            request = CreateTopicsRequest(
                topics=[CreatableTopic(name=name, num_partitions=rng.randint(1, 4), replication_factor=rng.randint(1, 3))]
            )
            records, _ = create_topics(
                request, image=image, cluster=cluster, metadata_version=controller.metadata_version,
                elr_enabled=False, defaults=TopicDefaults(1, 1, leader, {}), rng=rng,
                new_topic_id=lambda: Uuid.from_longs(rng.getrandbits(63) | 1, rng.getrandbits(64)),
            )
        elif roll < 0.5:
            names = sorted(image.topic_ids)
            records, _ = delete_topics(DeleteTopicsRequest(topic_names=[rng.choice(names)]), 5, image=image)
        elif roll < 0.65:
            # move a partition to 1-3 registered brokers, or cancel its move
            topic = image.topics[rng.choice(sorted(image.topics, key=str))]
            index = rng.choice(sorted(topic.partitions))
            brokers = sorted(cluster.registrations)
            if not brokers:
                return
            target = None if topic.partitions[index].reassigning and rng.random() < 0.3 else rng.sample(
                brokers, rng.randint(1, min(3, len(brokers)))
            )
            request = AlterPartitionReassignmentsRequest(topics=[ReassignableTopic(
                name=topic.name, partitions=[ReassignablePartition(partition_index=index, replicas=target)]
            )])
            records, _ = alter_partition_reassignments(
                request, 1, image=image, cluster=cluster, configs=TopicConfigLayers(image, leader, {}),
                metadata_version=controller.metadata_version, elr_enabled=False,
            )
            self.reassignments += len(records)
        else:
            topic = image.topics[rng.choice(sorted(image.topics, key=str))]
            index = rng.choice(sorted(topic.partitions))
            p = topic.partitions[index]
            sender = cluster.registrations.get(p.leader)
            if sender is None:
                return
            active = [b for b in p.replicas if b in cluster.registrations and not cluster.registrations[b].fenced]
            isr = [p.leader] if rng.random() < 0.5 else sorted(set(active) | {p.leader})
            request = AlterPartitionRequest(
                broker_id=p.leader, broker_epoch=sender.epoch,
                topics=[AlterTopic(topic_id=topic.topic_id, partitions=[AlterData(
                    partition_index=index, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                    new_isr_with_epochs=[
                        BrokerState(broker_id=b, broker_epoch=cluster.registrations[b].epoch)
                        for b in isr if b in cluster.registrations
                    ],
                )])],
            )
            try:
                records, _ = alter_partition(
                    request, 3, image=image, cluster=cluster, configs=TopicConfigLayers(image, leader, {}),
                    metadata_version=controller.metadata_version, elr_enabled=False,
                )
            except ApiError:
                return
            self.isr_changes += len(records)
            self.reassignments_completed += sum(
                1 for record, _ in records if p.reassigning and not p.merge(record).reassigning
            )
        if records:
            self._append(leader, records)

    def fence_check(self) -> None:
        found = self.active()
        if found is None:
            return
        leader, controller = found
        assert controller.metadata_version is not None
        records = controller.cluster.maybe_fence_stale_broker(
            self.now, metadata_version=controller.metadata_version, partitions=_effects(leader, controller)
        )
        if records:
            self._append_broker_change(leader, records)


def _effects(leader: int, controller: QuorumController) -> BrokerPartitionEffects:
    assert controller.metadata_version is not None
    image = controller.replication
    return BrokerPartitionEffects(
        image, controller.cluster, TopicConfigLayers(image, leader, {}),
        metadata_version=controller.metadata_version, elr_enabled=False,
    )


def _image_digest(controller: QuorumController) -> bytes:
    registrations = sorted(
        (r.broker_id, r.epoch, str(r.incarnation_id), r.fenced, r.in_controlled_shutdown, r.log_dirs)
        for r in controller.cluster.registrations.values()
    )
    features = sorted(controller.feature_levels.items())
    image = controller.replication
    topics = sorted(
        (t.name, str(t.topic_id), sorted(t.partitions.items())) for t in image.topics.values()
    )
    configs = sorted((key, sorted(values.items())) for key, values in image.configs.items())
    controllers = sorted(controller.controllers.items())
    producer_ids = (image.producer_ids_replayed, image.next_producer_id)
    state = (registrations, features, topics, configs, controllers, producer_ids)
    return hashlib.blake2b(repr(state).encode(), digest_size=16).digest()


def run_brokers(seed: int, rng: random.Random) -> RunStats:
    """The scenario (module docstring): 3 or 5 voters, three brokers, 20 rounds of faults, then
    every broker must be registered and unfenced within 10 s of healing."""
    from server.raft.types import QuorumConfig

    cluster = BrokerCluster(
        seed,
        rng.choice((3, 3, 5)),
        observers=rng.choice((0, 1)),
        config=QuorumConfig(pre_vote=rng.random() < 0.8, append_linger_ms=_linger_ms(seed)),
        kraft_version=rng.choice((0, 1)),
        drop_rate=rng.choice((0.0, 0.01, 0.05)),
        snapshot_every=rng.choice((0, 0, 25)),
    )
    brokers = [SimBroker(100 + i, Uuid.from_longs(seed & 0xFFFF, 100 + i)) for i in range(3)]

    def every(period_ms: int, action: Any) -> None:
        def tick() -> None:
            action()
            cluster.schedule(cluster.now + period_ms, "call", tick)

        cluster.schedule(cluster.now + rng.randint(1, period_ms), "call", tick)

    for broker in brokers:
        every(HEARTBEAT_INTERVAL_MS, lambda broker=broker: cluster.broker_tick(broker))
    every(max(1, SESSION_TIMEOUT_MS // 8), cluster.fence_check)
    every(ADMIN_INTERVAL_MS, cluster.admin_tick)
    _liveness(cluster, "start", 3500)
    for _ in range(FAULT_ROUNDS):
        cluster.run_until(cluster.now + rng.randint(300, 1500))
        action = rng.random()
        if action < 0.25:
            leader = cluster.leader()
            if leader is not None:
                cluster.crash(leader)
        elif action < 0.35:
            broker = rng.choice(brokers)
            broker.alive = False  # stops heartbeating; its session expires
        elif action < 0.45:
            rng.choice(brokers).shutting_down = True  # asks to shut down until it may
        elif action < 0.6:
            for broker in brokers:
                if not broker.alive:
                    broker.alive, broker.epoch, broker.shutting_down = True, None, False
                    broker.incarnation = Uuid.from_longs(rng.getrandbits(32), broker.broker_id)
        elif action < 0.75:
            cluster.isolate(rng.choice(list(cluster.nodes)))
        else:
            cluster.heal()
            for node_id in cluster.nodes:
                cluster.restart(node_id)
    cluster.heal()
    cluster.drop_rate = 0.0
    for node_id in cluster.nodes:
        cluster.restart(node_id)
    for broker in brokers:
        if not broker.alive or broker.shutting_down:  # restarted: a new incarnation
            broker.alive, broker.epoch, broker.shutting_down = True, None, False
            broker.incarnation = Uuid.from_longs(rng.getrandbits(32), broker.broker_id)
    deadline = cluster.now + 10_000 + SESSION_TIMEOUT_MS
    while True:
        found = cluster.active()
        images = {} if found is None else found[1].cluster.registrations
        if all(b.broker_id in images and not images[b.broker_id].fenced and b.epoch == images[b.broker_id].epoch
               for b in brokers):
            break
        if cluster.now > deadline:
            cluster.fail(f"BrokersRunning: brokers {[(b.broker_id, b.epoch) for b in brokers]}, image {images}")
        cluster.run_until(cluster.now + 100)
    cluster.check_committed_on_majority()
    return RunStats(
        seed, "brokers", cluster.events, cluster.elections, cluster.committed_end, cluster.now,
        cluster.snapshots_taken, cluster.snapshot_installs, trace_digest=cluster.trace.hexdigest(),
        topics_created=len(cluster.topics_ever), isr_changes=cluster.isr_changes,
        reassignments=cluster.reassignments, reassignments_completed=cluster.reassignments_completed,
        controlled_shutdowns=cluster.controlled_shutdowns, leader_moves=cluster.leader_moves,
        image_snapshot_loads=cluster.image_snapshot_loads,
    )
