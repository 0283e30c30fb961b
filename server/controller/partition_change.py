"""One change of one partition, as Kafka 4.4's ``PartitionChangeBuilder`` computes it (KIP-631,
KIP-966 for eligible leader replicas): from a partition and the targets a caller sets (ISR,
replicas, leader recovery state, election kind), the PartitionChangeRecord to write, or None when
nothing would change.

The steps, in Kafka's order:

1. complete a reassignment whose adding replicas are all in the target ISR (and, when it
   shrinks the replica count, all the replicas that stay): the removing ones leave replicas
   and ISR;
2. with eligible leader replicas enabled: when the target ISR is below the topic's effective
   ``min.insync.replicas``, the old ISR members (and old ELR) outside the target ISR become the
   ELR, except replicas that shut down uncleanly; others join the last known ELR; at or above it
   both are emptied;
3. elect a leader: the current one if it stays valid (in the target ISR, or in the ELR when the
   ISR is empty, and acceptable), else the first valid target replica (the preferred one first
   for a PREFERRED election), else the single last known ELR member, else for an UNCLEAN
   election any acceptable replica (the ISR then becomes that replica alone and the leader
   recovery state RECOVERING), else none (-1). A leader taken from the ELR becomes the ISR alone;
4. a leader epoch bump when a reassignment drops replicas, or (before 3.6-IV0) when the ISR
   shrinks;
5. the ISR, ELR, last known ELR, replicas, directories, adding/removing replicas and leader
   recovery state fields that differ from the partition.

Java sets iterate in hash order, which decides the order of the ELR lists; the same order is
computed by ``server.controller.java_order.java_int_set_order``. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from kwire.uuid import Uuid
from messages.generated.partition_change_record import PartitionChangeRecord
from server.controller.image import (
    DIRECTORY_ASSIGNMENT_LEVEL,
    ELR_LEVEL,
    NO_LEADER,
    NO_LEADER_CHANGE,
    UNASSIGNED_DIRECTORY,
    PartitionRegistration,
)
from server.controller.java_order import java_int_set_order

__all__ = [
    "ISR_SHRINK_EPOCH_BUMP_BELOW",
    "RECOVERED",
    "RECOVERING",
    "Election",
    "PartitionChange",
    "partition_change_record_version",
]

RECOVERED, RECOVERING = 0, 1
"""``LeaderRecoveryState`` values."""
ISR_SHRINK_EPOCH_BUMP_BELOW = 12
"""metadata.version 3.6-IV0: below it a shrinking ISR bumps the leader epoch."""


class Election(Enum):
    """How a leader may be chosen (``PartitionChangeBuilder.Election``)."""

    PREFERRED = "PREFERRED"
    ONLINE = "ONLINE"
    UNCLEAN = "UNCLEAN"


def partition_change_record_version(metadata_version: int) -> int:
    """``MetadataVersion.partitionChangeRecordVersion``, which is also its
    ``partitionRecordVersion``: 2 from 4.0-IV1, 1 from 3.7-IV2, else 0."""
    if metadata_version >= ELR_LEVEL:
        return 2
    return 1 if metadata_version >= DIRECTORY_ASSIGNMENT_LEVEL else 0


@dataclass(slots=True)
class PartitionChange:
    """The targets of a change to ``partition`` (topic ``topic_id``, index ``partition_id``).
    ``acceptable_leader(broker)`` says whether a broker may lead (Kafka: registered, unfenced,
    not shutting down); ``default_directory(broker)`` names the directory of a new replica."""

    partition: PartitionRegistration
    topic_id: Uuid
    partition_id: int
    acceptable_leader: Callable[[int], bool]
    metadata_version: int
    min_isr: int
    elr_enabled: bool
    default_directory: Callable[[int], Uuid] = field(default=lambda _broker: UNASSIGNED_DIRECTORY)
    election: Election = Election.ONLINE
    unclean_shutdown_replicas: Sequence[int] | None = None
    use_last_known_leader: bool = True
    target_isr: list[int] = field(init=False)
    target_replicas: list[int] = field(init=False)
    target_removing: list[int] = field(init=False)
    target_adding: list[int] = field(init=False)
    target_elr: list[int] = field(init=False)
    target_last_known_elr: list[int] = field(init=False)
    target_leader_recovery_state: int = field(init=False)
    target_directories: dict[int, Uuid] = field(init=False)

    def __post_init__(self) -> None:
        p = self.partition
        self.target_isr = list(p.isr)
        self.target_replicas = list(p.replicas)
        self.target_removing = list(p.removing_replicas)
        self.target_adding = list(p.adding_replicas)
        self.target_elr = list(p.elr)
        self.target_last_known_elr = list(p.last_known_elr)
        self.target_leader_recovery_state = p.leader_recovery_state
        self.target_directories = dict(zip(p.replicas, p.directories, strict=True))

    # ------------------------------------------------------------------ election

    def _valid_new_leader(self, replica: int) -> bool:
        in_sync = replica in self.target_isr or (not self.target_isr and replica in self.target_elr)
        return in_sync and self.acceptable_leader(replica)

    def _can_elect_last_known_leader(self) -> bool:
        if not self.elr_enabled or not self.use_last_known_leader:
            return False
        if self.target_elr or self.target_isr:
            return False
        last_known = self.partition.last_known_elr
        return len(last_known) == 1 and self.acceptable_leader(last_known[0])

    def _elect(self) -> tuple[int, bool]:
        """(leader, unclean) (``electLeader``)."""
        current = self.partition.leader
        if self.election is Election.PREFERRED:
            preferred = self.target_replicas[0]
            if self._valid_new_leader(preferred):
                return preferred, False
            if self._valid_new_leader(current):
                return current, False
            for replica in self.target_replicas[1:]:
                if self._valid_new_leader(replica):
                    return replica, False
            if self._can_elect_last_known_leader():
                return self.partition.last_known_elr[0], True
            return NO_LEADER, False
        if self._valid_new_leader(current):
            return current, False
        for replica in self.target_replicas:
            if self._valid_new_leader(replica):
                return replica, False
        if self._can_elect_last_known_leader():
            return self.partition.last_known_elr[0], True
        if self.election is Election.UNCLEAN:
            for replica in self.target_replicas:
                if self.acceptable_leader(replica):
                    return replica, True
        return NO_LEADER, False

    def _try_election(self, record: PartitionChangeRecord) -> None:
        leader, unclean = self._elect()
        if leader == self.partition.leader:
            return
        if leader in self.target_elr:
            self.target_isr = [leader]
            self.target_elr = [replica for replica in self.target_elr if replica != leader]
        record.leader = leader
        if unclean:
            record.isr = [leader]
            if self.partition.leader_recovery_state != RECOVERING:
                record.leader_recovery_state = RECOVERING

    # ------------------------------------------------------------------ steps

    def _complete_reassignment(self) -> None:
        """``PartitionReassignmentReplicas.maybeCompleteReassignment``: once every adding
        replica is in the target ISR (and, when the reassignment shrinks the replica count,
        every replica that stays is too), the removing ones leave the replicas and the ISR,
        as long as some in-sync replica is left."""
        if not self.target_removing and not self.target_adding:
            return
        removing = set(self.target_removing)
        isr = [replica for replica in self.target_isr if replica not in removing]
        replicas = [replica for replica in self.target_replicas if replica not in removing]
        if not isr or not replicas:
            return
        if not all(replica in isr for replica in self.target_adding):
            return
        if len(self.target_adding) < len(self.target_removing) and not all(r in isr for r in replicas):
            return
        self.target_isr, self.target_replicas = isr, replicas
        self.target_removing, self.target_adding = [], []

    def _populate_target_elr(self) -> None:
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr, self.target_last_known_elr = [], []
            return
        isr = set(self.target_isr)
        candidates = java_int_set_order([*self.target_elr, *self.partition.isr])
        unclean = set(self.unclean_shutdown_replicas or ())
        self.target_elr = [r for r in candidates if r not in isr and r not in unclean]
        candidates = java_int_set_order([*candidates, *self.target_last_known_elr])
        self.target_last_known_elr = [r for r in candidates if r not in isr and r not in self.target_elr]

    def _update_record_elr(self, record: PartitionChangeRecord) -> None:
        clean_election = record.isr is None
        if not clean_election or not self.elr_enabled:
            self.target_elr, self.target_last_known_elr = [], []
        if self.target_elr != list(self.partition.elr):
            record.eligible_leader_replicas = list(self.target_elr)
        last_known = self.partition.last_known_elr
        if (
            self.use_last_known_leader
            and len(last_known) == 1
            and (record.leader == NO_LEADER or (record.leader == NO_LEADER_CHANGE and self.partition.leader == NO_LEADER))
        ):
            self.target_last_known_elr = list(last_known)
        if not self.use_last_known_leader and self.target_last_known_elr != list(last_known):
            record.last_known_elr = list(self.target_last_known_elr)

    def _update_last_known_leader(self, record: PartitionChangeRecord) -> None:
        if not (self.use_last_known_leader and self.elr_enabled):
            return
        if record.leader == NO_LEADER and not self.partition.last_known_elr:
            record.last_known_elr = [self.partition.leader]
        elif record.leader >= 0 and self.partition.last_known_elr:
            record.last_known_elr = []

    def _set_assignment(self, record: PartitionChangeRecord) -> None:
        p = self.partition
        if self.target_replicas:
            if self.metadata_version >= DIRECTORY_ASSIGNMENT_LEVEL:
                directories = [
                    self.target_directories[r] if r in self.target_directories else self.default_directory(r)
                    for r in self.target_replicas
                ]
                if directories != list(p.directories):
                    record.directories = directories
            if self.target_replicas != list(p.replicas):
                record.replicas = list(self.target_replicas)
        if self.target_removing != list(p.removing_replicas):
            record.removing_replicas = list(self.target_removing)
        if self.target_adding != list(p.adding_replicas):
            record.adding_replicas = list(self.target_adding)

    def build(self) -> PartitionChangeRecord | None:
        """The change record (module docstring), None when it would change nothing. Its
        version is :func:`partition_change_record_version` of the metadata.version."""
        p = self.partition
        record = PartitionChangeRecord(topic_id=self.topic_id, partition_id=self.partition_id)
        self._complete_reassignment()
        self._populate_target_elr()
        self._try_election(record)
        if record.leader == NO_LEADER_CHANGE and any(r not in self.target_replicas for r in p.replicas):
            record.leader = p.leader  # a reassignment dropped replicas
        self._update_record_elr(record)
        if (
            record.isr is None
            and (self.target_isr or self.elr_enabled)
            and self.target_isr != list(p.isr)
        ):
            record.isr = list(self.target_isr)
        if (
            self.metadata_version < ISR_SHRINK_EPOCH_BUMP_BELOW
            and record.leader == NO_LEADER_CHANGE
            and record.isr is not None
            and any(r not in record.isr for r in p.isr)
        ):
            record.leader = p.leader
        self._update_last_known_leader(record)
        self._set_assignment(record)
        if self.target_leader_recovery_state != p.leader_recovery_state:
            record.leader_recovery_state = self.target_leader_recovery_state
        return None if _is_no_op(record) else record


def _is_no_op(record: PartitionChangeRecord) -> bool:
    """``PartitionChangeBuilder.changeRecordIsNoOp``."""
    return (
        record.isr is None
        and record.eligible_leader_replicas is None
        and record.last_known_elr is None
        and record.leader == NO_LEADER_CHANGE
        and record.replicas is None
        and record.removing_replicas is None
        and record.adding_replicas is None
        and record.leader_recovery_state == -1
        and record.directories is None
    )
