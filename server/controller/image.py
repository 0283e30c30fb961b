"""Topics, partitions, configs and producer ids as the committed records leave them (the image
parts of Kafka's ``ReplicationControlManager``, ``ConfigurationControlManager`` and
``ProducerIdControlManager``; KIP-631).

Every node replays TopicRecord, PartitionRecord, PartitionChangeRecord, RemoveTopicRecord,
ConfigRecord and ProducerIdsRecord into one :class:`ReplicationImage`, so a kwire controller
that takes over from a stock one (or starts from a snapshot) holds the same topics. A change
to a partition is merged as ``PartitionRegistration.merge`` does: each field the record sets
replaces the old one, a set leader bumps the leader epoch, and every change bumps the
partition epoch. No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.clear_elr_record import ClearElrRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.producer_ids_record import ProducerIdsRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from messages.runtime import Message
from server.controller.cluster import ReplayError
from server.controller.errors import ApiError

__all__ = [
    "BROKER_RESOURCE",
    "DIRECTORY_ASSIGNMENT_LEVEL",
    "ELR_LEVEL",
    "LOST_DIRECTORY",
    "MAX_TOPIC_NAME_LENGTH",
    "UNASSIGNED_DIRECTORY",
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "PRODUCER_ID_BLOCK_SIZE",
    "PartitionRegistration",
    "ReplicationImage",
    "TopicImage",
    "invalid_topic_name",
    "topic_collision_key",
]

NO_LEADER = -1
NO_LEADER_CHANGE = -2
"""PartitionChangeRecord's Leader when the leader stays (``LeaderConstants.NO_LEADER_CHANGE``)."""
MIGRATING_DIRECTORY = Uuid.from_longs(0, 0)
"""``DirectoryId.MIGRATING``: a replica whose directory is not known (records before v1)."""

PRODUCER_ID_BLOCK_SIZE = 1000
"""Producer ids per AllocateProducerIds answer (``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``)."""
_LAST_BLOCK_START = 2**63 - 1 - PRODUCER_ID_BLOCK_SIZE
"""The highest first id of a block that still ends inside int64."""

MAX_TOPIC_NAME_LENGTH = 249

TOPIC_RESOURCE = 2
"""ConfigRecord's ResourceType of a topic (``ConfigResource.Type.TOPIC``)."""
BROKER_RESOURCE = 4
"""ConfigRecord's ResourceType of a broker (``ConfigResource.Type.BROKER``)."""
UNASSIGNED_DIRECTORY = Uuid.from_longs(0, 1)
"""``DirectoryId.UNASSIGNED``: a replica on a broker with several directories, not yet placed."""
LOST_DIRECTORY = Uuid.from_longs(0, 2)
"""``DirectoryId.LOST``: a replica whose directory went offline."""
DIRECTORY_ASSIGNMENT_LEVEL = 17
"""metadata.version 3.7-IV2: partition records carry directories (KIP-858)."""
ELR_LEVEL = 23
"""metadata.version 4.0-IV1: partition records carry eligible leader replicas (KIP-966)."""


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition (``org.apache.kafka.metadata.PartitionRegistration``): broker ids in
    preference order, the in-sync replicas, the leader (-1: none), and the epochs."""

    replicas: tuple[int, ...]
    directories: tuple[Uuid, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]

    @property
    def reassigning(self) -> bool:
        """A reassignment is in progress: replicas are being added or removed
        (``PartitionReassignmentReplicas.isReassignmentInProgress``)."""
        return bool(self.adding_replicas or self.removing_replicas)

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        """The partition a replayed PartitionRecord creates. Raises ReplayError when its
        Directories are neither empty nor one per replica (``PartitionRegistration``'s check)."""
        replicas = tuple(record.replicas)
        return cls(
            replicas=replicas,
            directories=_directories(record.directories, len(replicas), record),
            isr=tuple(record.isr),
            removing_replicas=tuple(record.removing_replicas),
            adding_replicas=tuple(record.adding_replicas),
            leader=record.leader,
            leader_recovery_state=record.leader_recovery_state,
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            elr=tuple(record.eligible_leader_replicas or ()),
            last_known_elr=tuple(record.last_known_elr or ()),
        )

    def to_record(self, topic_id: Uuid, index: int, *, elr: bool, directories: bool) -> PartitionRecord:
        """The PartitionRecord a snapshot holds for this partition
        (``PartitionRegistration.toRecord``): the directories only when ``directories``
        (metadata.version 3.7-IV2 on), a non-empty ELR and last known ELR only when ``elr``
        (eligible.leader.replicas.version on)."""
        record = PartitionRecord(
            partition_id=index,
            topic_id=topic_id,
            replicas=list(self.replicas),
            isr=list(self.isr),
            removing_replicas=list(self.removing_replicas),
            adding_replicas=list(self.adding_replicas),
            leader=self.leader,
            leader_recovery_state=self.leader_recovery_state,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            directories=list(self.directories) if directories else [],
        )
        if elr:
            record.eligible_leader_replicas = list(self.elr) or None
            record.last_known_elr = list(self.last_known_elr) or None
        return record

    def merge(self, record: PartitionChangeRecord) -> PartitionRegistration:
        """This partition after ``record`` (``PartitionRegistration.merge``)."""
        replicas = self.replicas if record.replicas is None else tuple(record.replicas)
        directories = (
            self.directories if record.directories is None else _directories(record.directories, len(replicas), record)
        )
        if len(directories) != len(replicas):  # new replicas of an unknown directory
            directories = (MIGRATING_DIRECTORY,) * len(replicas)
        if record.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = record.leader, self.leader_epoch + 1
        return replace(
            self,
            replicas=replicas,
            directories=directories,
            isr=self.isr if record.isr is None else tuple(record.isr),
            removing_replicas=self.removing_replicas if record.removing_replicas is None else tuple(record.removing_replicas),
            adding_replicas=self.adding_replicas if record.adding_replicas is None else tuple(record.adding_replicas),
            leader=leader,
            leader_recovery_state=(
                self.leader_recovery_state if record.leader_recovery_state == -1 else record.leader_recovery_state
            ),
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            elr=self.elr if record.eligible_leader_replicas is None else tuple(record.eligible_leader_replicas),
            last_known_elr=self.last_known_elr if record.last_known_elr is None else tuple(record.last_known_elr),
        )


def invalid_topic_name(name: str) -> str | None:
    """Why ``name`` cannot name a topic (``Topic.validate``'s reason, e.g. "'.' is not
    allowed"), None when it can: not empty, not "." or "..", at most 249 characters (UTF-16
    units, as Java counts them), only ASCII letters, digits, '.', '_' and '-'."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name.encode("utf-16-le")) // 2 > MAX_TOPIC_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    if not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def topic_collision_key(name: str) -> str | None:
    """The form two names that collide share (``Topic.unifyCollisionChars``: '.' read as '_'),
    None for a name without '.' or '_', which collides with nothing."""
    if "." not in name and "_" not in name:
        return None
    return name.replace(".", "_")


def _directories(directories: list[Uuid], replica_count: int, record: Message) -> tuple[Uuid, ...]:
    if not directories:
        return (MIGRATING_DIRECTORY,) * replica_count
    if len(directories) != replica_count:
        raise ReplayError(f"{record}: {len(directories)} directories for {replica_count} replicas")
    return tuple(directories)


@dataclass(slots=True)
class TopicImage:
    """A topic: its name, id and partitions by index."""

    name: str
    topic_id: Uuid
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


class ReplicationImage:
    """Topics (by id and by name), resource configs and the next producer id."""

    def __init__(self) -> None:
        self.topics: dict[Uuid, TopicImage] = {}
        self.topic_ids: dict[str, Uuid] = {}
        """Topic name -> id."""
        self.colliding: dict[str, set[str]] = {}
        """:func:`topic_collision_key` -> the topic names that have it."""
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        """(resource type, resource name) -> config name -> value (``ConfigurationImage``)."""
        self.next_producer_id = 0
        """The first producer id not yet handed to a broker (``ProducerIdsImage``)."""
        self.producer_ids_replayed = False
        """A ProducerIdsRecord was replayed (before one, the first block starts at 0)."""
        self.reassigning: dict[Uuid, dict[int, None]] = {}
        """Topic id -> the indexes of its partitions with a reassignment in progress, in the
        order they started (``ReplicationControlManager.reassigningTopics``)."""

    def replay(self, message: Message) -> None:
        """Replay a committed topic, partition, config or producer-id record. Raises
        :class:`ReplayError` for a partition of an unknown topic, or a change of an unknown
        partition."""
        if isinstance(message, TopicRecord):
            self.topics[message.topic_id] = TopicImage(message.name, message.topic_id)
            self.topic_ids[message.name] = message.topic_id
            collision = topic_collision_key(message.name)
            if collision is not None:
                self.colliding.setdefault(collision, set()).add(message.name)
        elif isinstance(message, PartitionRecord):
            topic = self._topic(message.topic_id, message)
            previous = topic.partitions.get(message.partition_id)
            partition = PartitionRegistration.from_record(message)
            topic.partitions[message.partition_id] = partition
            self._track_reassignment(message.topic_id, message.partition_id, previous, partition)
        elif isinstance(message, PartitionChangeRecord):
            topic = self._topic(message.topic_id, message)
            current = topic.partitions.get(message.partition_id)
            if current is None:
                raise ReplayError(f"Unable to replay {message}: no partition {message.partition_id}")
            partition = current.merge(message)
            topic.partitions[message.partition_id] = partition
            self._track_reassignment(message.topic_id, message.partition_id, current, partition)
        elif isinstance(message, RemoveTopicRecord):
            removed = self.topics.pop(message.topic_id, None)
            if removed is None:
                raise ReplayError(f"Unable to replay {message}: no topic with that id")
            self.reassigning.pop(message.topic_id, None)
            del self.topic_ids[removed.name]
            self.configs.pop((TOPIC_RESOURCE, removed.name), None)
            collision = topic_collision_key(removed.name)
            if collision is not None:
                names = self.colliding[collision]
                names.discard(removed.name)
                if not names:
                    del self.colliding[collision]
        elif isinstance(message, ConfigRecord):
            key = (message.resource_type, message.resource_name)
            if message.value is None:
                entries = self.configs.get(key)
                if entries is not None:
                    entries.pop(message.name, None)
                    if not entries:
                        del self.configs[key]
            else:
                self.configs.setdefault(key, {})[message.name] = message.value
        elif isinstance(message, ClearElrRecord):
            self._clear_elr(message)
        elif isinstance(message, ProducerIdsRecord):
            if self.producer_ids_replayed and message.next_producer_id <= self.next_producer_id:
                raise ReplayError(
                    f"Unable to replay {message}: the next producer id is not greater than {self.next_producer_id}"
                )
            self.next_producer_id = message.next_producer_id
            self.producer_ids_replayed = True

    def _track_reassignment(
        self, topic_id: Uuid, index: int, before: PartitionRegistration | None, after: PartitionRegistration
    ) -> None:
        """Keep :attr:`reassigning` in step with one partition's change
        (``updateReassigningTopicsIfNeeded``)."""
        was, now = before is not None and before.reassigning, after.reassigning
        if now and not was:
            self.reassigning.setdefault(topic_id, {})[index] = None
        elif was and not now:
            indexes = self.reassigning.get(topic_id, {})
            indexes.pop(index, None)
            if not indexes:
                self.reassigning.pop(topic_id, None)

    def _clear_elr(self, record: ClearElrRecord) -> None:
        """Empty the eligible leader replicas of one topic (all topics for an empty name); each
        partition that had some is merged with a change that empties them, which bumps its
        partition epoch (``ReplicationControlManager.replay(ClearElrRecord)``)."""
        if record.topic_name:
            topic_id = self.topic_ids.get(record.topic_name)
            if topic_id is None:
                raise ReplayError(f"Unable to find a topic named {record.topic_name} in order to clear its ELRs.")
            topics = [self.topics[topic_id]]
        else:
            topics = list(self.topics.values())
        for topic in topics:
            for index, partition in list(topic.partitions.items()):
                if partition.elr or partition.last_known_elr:
                    topic.partitions[index] = partition.merge(
                        PartitionChangeRecord(
                            partition_id=index,
                            topic_id=topic.topic_id,
                            eligible_leader_replicas=[],
                            last_known_elr=[],
                        )
                    )

    # -- the partitions a broker's state change touches (Kafka's BrokersToIsrs, BrokersToElrs) --

    def partitions_where(self, keep: Callable[[PartitionRegistration], bool]) -> list[tuple[Uuid, int]]:
        """(topic id, partition) of every partition ``keep`` holds for, topics in creation
        order, partitions ascending."""
        return [
            (topic.topic_id, index)
            for topic in self.topics.values()
            for index, partition in sorted(topic.partitions.items())
            if keep(partition)
        ]

    def partitions_with_broker_in_isr(self, broker_id: int) -> list[tuple[Uuid, int]]:
        """(topic id, partition) of every partition whose ISR holds ``broker_id``, topics in
        creation order, partitions ascending (Kafka iterates a hash map of random topic ids)."""
        return self.partitions_where(lambda p: broker_id in p.isr)

    def partitions_with_broker_in_elr(self, broker_id: int) -> list[tuple[Uuid, int]]:
        """As :meth:`partitions_with_broker_in_isr`, for the eligible leader replicas."""
        return self.partitions_where(lambda p: broker_id in p.elr)

    def partitions_without_leader(self) -> list[tuple[Uuid, int]]:
        """As :meth:`partitions_with_broker_in_isr`, for the partitions with no leader."""
        return self.partitions_where(lambda p: p.leader == -1)

    def has_leaderships(self, broker_id: int) -> bool:
        """``broker_id`` leads a partition (``BrokersToIsrs.hasLeaderships``)."""
        return any(p.leader == broker_id for topic in self.topics.values() for p in topic.partitions.values())

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[list[tuple[Message, int]], int]:
        """The next block of :data:`PRODUCER_ID_BLOCK_SIZE` producer ids for a broker
        (``ProducerIdControlManager.generateNextProducerId``): a ProducerIdsRecord moving the
        next id past the block, and the block's first id. The caller checks the broker epoch.
        Raises ApiError UNKNOWN_SERVER_ERROR once the ids are exhausted."""
        start = self.next_producer_id
        if start > _LAST_BLOCK_START:
            raise ApiError(
                Errors.UNKNOWN_SERVER_ERROR,
                "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit",
            )
        record = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)
        return [(record, 0)], start

    def _topic(self, topic_id: Uuid, record: Message) -> TopicImage:
        topic = self.topics.get(topic_id)
        if topic is None:
            raise ReplayError(f"Unable to replay {record}: no topic with that id")
        return topic
