"""Topics, partitions, configs and producer ids as the committed records leave them (the image
parts of Kafka's ``ReplicationControlManager``, ``ConfigurationControlManager`` and
``ProducerIdControlManager``; KIP-631).

Every node replays TopicRecord, PartitionRecord, PartitionChangeRecord, RemoveTopicRecord,
ConfigRecord and ProducerIdsRecord into one :class:`ReplicationControlManager`, so a kwire controller
that takes over from a stock one (or starts from a snapshot) holds the same topics. A change
to a partition is merged as ``PartitionRegistration.merge`` does: each field the record sets
replaces the old one, a set leader bumps the leader epoch, and every change bumps the
partition epoch. No I/O, no clock.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from struct import Struct
from struct import error as StructError

from kwire.errors import Errors
from kwire.uuid import Uuid
from kwire.uuid import intern_uuid as _intern_uuid
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
from server.controller.partition_registration import (
    MIGRATING_DIRECTORY,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PartitionRegistration,
)

__all__ = [
    "BROKER_RESOURCE",
    "DIRECTORY_ASSIGNMENT_LEVEL",
    "ELR_LEVEL",
    "LOST_DIRECTORY",
    "MAX_TOPIC_NAME_LENGTH",
    "MIGRATING_DIRECTORY",
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "PRODUCER_ID_BLOCK_SIZE",
    "UNASSIGNED_DIRECTORY",
    "PartitionRegistration",
    "ReplicationControlManager",
    "TopicControlInfo",
    "imbalanced",
    "invalid_topic_name",
    "topic_collision_key",
]


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


@dataclass(slots=True)
class TopicControlInfo:
    """A topic: its name, id, partitions by index, and ``ordinal``, its place in the order
    topics were created in (:class:`ReplicationControlManager` lists partitions in that order)."""

    name: str
    topic_id: Uuid
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    ordinal: int = 0


_PARTITION_HEAD = Struct(">i16sB").unpack_from
"""PartitionRecord's PartitionId, TopicId and the compact length of its Replicas."""
_PARTITION_EPOCHS = Struct(">iiiB").unpack_from
"""Its Leader, LeaderEpoch, PartitionEpoch, and the byte after them: the compact length of
the Directories (versions 1+), or the count of tagged fields (version 0)."""
_INT8 = Struct(">b").unpack_from
_INT32S = [Struct(f">{n}i").unpack_from for n in range(127)]
"""``_INT32S[n]``: n big-endian int32s, the elements of a compact array of fewer than 127."""
_RAW_UUIDS = [Struct("16s" * n).unpack_from for n in range(127)]
"""``_RAW_UUIDS[n]``: n uuids' 16 bytes each."""

_new_tuple = tuple.__new__
"""``_new_tuple(PartitionRegistration, fields)``: the named tuple without its constructor's
Python frame (a named tuple's ``__new__`` does only this)."""

_INDEX_BITS = 32
_INDEX_MASK = (1 << _INDEX_BITS) - 1
_INDEX_BIAS = 1 << (_INDEX_BITS - 1)
"""A partition in the broker indexes is one int: its topic's ordinal above, its index below,
biased by 2^31 so that keys sort as the signed int32 indexes do (a negative index is an
invalid record, replayed as it came)."""


class ReplicationControlManager:
    """Topics (by id and by name), resource configs and the next producer id, with the indexes
    a broker's fencing, unfencing and shutdown look partitions up in (Kafka's ``BrokersToIsrs``
    and ``BrokersToElrs``): the partitions whose ISR or ELR holds a broker, the partitions a
    broker leads, and the partitions without a leader; and the partitions not led by their
    preferred replica, which the leader rebalance looks at (Kafka's
    ``ReplicationControlManager.imbalancedPartitions``). Each costs the partitions it returns,
    not a walk of the whole image."""

    def __init__(self) -> None:
        self.topics: dict[Uuid, TopicControlInfo] = {}
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
        self.partition_count = 0
        """Partitions of all topics."""
        self._next_ordinal = 0
        self._topic_ordinals: dict[int, Uuid] = {}
        """Topic ordinal -> topic id."""
        self._in_isr: dict[int, array[int]] = {}
        """Broker id -> the partitions whose ISR holds it, as sorted keys (:func:`_key`): 8
        bytes a partition and replica, in the order :meth:`partitions_where` lists them."""
        self._in_elr: dict[int, array[int]] = {}
        """Broker id -> the partitions whose eligible leader replicas hold it, likewise."""
        self._leaderless: array[int] = array("q")
        """The partitions without a leader, likewise."""
        self._leaderships: dict[int, int] = {}
        """Broker id -> how many partitions it leads (absent: none)."""
        self._imbalanced: set[int] = set()
        """The partitions not led by their first replica (:func:`imbalanced`), as keys: a set,
        since a zonal outage moves the leadership of a third of all partitions at once, and a
        sorted array would move its tail for each."""
        self._ints: dict[int, int] = {}
        """Broker id -> the one int object the image holds it as."""

    def replay(self, message: Message) -> None:
        """Replay a committed topic, partition, config or producer-id record. Raises
        :class:`ReplayError` for a partition of an unknown topic, or a change of an unknown
        partition."""
        if isinstance(message, PartitionRecord):
            topic = self._topic(message.topic_id, message)
            index = message.partition_id
            self._put(topic, index, topic.partitions.get(index), PartitionRegistration.from_record(message, self._ints))
        elif isinstance(message, PartitionChangeRecord):
            topic = self._topic(message.topic_id, message)
            index = message.partition_id
            current = topic.partitions.get(index)
            if current is None:
                raise ReplayError(f"Unable to replay {message}: no partition {index}")
            self._put(topic, index, current, current.merge(message, self._ints))
        elif isinstance(message, TopicRecord):
            previous = self.topics.get(message.topic_id)
            if previous is not None:  # the same topic again: it starts without partitions
                for index, partition in list(previous.partitions.items()):
                    self._put(previous, index, partition, None)
                ordinal = previous.ordinal
            else:
                ordinal = self._next_ordinal
                self._next_ordinal += 1
                self._topic_ordinals[ordinal] = message.topic_id
            self.topics[message.topic_id] = TopicControlInfo(message.name, message.topic_id, ordinal=ordinal)
            self.topic_ids[message.name] = message.topic_id
            collision = topic_collision_key(message.name)
            if collision is not None:
                self.colliding.setdefault(collision, set()).add(message.name)
        elif isinstance(message, RemoveTopicRecord):
            removed = self.topics.get(message.topic_id)
            if removed is None:
                raise ReplayError(f"Unable to replay {message}: no topic with that id")
            for index, partition in list(removed.partitions.items()):
                self._put(removed, index, partition, None)
            del self.topics[message.topic_id]
            del self._topic_ordinals[removed.ordinal]
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

    def replay_partition_value(self, value: bytes) -> bool:
        """Replay the framed PartitionRecord ``value`` (frame version 1, api key 3) without
        decoding it into a message, when it is in the form nearly every one takes: versions
        0-2, fewer than 127 replicas, no reassignment, directories absent or one per replica,
        and no tagged fields but LeaderRecoveryState, EligibleLeaderReplicas and LastKnownElr,
        each in order and at most once. The image is then as :meth:`replay` of the decoded
        record leaves it. Returns False, the image unchanged, for any other value, a
        malformed or truncated one among them, and for a partition of an unknown topic: decode
        it and :meth:`replay` it, which raises the error such a value deserves.

        A snapshot of 10^6 partitions is 10^6 of these; made as a message first, each cost
        five lists and an object more than the partition it creates."""
        try:
            version = value[2]
            if value[0] != 1 or value[1] != 3 or version > 2:
                return False
            index, raw_topic_id, count = _PARTITION_HEAD(value, 3)
            topic = self.topics.get(raw_topic_id)  # a Uuid is its 16 bytes
            count -= 1  # the compact array's length: one more than its elements
            if topic is None or not 0 <= count < 127:
                return False
            pos = 24
            ends = pos + 4 * count
            ints = self._ints
            ids = _INT32S[count](value, pos)
            replicas = tuple(map(ints.setdefault, ids, ids))
            isr_count = value[ends] - 1
            pos = ends + 1
            if isr_count == count and value[24:ends] == value[pos : pos + 4 * count]:
                isr = replicas
            elif 0 <= isr_count < 127:
                ids = _INT32S[isr_count](value, pos)
                isr = tuple(map(ints.setdefault, ids, ids))
            else:
                return False
            pos += 4 * isr_count
            # empty removing and adding replicas: a partition being reassigned takes the long way
            if value[pos] != 1 or value[pos + 1] != 1:
                return False
            leader, leader_epoch, partition_epoch, next_count = _PARTITION_EPOCHS(value, pos + 2)
            pos += 15
            if version == 0:
                directories = (MIGRATING_DIRECTORY,) * count
                tags = next_count
            else:
                directory_count = next_count - 1
                if directory_count == 0:
                    directories = (MIGRATING_DIRECTORY,) * count
                elif directory_count == count:
                    directories = tuple(map(_intern_uuid, _RAW_UUIDS[count](value, pos)))
                    pos += 16 * count
                else:
                    return False
                tags = value[pos]
                pos += 1
            recovery = 0
            elr: tuple[int, ...] = ()
            last_known_elr: tuple[int, ...] = ()
            if tags:
                if tags > 3:
                    return False
                last_tag = -1
                for _ in range(tags):
                    tag, size = value[pos], value[pos + 1]
                    pos += 2
                    ends = pos + size
                    if tag <= last_tag or size >= 0x80 or ends > len(value):
                        return False
                    last_tag = tag
                    if tag == 0:
                        if size != 1:
                            return False
                        recovery = _INT8(value, pos)[0]
                    elif version == 2 and tag in (1, 2):
                        elements = value[pos] - 1  # 0 is null: no replicas either way
                        if not (-1 <= elements < 127 and ends == pos + 1 + 4 * max(elements, 0)):
                            return False
                        if elements > 0:
                            ids = _INT32S[elements](value, pos + 1)
                            found = tuple(map(ints.setdefault, ids, ids))
                            if tag == 1:
                                elr = found
                            else:
                                last_known_elr = found
                    else:
                        return False
                    pos = ends
            if pos != len(value):
                return False
        except (IndexError, StructError):
            return False
        self._put(topic, index, topic.partitions.get(index), _new_tuple(PartitionRegistration, (
            replicas, directories, isr, (), (), leader, recovery, leader_epoch, partition_epoch, elr, last_known_elr,
        )))
        return True

    def _put(
        self, topic: TopicControlInfo, index: int, before: PartitionRegistration | None, after: PartitionRegistration | None
    ) -> None:
        """Make ``after`` partition ``index`` of ``topic`` (None: remove it), ``before`` being
        what the image held, and keep the indexes and :attr:`reassigning` in step."""
        topic_id = topic.topic_id
        if before is None and after is not None:  # a new partition: the common case, made short
            self.partition_count += 1
            topic.partitions[index] = after
            key = _key(topic, index)
            _add(self._in_isr, key, after.isr)
            if after.elr:
                _add(self._in_elr, key, after.elr)
            if after.leader == NO_LEADER:
                _insert(self._leaderless, key)
            else:
                self._leaderships[after.leader] = self._leaderships.get(after.leader, 0) + 1
            if imbalanced(after):
                self._imbalanced.add(key)
            if after.reassigning:
                self.reassigning.setdefault(topic_id, {})[index] = None
            return
        if after is None:
            del topic.partitions[index]
            self.partition_count -= 1
        else:
            topic.partitions[index] = after
        old_isr = () if before is None else before.isr
        new_isr = () if after is None else after.isr
        if old_isr is not new_isr:
            _move(self._in_isr, _key(topic, index), old_isr, new_isr)
        old_elr = () if before is None else before.elr
        new_elr = () if after is None else after.elr
        if old_elr is not new_elr:
            _move(self._in_elr, _key(topic, index), old_elr, new_elr)
        old_leader = None if before is None else before.leader
        new_leader = None if after is None else after.leader
        if old_leader != new_leader:
            leaderships = self._leaderships
            if old_leader == NO_LEADER:
                _remove(self._leaderless, _key(topic, index))
            elif old_leader is not None:
                count = leaderships[old_leader] - 1
                if count:
                    leaderships[old_leader] = count
                else:
                    del leaderships[old_leader]
            if new_leader == NO_LEADER:
                _insert(self._leaderless, _key(topic, index))
            elif new_leader is not None:
                leaderships[new_leader] = leaderships.get(new_leader, 0) + 1
        was_imbalanced = before is not None and imbalanced(before)
        now_imbalanced = after is not None and imbalanced(after)
        if now_imbalanced and not was_imbalanced:
            self._imbalanced.add(_key(topic, index))
        elif was_imbalanced and not now_imbalanced:
            self._imbalanced.discard(_key(topic, index))
        was = before is not None and before.reassigning
        now = after is not None and after.reassigning
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
                    change = PartitionChangeRecord(
                        partition_id=index, topic_id=topic.topic_id, eligible_leader_replicas=[], last_known_elr=[],
                    )
                    self._put(topic, index, partition, partition.merge(change, self._ints))

    def staged(self) -> ReplicationControlManager:
        """A copy of the topics and indexes to replay changes into without touching this image
        (the configs are this image's own)."""
        copy = ReplicationControlManager()
        copy.configs = self.configs
        copy.topic_ids = dict(self.topic_ids)
        copy.topics = {
            topic_id: TopicControlInfo(topic.name, topic_id, dict(topic.partitions), topic.ordinal)
            for topic_id, topic in self.topics.items()
        }
        copy.reassigning = {topic_id: dict(indexes) for topic_id, indexes in self.reassigning.items()}
        copy.partition_count = self.partition_count
        copy._next_ordinal = self._next_ordinal
        copy._topic_ordinals = dict(self._topic_ordinals)
        copy._in_isr = {broker: array("q", keys) for broker, keys in self._in_isr.items()}
        copy._in_elr = {broker: array("q", keys) for broker, keys in self._in_elr.items()}
        copy._leaderless = array("q", self._leaderless)
        copy._leaderships = dict(self._leaderships)
        copy._imbalanced = set(self._imbalanced)
        copy._ints = self._ints
        return copy

    # -- the partitions a broker's state change touches (Kafka's BrokersToIsrs, BrokersToElrs) --

    def partitions_where(self, keep: Callable[[PartitionRegistration], bool]) -> list[tuple[Uuid, int]]:
        """(topic id, partition) of every partition ``keep`` holds for, topics in creation
        order, partitions ascending: a walk of every partition."""
        return [
            (topic.topic_id, index)
            for topic in self.topics.values()
            for index, partition in sorted(topic.partitions.items())
            if keep(partition)
        ]

    def _in_order(self, keys: Sequence[int] | None) -> list[tuple[Uuid, int]]:
        """The partitions of one index, as :meth:`partitions_where` orders them."""
        if not keys:
            return []
        ordinals = self._topic_ordinals
        return [(ordinals[key >> _INDEX_BITS], (key & _INDEX_MASK) - _INDEX_BIAS) for key in keys]

    def partitions_with_broker_in_isr(self, broker_id: int) -> list[tuple[Uuid, int]]:
        """(topic id, partition) of every partition whose ISR holds ``broker_id``, topics in
        creation order, partitions ascending (Kafka iterates a hash map of random topic ids)."""
        return self._in_order(self._in_isr.get(broker_id))

    def partitions_with_broker_in_elr(self, broker_id: int) -> list[tuple[Uuid, int]]:
        """As :meth:`partitions_with_broker_in_isr`, for the eligible leader replicas."""
        return self._in_order(self._in_elr.get(broker_id))

    def partitions_without_leader(self) -> list[tuple[Uuid, int]]:
        """As :meth:`partitions_with_broker_in_isr`, for the partitions with no leader."""
        return self._in_order(self._leaderless)

    def imbalanced_count(self) -> int:
        """How many partitions :meth:`imbalanced_partitions` lists, without listing them."""
        return len(self._imbalanced)

    def imbalanced_partitions(self) -> list[tuple[Uuid, int]]:
        """As :meth:`partitions_with_broker_in_isr`, for the partitions not led by their first
        replica (``imbalancedPartitions``; Kafka iterates a hash set)."""
        return self._in_order(sorted(self._imbalanced))

    def has_leaderships(self, broker_id: int) -> bool:
        """``broker_id`` leads a partition (``BrokersToIsrs.hasLeaderships``)."""
        return broker_id in self._leaderships

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

    def _topic(self, topic_id: Uuid, record: Message) -> TopicControlInfo:
        topic = self.topics.get(topic_id)
        if topic is None:
            raise ReplayError(f"Unable to replay {record}: no topic with that id")
        return topic


def imbalanced(partition: PartitionRegistration) -> bool:
    """Not led by its first replica (``PartitionRegistration.hasPreferredLeader`` false): led
    by another, or by none. A partition without replicas (an invalid record, replayed as it
    came) has no preferred leader to give its leadership back to."""
    return bool(partition.replicas) and partition.leader != partition.replicas[0]


def _key(topic: TopicControlInfo, index: int) -> int:
    """A partition's key in the broker indexes: keys sort as topics were created, then by index."""
    return (topic.ordinal << _INDEX_BITS) | ((index + _INDEX_BIAS) & _INDEX_MASK)


def _move(index: dict[int, array[int]], key: int, old: tuple[int, ...], new: tuple[int, ...]) -> None:
    """The partition ``key`` now under the brokers of ``new`` instead of ``old``."""
    for broker in old:
        if broker not in new:
            keys = index.get(broker)
            if keys is not None:
                _remove(keys, key)
                if not keys:
                    del index[broker]
    _add(index, key, [broker for broker in new if broker not in old] if old else new)


def _add(index: dict[int, array[int]], key: int, brokers: Iterable[int]) -> None:
    """The partition ``key`` now under ``brokers`` too."""
    for broker in brokers:
        keys = index.get(broker)
        if keys is None:
            index[broker] = array("q", (key,))
        elif keys[-1] < key:
            keys.append(key)
        else:
            _insert(keys, key)


def _insert(keys: array[int], key: int) -> None:
    """Add ``key`` to the sorted ``keys`` (at the end, without a search, as a snapshot's
    partitions arrive in order)."""
    if not keys or keys[-1] < key:
        keys.append(key)
        return
    at = bisect_left(keys, key)
    if keys[at] != key:
        keys.insert(at, key)


def _remove(keys: array[int], key: int) -> None:
    """Take ``key`` out of the sorted ``keys``, when there."""
    at = bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        del keys[at]
