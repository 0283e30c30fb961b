"""The clients of the "brokers" simulation (``tools.simulate.brokers``): simulated brokers that
register and heartbeat, and an admin (with the partition leaders' AlterPartitions) that
creates, deletes and moves partitions, each sending its requests to the active controller's
host and reading its answers."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
from messages.generated.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.runtime import Message
from server.controller.host import ControllerRequest, QuorumController

if TYPE_CHECKING:
    from server.controller.controller import ControlManagers
    from server.raft.events import Event
    from tools.simulate.nodes import SimNode

__all__ = ["CLUSTER_ID", "REQUEST_TIMEOUT_MS", "BrokerClients", "SimBroker"]

CLUSTER_ID = "sim-cluster"
REQUEST_TIMEOUT_MS = 1000
"""A broker or the admin sends again when its request got no answer in this time (the node
that had it crashed, or lost it with its leadership)."""


@dataclass
class SimBroker:
    """A simulated broker: its id, its incarnation, the epoch its registration got (None
    until then), and its one request in flight."""

    broker_id: int
    incarnation: Uuid
    epoch: int | None = None
    alive: bool = True
    fenced: bool = True
    shutting_down: bool = False
    in_flight: int | None = None
    """The serial of the request waiting for its answer."""
    sent_ms: int = 0
    rack: str | None = None
    """``broker.rack`` (None: no rack)."""


class BrokerClients:
    """The clients part of :class:`~tools.simulate.brokers.BrokerCluster` (a mixin: the state
    it reads is the cluster's)."""

    now: int
    nodes: dict[int, SimNode]
    next_serial: int
    pending: dict[int, tuple[Any, Any]]
    broker_ops: int
    metadata_version: int
    admin_in_flight: int | None
    admin_sent_ms: int
    admin_rng: random.Random
    topics_created: int
    reassignments: int
    isr_changes: int
    reassignments_completed: int
    controlled_shutdowns: int

    if TYPE_CHECKING:  # the cluster's own methods, which these parts call

        def leader(self) -> int | None: ...

        def host(self, node: SimNode) -> QuorumController: ...

        def turn(self, node: SimNode, events: list[Event], *, load: bool, seen_text: str | None = None) -> None: ...

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
                features=features, rack=broker.rack, log_dirs=[Uuid.from_longs(broker.broker_id, 7)],
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

    def on_reply(self, serial: int, response: Any) -> None:
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

