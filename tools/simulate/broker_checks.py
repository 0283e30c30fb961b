"""The checks of the "brokers" simulation (``tools.simulate.brokers``, whose docstring lists
them): broker epochs, one image per offset, and every partition's leader, ISR, replicas and
epochs, run on what each node replays."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from kwire.uuid import Uuid
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.metadata import decode_record
from messages.runtime import Message
from server.controller.image import PartitionRegistration, TopicControlInfo
from storage.records import RecordBatch

if TYPE_CHECKING:
    from server.controller.controller import ControlManagers
    from tools.simulate.nodes import SimNode

__all__ = ["BrokerChecks", "image_digest"]

_BROKER_RECORDS = (
    RegisterBrokerRecord, BrokerRegistrationChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord, UnregisterBrokerRecord,
)


class BrokerChecks:
    """The checks part of :class:`~tools.simulate.brokers.BrokerCluster` (a mixin: the state
    it reads is the cluster's)."""

    registrations: dict[int, dict[int, tuple[Uuid, int]]]
    decoded: dict[bytes, list[Message | None]]
    epochs_seen: dict[tuple[int, int], Uuid]
    partition_leaders: dict[tuple[Uuid, int, int], int]
    leader_moves: int

    if TYPE_CHECKING:  # the cluster's own methods, which these parts call

        def fail(self, message: str) -> None: ...

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



_KEYS = frozenset(
    record.API_KEY for record in (*_BROKER_RECORDS, PartitionChangeRecord) if record.API_KEY is not None and record.API_KEY < 0x80
)
"""The api keys of the records the checks decode (one-byte varints in the record frame)."""


def _where(node: SimNode, topic: TopicControlInfo, index: int) -> str:
    """A partition of a node's image, as a failure names it."""
    return f"node {node.node_id}, {topic.name}-{index}"


# image_digest takes a partition's repr from its cache: a partition never changes (a change
# replaces it), and its fields are ints and tuples of ints and Uuids.
assert issubclass(PartitionRegistration, tuple)


def image_digest(controller: ControlManagers, reprs: dict[int, tuple[Any, str]]) -> bytes:
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

