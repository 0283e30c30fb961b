"""The "brokers" simulation: simulated brokers and an admin send controller RPCs to the simulated
quorum's leader while leaders crash and the network splits; every node runs the node's own
controller host (``server.controller.host.QuorumController``) beside its core.

The simulation drives each host with the node's own stepping function
(``server.controller.stepping.steps``, as ``server.node.driver`` does): every event the core
takes, and the host's deadline (a Tick that lets it replay its next slice), is one turn of
core and host, in which the host is polled after the core's step and its appends step the core
at once (consecutive ones in one step); the core feeds the host what it commits, the snapshots
it loads and the results of its appends. The simulation writes the host's snapshots to the
in-memory log and routes the host's replies back to the broker or admin that asked. Everything the controller decides (activation, writes applied as they are
appended and the return to the committed image when a leadership is lost with some in flight,
broker sessions and fencing, NoOps, periodic elections, snapshot triggers) is the host's.

Brokers (each with at most one request in flight, resent after :data:`REQUEST_TIMEOUT_MS`)
register until they have an epoch, then heartbeat (reporting the leader's high watermark as
their metadata offset); they crash (stop heartbeating), shut down in a controlled way
(heartbeats asking to shut down until the controller says they may) and come back as new
incarnations. An admin creates and deletes topics, starts and cancels partition
reassignments, and sends the AlterPartitions of partition leaders that shrink and expand their
ISR (which complete reassignments). Half the seeds finalize eligible.leader.replicas.

Checked after every committed batch, on every node whose image holds nothing beyond it (the
active controller applies its writes when it appends them, so its image is checked at the
batches that leave nothing applied ahead):

* the records replay without a fault (the host's ERROR log fails the run);
* a new incarnation's broker epoch is the offset its registration's batch starts at (the
  changes of its predecessor's partitions, then its RegisterBrokerRecord), so broker epochs
  are unique; the same incarnation re-registering keeps its epoch;
* every node that replayed up to the same offset holds the same image (registrations, feature
  levels, topics, partitions, configs and producer ids);
* a node that loads a snapshot holds the image every node held at its offset;
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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kwire.errors import Errors
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
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.metadata import decode_record
from messages.runtime import Message
from server.controller.cluster import ReplayError
from server.controller.controller import ControlManagers
from server.controller.host import ControllerOutbox, ControllerRequest, QuorumController
from server.controller.image import PartitionRegistration, TopicControlInfo
from server.controller.operations import ControllerConfig
from server.controller.stepping import run_steps, steps
from server.raft.events import AppendResult, Event, Outbox, Tick
from server.raft.types import OffsetAndEpoch
from storage.records import RecordBatch
from storage.snapshots import read_snapshot_content
from tests.raft.sim import Cluster, RunStats, SimNode, _linger_ms, _liveness, trace_line

__all__ = ["run_brokers"]

CLUSTER_ID = "sim-cluster"
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 300
REQUEST_TIMEOUT_MS = 1000
"""A broker or the admin sends again when its request got no answer in this time (the node
that had it crashed, or lost it with its leadership)."""
FAULT_ROUNDS = 20
ADMIN_INTERVAL_MS = 400
BALANCE_INTERVAL_MS = 2000
"""``leader.imbalance.check.interval.seconds`` of the simulated controllers, short enough to
run a few times a run."""
SNAPSHOT_BYTES = 2048
"""``metadata.log.max.record.bytes.between.snapshots`` of the seeds that snapshot."""
_BROKER_RECORDS = (
    RegisterBrokerRecord, BrokerRegistrationChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord, UnregisterBrokerRecord,
)


@dataclass
class SimBroker:
    broker_id: int
    incarnation: Uuid
    epoch: int | None = None
    alive: bool = True
    fenced: bool = True
    shutting_down: bool = False
    in_flight: int | None = None
    """The serial of the request waiting for its answer."""
    sent_ms: int = 0


class _FailingLog:
    """The host's log: an ERROR (a committed record that does not replay) fails the run."""

    def __init__(self, cluster: BrokerCluster, node_id: int) -> None:
        self.cluster = cluster
        self.node_id = node_id

    def info(self, msg: str, *args: Any) -> None:
        if "going back to the committed image" in msg:
            self.cluster.reverts += 1

    def error(self, msg: str, *args: Any) -> None:
        self.cluster.fail(f"ReplayFault: node {self.node_id}: {msg % args}")


class BrokerCluster(Cluster):
    """A simulated quorum whose nodes run a controller host each (module docstring)."""

    def __init__(self, seed: int, voters: int, *, metadata_version: int, elr: bool, snapshot_bytes: int, **kwargs: Any) -> None:
        self.metadata_version = metadata_version
        self.bootstrap = [(FeatureLevelRecord(name="metadata.version", feature_level=metadata_version), 0)]
        if elr:
            self.bootstrap.append((FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0))
        self.snapshot_bytes = snapshot_bytes
        self.hosts: dict[int, QuorumController] = {}
        self.host_timers: dict[int, int] = {}
        """node id -> when its host wants to be polled next."""
        self.next_serial = 0
        self.pending: dict[int, tuple[Any, Any]] = {}
        """request serial -> (who asked: a SimBroker or "admin", what the admin remembers)"""
        self.admin_in_flight: int | None = None
        self.admin_sent_ms = 0
        self.image_snapshot_loads = 0
        self.values_before: dict[int, int] = {}
        """offset -> how many data records were committed before it (for the base scenario's
        committed-data check after a snapshot load)."""
        self.images: dict[int, bytes] = {}
        """offset -> digest of the image every node holds once it replayed up to it."""
        self.decoded: dict[bytes, list[Message | None]] = {}
        """Bytes of a committed batch -> its records the checks read, decoded (None for the
        others): decoded once for every node, as the checks only read them."""
        self.partition_reprs: dict[int, tuple[Any, str]] = {}
        """The reprs of the partitions of the images digested (``_image_digest``)."""
        self.registrations: dict[int, dict[int, tuple[Uuid, int]]] = {}
        """node id -> broker id -> (incarnation, epoch) of its latest replayed registration."""
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
        """Partitions AlterPartitionReassignments moved or cancelled."""
        self.reassignments_completed = 0
        """AlterPartition changes that completed a reassignment."""
        self.controlled_shutdowns = 0
        self.leader_moves = 0
        self.speculative_commits = 0
        self.reverts = 0
        """Times a host went back to its committed image."""
        """Batches committed while the active controller's image held records beyond them."""
        """PartitionChangeRecords committed with a broker's fencing, unfencing, shutdown or new incarnation."""
        super().__init__(seed, voters, **kwargs)

    # ------------------------------------------------------------------ driving the hosts

    def host(self, node: SimNode) -> QuorumController:
        """The node's host, new for each incarnation of the node (a restart starts empty)."""
        host = self.hosts.get(node.node_id)
        if host is None or host.raft is not node.core:
            assert node.core is not None
            host = self.hosts[node.node_id] = QuorumController(
                ControllerConfig(
                    node_id=node.node_id,
                    cluster_id=CLUSTER_ID,
                    static_config={},
                    session_timeout_ms=SESSION_TIMEOUT_MS,
                    leader_imbalance_check_interval_ms=BALANCE_INTERVAL_MS,
                    unclean_leader_election_interval_ms=BALANCE_INTERVAL_MS,
                    snapshot_max_bytes=self.snapshot_bytes,
                    snapshot_max_interval_ms=0,
                ),
                bootstrap=self.bootstrap,
                raft=node.core,
                now_ms=self.now,
                rng=random.Random(f"controller/{self.seed}/{node.node_id}/{node.incarnation}"),
                log=_FailingLog(self, node.node_id),
            )
            self.registrations[node.node_id] = {}
            self.host_timers.pop(node.node_id, None)
        return host

    def step(self, node_id: int, event: Event, seen_text: str | None = None) -> None:
        """Every event steps the node's core and host together, as the node's driver does
        (:meth:`turn`); a timer's Tick lets the host replay its next slice."""
        self.turn(self.nodes[node_id], [event], load=isinstance(event, Tick), seen_text=seen_text)

    def turn(self, node: SimNode, events: list[Event], *, load: bool, seen_text: str | None = None) -> None:
        """One turn of the node's core and host (``server.controller.stepping.steps``, the
        driver's own): each core step traced and carried out (its fsync completes later, as a
        scheduled event), each host outbox carried out."""
        core = node.core
        assert core is not None
        stepped: list[Sequence[Event]] = []
        text = [seen_text]  # the delivered message's trace text, for the first step's line only

        def apply(out: Outbox) -> bool:
            self.touched.add(node.node_id)
            texts = self.texts = {}
            self.trace.update(trace_line(self.now, node.node_id, stepped[-1], out, core, text.pop() if text else None,
                                         texts))
            Cluster.apply(self, node, out)
            return False

        run_steps(steps(core, self.host(node), events, lambda: self.now, load=load, on_step=stepped.append),
                  apply, lambda out: self.carry_out(node, out))

    def carry_out(self, node: SimNode, out: ControllerOutbox) -> None:
        for handle, response in out.replies:
            self.on_reply(handle, response)
        if out.snapshot is not None:
            self.write_snapshot(node, out.snapshot.snapshot_id, out.snapshot.build())
        deadline = out.next_deadline_ms
        if deadline is not None and self.host_timers.get(node.node_id) != deadline:
            self.host_timers[node.node_id] = deadline
            incarnation = node.incarnation
            self.schedule(max(deadline, self.now), "call", lambda: self._host_timer(node.node_id, incarnation, deadline))

    def _host_timer(self, node_id: int, incarnation: int, deadline: int) -> None:
        node = self.nodes[node_id]
        if node.running and node.incarnation == incarnation and self.host_timers.get(node_id) == deadline:
            del self.host_timers[node_id]
            self.turn(node, [Tick()], load=True)  # the driver's deadline: a Tick, the host may load

    def write_snapshot(self, node: SimNode, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        core = node.core
        assert core is not None
        if snapshot_id.offset <= node.log.log_start_offset:
            return
        core.view.validate_snapshot_id(snapshot_id)
        node.log.create_snapshot(snapshot_id, data)
        node.log.delete_before_snapshot()
        self.snapshots_taken += 1

    def on_append_result(self, node: SimNode, result: AppendResult) -> None:
        self.host(node).append_result(result)

    def on_load_snapshot(self, node: SimNode, snapshot_id: OffsetAndEpoch) -> None:
        """The node's host starts again from the snapshot's image; it must then hold the image
        every node held at that offset (SnapshotImage). The committed-data check of the base
        scenario goes on from the values committed before the snapshot."""
        size = node.log.snapshot_size(snapshot_id)
        assert size is not None
        records = read_snapshot_content(node.log.read_snapshot(snapshot_id, 0, size)).data_records()
        node.values = list(self.committed_values[: self.values_before[snapshot_id.offset]])
        node.delivered_next = snapshot_id.offset
        host = self.host(node)
        try:
            host.load_snapshot(self.now, snapshot_id, records)
        except ReplayError as exc:
            self.fail(f"ReplayFault: node {node.node_id} loading snapshot {snapshot_id}: {exc}")
        self.registrations[node.node_id] = {
            r.broker_id: (r.incarnation_id, r.epoch) for r in host.controller.cluster.registrations.values()
        }
        self.image_snapshot_loads += 1
        if _image_digest(host.controller, self.partition_reprs) != self.images[snapshot_id.offset]:
            self.fail(f"SnapshotImage: node {node.node_id} loaded snapshot {snapshot_id} into another image")

    def on_committed(self, node: SimNode, batch: Any) -> None:
        super().on_committed(node, batch)
        first_time = batch.last_offset + 1 not in self.images
        if not batch.is_control:
            self._check_records(node, batch, first_time)
        self.values_before.setdefault(batch.last_offset + 1, len(node.values))
        host = self.host(node)
        host.commit(self.now, batch)
        if host.speculating:
            self.speculative_commits += 1
            return  # the active controller's image is ahead of the batch: checked once it is not
        controller = host.controller
        self._check_partitions(node, controller)
        self.topics_ever.update(controller.replication.topic_ids)
        digest = _image_digest(controller, self.partition_reprs)
        known = self.images.setdefault(batch.last_offset + 1, digest)
        if known != digest:
            self.fail(f"SameImage: node {node.node_id} differs from another node at offset {batch.last_offset + 1}")

    # ------------------------------------------------------------------ checks

    def _check_records(self, node: SimNode, batch: Any, first_time: bool) -> None:
        """The broker epochs of the batch's registrations (BrokerEpoch, UniqueBrokerEpoch), and
        the leader moves a batch with broker records made (counted once per batch)."""
        known = self.registrations[node.node_id]
        changes_since = batch.base_offset  # where a run of PartitionChangeRecords began
        messages = self.decoded.get(batch.data)
        if messages is None:
            messages = self.decoded[batch.data] = [
                decode_record(value)[0] if value is not None and len(value) > 2 and value[1] in _KEYS else None
                for value in RecordBatch(batch.data).iter_values()
            ]
        for offset, message in enumerate(messages, batch.base_offset):
            if isinstance(message, RegisterBrokerRecord):
                self._check_registration(node, known.get(message.broker_id), message, (changes_since, offset))
                known[message.broker_id] = (message.incarnation_id, message.broker_epoch)
            elif isinstance(message, UnregisterBrokerRecord):
                known.pop(message.broker_id, None)
            if not isinstance(message, PartitionChangeRecord):
                changes_since = offset + 1
        if first_time and any(isinstance(m, _BROKER_RECORDS) for m in messages):
            self.leader_moves += sum(1 for m in messages if isinstance(m, PartitionChangeRecord))

    def _check_registration(
        self, node: SimNode, previous: tuple[Uuid, int] | None, message: RegisterBrokerRecord, offsets: tuple[int, int]
    ) -> None:
        """``offsets``: from where the run of partition changes just before the record began
        (its own offset when none came before it) to the record's offset."""
        if previous is None or previous[0] != message.incarnation_id:
            first, offset = offsets
            if not first <= message.broker_epoch <= offset:  # the offset the registration's write starts at
                self.fail(f"BrokerEpoch: node {node.node_id}: {message} at offset {offset} (changes from {first})")
        elif message.broker_epoch != previous[1]:
            self.fail(f"BrokerEpoch: node {node.node_id}: the same incarnation moved from {previous[1]}: {message}")
        holder = self.epochs_seen.setdefault((message.broker_id, message.broker_epoch), message.incarnation_id)
        if holder != message.incarnation_id:
            self.fail(f"UniqueBrokerEpoch: epoch {message.broker_epoch} of broker {message.broker_id} given twice")

    def _check_partitions(self, node: SimNode, controller: ControlManagers) -> None:
        reassigning = {(topic_id, index) for topic_id, indexes in controller.replication.reassigning.items() for index in indexes}
        registrations = controller.cluster.registrations
        for topic in controller.replication.topics.values():
            for index, p in topic.partitions.items():
                replicas = set(p.replicas)
                adding, removing = set(p.adding_replicas), set(p.removing_replicas)
                if len(replicas) != len(p.replicas) or not (adding | removing) <= replicas:
                    self.fail(f"Reassignment: {_where(node, topic, index)}: replicas {p.replicas}, adding {adding}, removing {removing}")
                if ((topic.topic_id, index) in reassigning) != p.reassigning:
                    self.fail(f"ReassigningIndex: {_where(node, topic, index)}: {p} is {'' if p.reassigning else 'not '}reassigning")
                if p.leader != -1 and p.leader not in p.isr:
                    self.fail(f"LeaderInIsr: {_where(node, topic, index)}: leader {p.leader} not in ISR {p.isr}")
                if not replicas.issuperset(p.isr):
                    self.fail(f"IsrInReplicas: {_where(node, topic, index)}: ISR {p.isr} outside replicas {p.replicas}")
                if p.leader_epoch < 0 or p.partition_epoch < 0:
                    self.fail(f"Epochs: {_where(node, topic, index)}: {p}")
                registration = registrations.get(p.leader)
                if registration is not None and (registration.fenced or registration.in_controlled_shutdown):
                    self.fail(f"ActiveLeader: {_where(node, topic, index)}: leader {p.leader} is fenced or in controlled shutdown")
                holder = self.partition_leaders.setdefault((topic.topic_id, index, p.leader_epoch), p.leader)
                if holder != p.leader:
                    self.fail(f"OneLeaderPerEpoch: {_where(node, topic, index)}: leaders {holder} and {p.leader} in leader epoch {p.leader_epoch}")

    # ------------------------------------------------------------------ clients

    def send(self, asker: Any, body: Message, version: int, memo: Any = None) -> int | None:
        """Deliver ``body`` to the leader's host; the serial its answer will carry, None when
        no node leads."""
        leader = self.leader()
        if leader is None:
            return None
        self.next_serial += 1
        serial = self.next_serial
        self.pending[serial] = (asker, memo)
        node = self.nodes[leader]
        self.host(node).request(self.now, ControllerRequest(serial, body, version, "CONTROLLER", self.now))
        self.turn(node, [], load=False)
        return serial

    def active_image(self) -> ControlManagers | None:
        """The active controller's state, for the admin to pick its next request from."""
        leader = self.leader()
        return None if leader is None else self.host(self.nodes[leader]).active_controller()

    def broker_tick(self, broker: SimBroker) -> None:
        """One request of a live broker without one in flight: a registration until it has an
        epoch, else a heartbeat."""
        if not broker.alive or (broker.in_flight is not None and self.now - broker.sent_ms < REQUEST_TIMEOUT_MS):
            return
        leader = self.leader()
        if leader is None:
            return
        core = self.nodes[leader].core
        assert core is not None
        self.broker_ops += 1
        body: Message
        if broker.epoch is None:
            features = [
                Feature(name="metadata.version", min_supported_version=1, max_supported_version=self.metadata_version),
                Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
                Feature(name="eligible.leader.replicas.version", min_supported_version=0, max_supported_version=1),
            ]
            body, version = BrokerRegistrationRequest(
                broker_id=broker.broker_id, cluster_id=CLUSTER_ID, incarnation_id=broker.incarnation,
                listeners=[Listener(name="PLAINTEXT", host="broker", port=9092, security_protocol=0)],
                features=features, rack=None, log_dirs=[Uuid.from_longs(broker.broker_id, 7)],
            ), 4
        else:
            body, version = BrokerHeartbeatRequest(
                broker_id=broker.broker_id, broker_epoch=broker.epoch, current_metadata_offset=core.high_watermark - 1,
                want_fence=False, want_shut_down=broker.shutting_down,
            ), 1
        broker.sent_ms = self.now
        broker.in_flight = self.send(broker, body, version, broker.incarnation)

    def admin_tick(self) -> None:
        """One admin or partition-leader request at the active controller: create a topic,
        delete one, move or cancel the move of a partition, or change a partition's ISR from its
        leader."""
        if self.admin_in_flight is not None and self.now - self.admin_sent_ms < REQUEST_TIMEOUT_MS:
            return
        controller = self.active_image()
        if controller is None:
            return
        rng = self.admin_rng
        roll = rng.random()
        image, cluster = controller.replication, controller.cluster
        memo: Any = None
        body: Message
        if roll < 0.4 or not image.topics:
            name = f"t{self.topics_created}"
            self.topics_created += 1
            body, version = CreateTopicsRequest(
                topics=[CreatableTopic(name=name, num_partitions=rng.randint(1, 4), replication_factor=rng.randint(1, 3))]
            ), 7
        elif roll < 0.5:
            body, version = DeleteTopicsRequest(topic_names=[rng.choice(sorted(image.topic_ids))]), 5
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
            body, version = AlterPartitionReassignmentsRequest(topics=[ReassignableTopic(
                name=topic.name, partitions=[ReassignablePartition(partition_index=index, replicas=target)]
            )]), 1
        else:
            # half the time a moving partition's leader takes its new replicas into the ISR as
            # they catch up (which completes the move), else any partition's ISR shrinks or grows
            moving = sorted(
                ((topic_id, index) for topic_id, indexes in image.reassigning.items() for index in indexes),
                key=lambda key: (str(key[0]), key[1]),
            )
            expand = bool(moving) and rng.random() < 0.5
            if expand:
                topic_id, index = rng.choice(moving)
                topic = image.topics[topic_id]
            else:
                topic = image.topics[rng.choice(sorted(image.topics, key=str))]
                index = rng.choice(sorted(topic.partitions))
            p = topic.partitions[index]
            sender = cluster.registrations.get(p.leader)
            if sender is None:
                return
            active = [b for b in p.replicas if b in cluster.registrations and not cluster.registrations[b].fenced]
            isr = [p.leader] if not expand and rng.random() < 0.5 else sorted(set(active) | {p.leader})
            body, version = AlterPartitionRequest(
                broker_id=p.leader, broker_epoch=sender.epoch,
                topics=[AlterTopic(topic_id=topic.topic_id, partitions=[AlterData(
                    partition_index=index, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                    new_isr_with_epochs=[
                        BrokerState(broker_id=b, broker_epoch=cluster.registrations[b].epoch)
                        for b in isr if b in cluster.registrations
                    ],
                )])],
            ), 3
            memo = (topic.topic_id, index, p.reassigning)
        self.admin_sent_ms = self.now
        self.admin_in_flight = self.send("admin", body, version, memo)

    def on_reply(self, serial: int, response: Message) -> None:
        asker, memo = self.pending.pop(serial)
        if isinstance(asker, SimBroker):
            self._broker_reply(asker, serial, memo, response)
            return
        if serial != self.admin_in_flight:
            return
        self.admin_in_flight = None
        name = type(response).__name__
        if name == "AlterPartitionReassignmentsResponse" and response.error_code == Errors.NONE:
            self.reassignments += sum(1 for t in response.responses for p in t.partitions if p.error_code == Errors.NONE)
        elif name == "AlterPartitionResponse" and response.error_code == Errors.NONE:
            changed = [p for t in response.topics for p in t.partitions if p.error_code == Errors.NONE]
            self.isr_changes += len(changed)
            topic_id, index, was_reassigning = memo
            controller = self.active_image()
            topic = None if controller is None else controller.replication.topics.get(topic_id)
            partition = None if topic is None else topic.partitions.get(index)
            if changed and was_reassigning and partition is not None and not partition.reassigning:
                self.reassignments_completed += 1

    def _broker_reply(self, broker: SimBroker, serial: int, incarnation: Uuid, response: Any) -> None:
        if broker.in_flight != serial or broker.incarnation != incarnation or not broker.alive:
            return
        broker.in_flight = None
        error = Errors.of(response.error_code)
        if type(response).__name__ == "BrokerRegistrationResponse":
            if error == Errors.NONE:
                broker.epoch = response.broker_epoch
        elif error == Errors.NONE:
            broker.fenced = response.is_fenced
            if response.should_shut_down:  # the controller let it go: it stops
                broker.alive, broker.shutting_down = False, False
                self.controlled_shutdowns += 1
        elif error != Errors.NOT_CONTROLLER:
            broker.epoch = None  # a stale epoch: register again


_KEYS = frozenset(
    record.API_KEY for record in (*_BROKER_RECORDS, PartitionChangeRecord) if record.API_KEY is not None and record.API_KEY < 0x80
)
"""The api keys of the records the checks decode (one-byte varints in the record frame)."""


def _where(node: SimNode, topic: TopicControlInfo, index: int) -> str:
    """A partition of a node's image, as a failure names it."""
    return f"node {node.node_id}, {topic.name}-{index}"


# _image_digest takes a partition's repr from its cache: a partition never changes (a change
# replaces it), and its fields are ints and tuples of ints and Uuids.
assert issubclass(PartitionRegistration, tuple)


def _image_digest(controller: ControlManagers, reprs: dict[int, tuple[Any, str]]) -> bytes:
    """The digest of the image's text: the same text for the same image. ``reprs`` caches
    the reprs of partitions by identity (it holds each partition, so no other object takes
    its id)."""
    registrations = sorted(
        (r.broker_id, r.epoch, str(r.incarnation_id), r.fenced, r.in_controlled_shutdown, r.log_dirs)
        for r in controller.cluster.registrations.values()
    )
    features = sorted(controller.feature_levels.items())
    image = controller.replication

    def partitions(topic: TopicControlInfo) -> str:
        rows = []
        for index, partition in sorted(topic.partitions.items()):
            cached = reprs.get(id(partition))
            if cached is None or cached[0] is not partition:
                cached = reprs[id(partition)] = (partition, repr(partition))
            rows.append(f"({index!r}, {cached[1]})")
        return ", ".join(rows)

    # the repr of the sorted list of (name, topic id text, [(index, partition), ...]), made
    # row by row: names are unique in an image, so the rows sort by (name, id) alone
    topics = ", ".join(
        f"({name!r}, {topic_id!r}, [{partitions(t)}])"
        for name, topic_id, t in sorted((t.name, str(t.topic_id), t) for t in image.topics.values())
    )
    configs = sorted((key, sorted(values.items())) for key, values in image.configs.items())
    controllers = sorted(controller.controllers.items())
    producer_ids = (image.producer_ids_replayed, image.next_producer_id)
    text = f"({registrations!r}, {features!r}, [{topics}], {configs!r}, {controllers!r}, {producer_ids!r})"
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def run_brokers(seed: int, rng: random.Random) -> RunStats:
    """The scenario (module docstring): 3 or 5 voters, three brokers, 20 rounds of faults, then
    every broker must be registered and unfenced within 10 s of healing."""
    from server.raft.types import QuorumConfig

    elr = rng.random() < 0.5
    cluster = BrokerCluster(
        seed,
        rng.choice((3, 3, 5)),
        metadata_version=26 if elr else 21,  # 4.1-IV1 with eligible leader replicas, else 3.9-IV0
        elr=elr,
        snapshot_bytes=rng.choice((1 << 40, 1 << 40, SNAPSHOT_BYTES)),
        observers=rng.choice((0, 1)),
        config=QuorumConfig(pre_vote=rng.random() < 0.8, append_linger_ms=_linger_ms(seed)),
        kraft_version=rng.choice((0, 1)),
        drop_rate=rng.choice((0.0, 0.01, 0.05)),
    )
    brokers = [SimBroker(100 + i, Uuid.from_longs(seed & 0xFFFF, 100 + i)) for i in range(3)]

    def every(period_ms: int, action: Any) -> None:
        def tick() -> None:
            action()
            cluster.schedule(cluster.now + period_ms, "call", tick)

        cluster.schedule(cluster.now + rng.randint(1, period_ms), "call", tick)

    def restart_broker(broker: SimBroker) -> None:
        broker.alive, broker.epoch, broker.shutting_down, broker.in_flight = True, None, False, None
        broker.incarnation = Uuid.from_longs(rng.getrandbits(32), broker.broker_id)

    for broker in brokers:
        every(HEARTBEAT_INTERVAL_MS, lambda broker=broker: cluster.broker_tick(broker))
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
                    restart_broker(broker)
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
            restart_broker(broker)
    deadline = cluster.now + 10_000 + SESSION_TIMEOUT_MS
    while True:
        controller = cluster.active_image()
        images = {} if controller is None else controller.cluster.registrations
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
        image_snapshot_loads=cluster.image_snapshot_loads, speculative_commits=cluster.speculative_commits,
        reverts=cluster.reverts,
    )
