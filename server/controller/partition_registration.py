"""One partition as the controller holds it (Kafka's ``PartitionRegistration``): replicas,
ISR, ELR, leader, epochs and directories, read from a PartitionRecord and merged with each
PartitionChangeRecord. No I/O.
"""

from __future__ import annotations

from typing import NamedTuple

from kwire.uuid import Uuid
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.runtime import Message
from server.controller.cluster import ReplayError

__all__ = ["MIGRATING_DIRECTORY", "NO_LEADER", "NO_LEADER_CHANGE", "PartitionRegistration"]

MIGRATING_DIRECTORY = Uuid.from_longs(0, 0)
"""``DirectoryId.MIGRATING``: a replica whose directory is not known (records before v1)."""
NO_LEADER = -1
NO_LEADER_CHANGE = -2
"""PartitionChangeRecord's Leader when the leader stays (``LeaderConstants.NO_LEADER_CHANGE``)."""


class PartitionRegistration(NamedTuple):
    """One partition (``org.apache.kafka.metadata.PartitionRegistration``): broker ids in
    preference order, the in-sync replicas, the leader (-1: none), and the epochs.

    Immutable, and a named tuple rather than a frozen dataclass: a million of them are built
    on a snapshot load, and a tuple is built several times faster. An ISR equal to the
    replicas is the replicas' tuple, and broker ids are the image's own int objects
    (``ReplicationControlManager``), so that a partition costs little more than its fields.
    """

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
    def from_record(cls, record: PartitionRecord, ints: dict[int, int] | None = None) -> PartitionRegistration:
        """The partition a replayed PartitionRecord creates; ``ints`` maps broker ids to the
        int objects to hold them as (:func:`_broker_ids`). Raises ReplayError when its
        Directories are neither empty nor one per replica (``PartitionRegistration``'s check)."""
        replicas = _broker_ids(record.replicas, ints)
        isr = _broker_ids(record.isr, ints, replicas)
        removing, adding = record.removing_replicas, record.adding_replicas
        elr, last_known_elr = record.eligible_leader_replicas, record.last_known_elr
        return cls(
            replicas,
            _directories(record.directories, len(replicas), record),
            isr,
            _broker_ids(removing, ints) if removing else (),
            _broker_ids(adding, ints) if adding else (),
            record.leader,
            record.leader_recovery_state,
            record.leader_epoch,
            record.partition_epoch,
            _broker_ids(elr, ints) if elr else (),
            _broker_ids(last_known_elr, ints) if last_known_elr else (),
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

    def merge(self, record: PartitionChangeRecord, ints: dict[int, int] | None = None) -> PartitionRegistration:
        """This partition after ``record`` (``PartitionRegistration.merge``); ``ints`` as in
        :meth:`from_record`."""
        replicas = self.replicas if record.replicas is None else _broker_ids(record.replicas, ints)
        directories = (
            self.directories if record.directories is None else _directories(record.directories, len(replicas), record)
        )
        if len(directories) != len(replicas):  # new replicas of an unknown directory
            directories = (MIGRATING_DIRECTORY,) * len(replicas)
        if record.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = record.leader, self.leader_epoch + 1
        return PartitionRegistration(
            replicas,
            directories,
            self.isr if record.isr is None else _broker_ids(record.isr, ints, replicas),
            self.removing_replicas if record.removing_replicas is None else _broker_ids(record.removing_replicas, ints),
            self.adding_replicas if record.adding_replicas is None else _broker_ids(record.adding_replicas, ints),
            leader,
            self.leader_recovery_state if record.leader_recovery_state == -1 else record.leader_recovery_state,
            leader_epoch,
            self.partition_epoch + 1,
            self.elr if record.eligible_leader_replicas is None else _broker_ids(record.eligible_leader_replicas, ints),
            self.last_known_elr if record.last_known_elr is None else _broker_ids(record.last_known_elr, ints),
        )


def _broker_ids(ids: list[int] | tuple[int, ...], ints: dict[int, int] | None, like: tuple[int, ...] = ()) -> tuple[int, ...]:
    """``ids`` as a tuple: ``like`` itself when equal to it, else of the int objects ``ints``
    holds for those ids (each id new to ``ints`` is added). A broker id above 256 is otherwise
    a new 28-byte object in every record that names it."""
    if not ids:
        return ()
    if like and len(ids) == len(like):
        as_tuple = tuple(ids)
        if as_tuple == like:
            return like
    if ints is None:
        return tuple(ids)
    return tuple(map(ints.setdefault, ids, ids))


def _directories(directories: list[Uuid], replica_count: int, record: Message) -> tuple[Uuid, ...]:
    if not directories:
        return (MIGRATING_DIRECTORY,) * replica_count
    if len(directories) != replica_count:
        raise ReplayError(f"{record}: {len(directories)} directories for {replica_count} replicas")
    return tuple(directories)
