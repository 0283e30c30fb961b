"""Broker registrations and their lifecycle at the controller (Kafka 4.4's
``ClusterControlManager``, ``BrokerHeartbeatManager``, ``BrokerHeartbeatTracker`` and the broker
parts of ``ReplicationControlManager``; KIP-631).

:class:`ClusterControlManager` holds every broker's registration as the committed records left it
(replayed on every node, standby or active) and, on the active controller only, each broker's
session: its last contact per broker epoch, whether it is fenced, the metadata offset it last
reported and its controlled-shutdown offset. The write operations return the records to append
and the answer; they raise :class:`~server.controller.errors.ApiError` with Kafka's error for a
refused request. Times are milliseconds of the host's clock, passed in: no I/O, no clock.

What a broker's change does to the partitions it replicates (leadership and ISR moved off a
fenced, shutting down or unregistered broker; leaderless partitions given an unfenced one) is
asked of a :class:`PartitionEffects` (``server.controller.alter_partition.BrokerPartitionEffects``
over the topics image), and its records come where Kafka writes them: before the fencing, the
new incarnation's registration or the unregistration, after the unfencing and the entry into
controlled shutdown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.runtime import Message
from server.controller.errors import ApiError
from server.controller.heartbeats import (
    FENCED_STATES,
    BrokerControlState,
    BrokerHeartbeatReply,
    BrokerHeartbeats,
)
from server.controller.result import Record
from storage.features import METADATA_VERSION_FEATURE

__all__ = [
    "NO_PARTITIONS",
    "BrokerControlState",
    "BrokerHeartbeatReply",
    "BrokerHeartbeats",
    "BrokerRegistration",
    "ClusterControlManager",
    "NoPartitions",
    "PartitionEffects",
    "ReplayError",
    "register_broker_record_version",
]


_REGISTRATION_CHANGE_LEVEL = 6
"""metadata.version 3.3-IV2: BrokerRegistrationChangeRecord replaces Fence/UnfenceBrokerRecord."""
_CONTROLLED_SHUTDOWN_LEVEL = 7
"""3.3-IV3: registrations carry InControlledShutdown (RegisterBrokerRecord v1, change record v1)."""
_MIGRATION_LEVEL = 8
"""3.4-IV0: RegisterBrokerRecord v2."""
_DIRECTORY_ASSIGNMENT_LEVEL = 17
"""3.7-IV2: brokers register their log directories (RegisterBrokerRecord v3, KIP-858)."""
_CORDONED_LOG_DIRS_LEVEL = 30
"""4.3-IV0: cordoned log directories (RegisterBrokerRecord v4, change record v3)."""

_FENCE, _UNFENCE = 1, -1
"""``BrokerRegistrationFencingChange`` values of the Fenced field (0: no change)."""


def register_broker_record_version(metadata_version: int) -> int:
    """``MetadataVersion.registerBrokerRecordVersion`` for a metadata.version level."""
    if metadata_version >= _CORDONED_LOG_DIRS_LEVEL:
        return 4
    if metadata_version >= _DIRECTORY_ASSIGNMENT_LEVEL:
        return 3
    if metadata_version >= _MIGRATION_LEVEL:
        return 2
    return 1 if metadata_version >= _CONTROLLED_SHUTDOWN_LEVEL else 0


def _reserved_directory(directory: Uuid) -> bool:
    """``DirectoryId.reserved``: the ids UNASSIGNED, MIGRATING, LOST and the rest below 100."""
    return directory.most_significant_bits == 0 and directory.least_significant_bits < 100


class ReplayError(Exception):
    """A committed record that does not fit the registrations (a change or unregistration of an
    unknown broker or epoch). Kafka's controller treats it as a fault."""


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A broker as its records registered it (``org.apache.kafka.metadata.BrokerRegistration``):
    ``endpoints`` as ``(listener name, host, port, security protocol id)``, ``features`` as
    name -> (min, max) supported level, ``log_dirs`` the online directory ids and
    ``cordoned_log_dirs`` the cordoned ones (None: never reported)."""

    broker_id: int
    epoch: int
    incarnation_id: Uuid
    endpoints: tuple[tuple[str, str, int, int], ...]
    features: Mapping[str, tuple[int, int]]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: tuple[Uuid, ...]
    cordoned_log_dirs: tuple[Uuid, ...] | None

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        """The registration a replayed RegisterBrokerRecord holds."""
        return cls(
            broker_id=record.broker_id,
            epoch=record.broker_epoch,
            incarnation_id=record.incarnation_id,
            endpoints=tuple((e.name, e.host, e.port, e.security_protocol) for e in record.end_points),
            features={f.name: (f.min_supported_version, f.max_supported_version) for f in record.features},
            rack=record.rack,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
            log_dirs=tuple(record.log_dirs),
            cordoned_log_dirs=None if record.cordoned_log_dirs is None else tuple(record.cordoned_log_dirs),
        )


class PartitionEffects(Protocol):
    """What a broker's change does to the partitions (``ReplicationControlManager``'s broker
    handlers): each method returns the records to write."""

    def broker_removed(self, broker_id: int) -> list[Record]:
        """Fenced or entering controlled shutdown: leadership and ISR membership move off it
        (``handleBrokerFenced``, ``handleBrokerInControlledShutdown``)."""
        ...

    def broker_unfenced(self, broker_id: int) -> list[Record]:
        """Unfenced: it may lead the partitions that have no leader (``handleBrokerUnfenced``)."""
        ...

    def broker_shutdown(self, broker_id: int, clean: bool) -> list[Record]:
        """A new incarnation registers: the old one's partitions change (``handleBrokerShutdown``)."""
        ...

    def broker_unregistered(self, broker_id: int) -> list[Record]:
        """Unregistered: out of every ISR and ELR (``handleBrokerUnregistered``)."""
        ...

    def directory_offline(self, broker_id: int, directory: Uuid) -> list[Record]:
        """Leadership and ISR membership off ``broker_id`` for the partitions whose replica it
        keeps in ``directory``, which went offline."""
        ...

    def has_leaderships(self, broker_id: int) -> bool:
        """It leads a partition (``BrokersToIsrs.hasLeaderships``)."""
        ...


class NoPartitions:
    """:class:`PartitionEffects` of a cluster without topics: no records, no leaderships."""

    def broker_removed(self, broker_id: int) -> list[Record]:
        """No partition to move: no records."""
        return []

    def broker_unfenced(self, broker_id: int) -> list[Record]:
        """No partition to elect it for: no records."""
        return []

    def broker_shutdown(self, broker_id: int, clean: bool) -> list[Record]:
        """No partition to move: no records."""
        return []

    def broker_unregistered(self, broker_id: int) -> list[Record]:
        """No partition to move: no records."""
        return []

    def directory_offline(self, broker_id: int, directory: Uuid) -> list[Record]:
        """No partition changes."""
        return []

    def has_leaderships(self, broker_id: int) -> bool:
        """No partitions, so no leaderships."""
        return False


NO_PARTITIONS = NoPartitions()


class ClusterControlManager:
    """The brokers of the cluster ``cluster_id`` (see the module docstring). Sessions exist
    between :meth:`activate` and :meth:`deactivate`; a write outside them raises
    RuntimeError, as Kafka's does."""

    def __init__(self, cluster_id: str, session_timeout_ms: int) -> None:
        self.cluster_id = cluster_id
        self.session_timeout_ms = session_timeout_ms
        self.registrations: dict[int, BrokerRegistration] = {}
        """Broker id -> its registration (``ClusterImage.brokers``)."""
        self.register_offsets: dict[int, int] = {}
        """Broker id -> offset of its latest RegisterBrokerRecord: caught up means past it."""
        self.directory_to_broker: dict[Uuid, int] = {}
        self.heartbeats: BrokerHeartbeats | None = None

    # ------------------------------------------------------------------ replay

    def reset(self) -> None:
        """Forget every registration (a snapshot is about to be replayed)."""
        self.registrations = {}
        self.register_offsets = {}
        self.directory_to_broker = {}

    def replay(self, message: Message, offset: int) -> None:
        """Replay a committed broker record at ``offset``. Raises :class:`ReplayError` for a
        change or removal that names no registered broker and epoch."""
        if isinstance(message, RegisterBrokerRecord):
            self._replay_register(message, offset)
        elif isinstance(message, BrokerRegistrationChangeRecord):
            if message.fenced not in (-1, 0, 1) or message.in_controlled_shutdown not in (0, 1):
                raise ReplayError(f"unknown value in {message}")
            self._replay_change(
                message,
                message.broker_id,
                message.broker_epoch,
                fenced=None if message.fenced == 0 else message.fenced == _FENCE,
                in_controlled_shutdown=True if message.in_controlled_shutdown == 1 else None,
                log_dirs=tuple(message.log_dirs) if message.log_dirs else None,
                cordoned=None if message.cordoned_log_dirs is None else tuple(message.cordoned_log_dirs),
            )
        elif isinstance(message, FenceBrokerRecord):
            self._replay_change(message, message.id, message.epoch, fenced=True)
        elif isinstance(message, UnfenceBrokerRecord):
            self._replay_change(message, message.id, message.epoch, fenced=False)
        elif isinstance(message, UnregisterBrokerRecord):
            self._replay_unregister(message)

    def _replay_register(self, record: RegisterBrokerRecord, offset: int) -> None:
        registration = BrokerRegistration.from_record(record)
        previous = self.registrations.get(record.broker_id)
        self.registrations[record.broker_id] = registration
        self.register_offsets[record.broker_id] = offset
        self._update_directories(record.broker_id, () if previous is None else previous.log_dirs, registration.log_dirs)
        if self.heartbeats is not None:
            if previous is not None:
                self.heartbeats.remove(record.broker_id)
            self.heartbeats.register(record.broker_id, registration.fenced)

    def _replay_change(
        self,
        record: Message,
        broker_id: int,
        epoch: int,
        *,
        fenced: bool | None = None,
        in_controlled_shutdown: bool | None = None,
        log_dirs: tuple[Uuid, ...] | None = None,
        cordoned: tuple[Uuid, ...] | None = None,
    ) -> None:
        current = self.registrations.get(broker_id)
        if current is None:
            raise ReplayError(f"Unable to replay {record}: no broker registration found for that id")
        if current.epoch != epoch:
            raise ReplayError(f"Unable to replay {record}: no broker registration with that epoch found")
        changed = replace(
            current,
            fenced=current.fenced if fenced is None else fenced,
            in_controlled_shutdown=current.in_controlled_shutdown if in_controlled_shutdown is None else in_controlled_shutdown,
            log_dirs=current.log_dirs if log_dirs is None else log_dirs,
            cordoned_log_dirs=current.cordoned_log_dirs if cordoned is None else cordoned,
        )
        self.registrations[broker_id] = changed
        self._update_directories(broker_id, current.log_dirs, changed.log_dirs)
        if self.heartbeats is not None:
            self.heartbeats.register(broker_id, changed.fenced)

    def _replay_unregister(self, record: UnregisterBrokerRecord) -> None:
        current = self.registrations.get(record.broker_id)
        if current is None:
            raise ReplayError(f"Unable to replay {record}: no broker registration found for that id")
        if current.epoch != record.broker_epoch:
            raise ReplayError(f"Unable to replay {record}: no broker registration with that epoch found")
        self.register_offsets.pop(record.broker_id, None)
        if self.heartbeats is not None:
            self.heartbeats.remove(record.broker_id)
        self._update_directories(record.broker_id, current.log_dirs, ())
        del self.registrations[record.broker_id]

    def _update_directories(self, broker_id: int, before: Iterable[Uuid], after: Iterable[Uuid]) -> None:
        after = tuple(after)
        for directory in before:
            if directory not in after and self.directory_to_broker.get(directory) == broker_id:
                del self.directory_to_broker[directory]
        for directory in after:
            self.directory_to_broker[directory] = broker_id

    # ------------------------------------------------------------------ leadership

    def activate(self, now_ms: int) -> None:
        """Start sessions (``ClusterControlManager.activate``): every registered broker is
        tracked, and each unfenced one gets a fresh session starting ``now_ms``."""
        self.heartbeats = BrokerHeartbeats(self.session_timeout_ms)
        for registration in self.registrations.values():
            self.heartbeats.register(registration.broker_id, registration.fenced)
            if not registration.fenced:
                self.heartbeats.update_contact(registration.broker_id, registration.epoch, now_ms)

    def deactivate(self) -> None:
        """End every session (no longer the active controller)."""
        self.heartbeats = None

    def _sessions(self) -> BrokerHeartbeats:
        if self.heartbeats is None:
            raise RuntimeError("ClusterControlManager is not active.")
        return self.heartbeats

    # ------------------------------------------------------------------ writes

    def register_broker(
        self,
        request: BrokerRegistrationRequest,
        *,
        new_epoch: int,
        finalized: Mapping[str, int],
        metadata_version: int,
        now_ms: int,
        request_version: int = 4,
        partitions: PartitionEffects = NO_PARTITIONS,
    ) -> tuple[list[Record], int]:
        """BrokerRegistration (``ClusterControlManager.registerBroker``, 4.4): the records
        (the changes of the previous incarnation's partitions, then one RegisterBrokerRecord)
        and the broker epoch to answer. A new incarnation gets ``new_epoch`` (the offset its
        batch will start at) and starts fenced; its predecessor's shutdown was clean when the
        request (v3+) names that incarnation's epoch as its previous one. The same incarnation
        again keeps its epoch and state. ``finalized`` holds every finalized feature level
        (kraft.version included).

        Raises ApiError: INCONSISTENT_CLUSTER_ID; DUPLICATE_BROKER_REGISTRATION while another
        incarnation holds a valid session; BROKER_ID_NOT_REGISTERED for a migrating ZooKeeper
        broker; INVALID_REGISTRATION for log directories (from metadata.version 3.7-IV2: none,
        reserved, duplicated or another broker's) or no metadata.version among the features;
        UNSUPPORTED_VERSION for a finalized level outside the broker's range."""
        sessions = self._sessions()
        if request.cluster_id != self.cluster_id:
            raise ApiError(
                Errors.INCONSISTENT_CLUSTER_ID,
                f"Expected cluster ID {self.cluster_id}, but got cluster ID {request.cluster_id}",
            )
        broker_id = request.broker_id
        existing = self.registrations.get(broker_id)
        if (
            existing is not None
            and sessions.has_valid_session(broker_id, existing.epoch, now_ms)
            and request.incarnation_id != existing.incarnation_id
        ):
            raise ApiError(
                Errors.DUPLICATE_BROKER_REGISTRATION,
                "Another broker is registered with that broker id. If the broker was recently restarted this "
                "should self-resolve once the heartbeat manager expires the broker's session.",
            )
        if request.is_migrating_zk_broker:
            raise ApiError(Errors.BROKER_ID_NOT_REGISTERED, "Controller does not support registering ZK brokers.")
        directories = metadata_version >= _DIRECTORY_ASSIGNMENT_LEVEL
        if directories:
            self._check_log_dirs(broker_id, request.log_dirs)
        for feature in request.features:
            _check_feature(feature.name, feature.min_supported_version, feature.max_supported_version, finalized)
        listed = {f.name for f in request.features}
        if METADATA_VERSION_FEATURE not in listed:
            raise ApiError(Errors.INVALID_REGISTRATION, "Request features do not contain 'metadata.version'")
        for name, level in finalized.items():
            if level != 0 and name not in listed:
                _check_feature(name, 0, 0, finalized)
        same_incarnation = existing is not None and existing.incarnation_id == request.incarnation_id
        records: list[Record] = []
        if not same_incarnation:
            stored_epoch = -2 if existing is None else existing.epoch
            clean = request_version >= 3 and stored_epoch == request.previous_broker_epoch
            records.extend(partitions.broker_shutdown(broker_id, clean))
        record = RegisterBrokerRecord(
            broker_id=broker_id,
            is_migrating_zk_broker=False,
            incarnation_id=request.incarnation_id,
            broker_epoch=existing.epoch if existing is not None and same_incarnation else new_epoch,
            end_points=[
                BrokerEndpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                for e in request.listeners
            ],
            features=[
                BrokerFeature(name=f.name, min_supported_version=f.min_supported_version, max_supported_version=f.max_supported_version)
                for f in request.features
            ],
            rack=request.rack,
            fenced=existing.fenced if existing is not None and same_incarnation else True,
            in_controlled_shutdown=existing.in_controlled_shutdown if existing is not None and same_incarnation else False,
            log_dirs=list(request.log_dirs) if directories else [],
        )
        if not same_incarnation:
            sessions.remove(broker_id)
        sessions.register(broker_id, record.fenced)
        records.append((record, register_broker_record_version(metadata_version)))
        return records, record.broker_epoch

    def _check_log_dirs(self, broker_id: int, log_dirs: list[Uuid]) -> None:
        if not log_dirs:
            raise ApiError(Errors.INVALID_REGISTRATION, "No directories specified in request")
        if any(_reserved_directory(d) for d in log_dirs):
            raise ApiError(Errors.INVALID_REGISTRATION, "Reserved directory ID in request")
        if len(set(log_dirs)) != len(log_dirs):
            raise ApiError(Errors.INVALID_REGISTRATION, "Duplicate directory ID in request")
        for directory in log_dirs:
            owner = self.directory_to_broker.get(directory)
            if owner is not None and owner != broker_id:
                raise ApiError(
                    Errors.INVALID_REGISTRATION, f"Broker {owner} is already registered with directory {directory}"
                )

    def track_heartbeat(self, broker_id: int, epoch: int, now_ms: int) -> bool:
        """Note a heartbeat's contact before it is processed (``trackBrokerHeartbeat``);
        False when this controller is not active."""
        if self.heartbeats is None:
            return False
        self.heartbeats.update_contact(broker_id, epoch, now_ms)
        return True

    def check_broker_epoch(self, broker_id: int, epoch: int) -> None:
        """Raises ApiError STALE_BROKER_EPOCH unless ``broker_id`` is registered at ``epoch``."""
        registration = self.registrations.get(broker_id)
        if registration is None:
            raise ApiError(Errors.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")
        if registration.epoch != epoch:
            raise ApiError(
                Errors.STALE_BROKER_EPOCH, f"Expected broker epoch {registration.epoch}, but got broker epoch {epoch}"
            )

    def process_heartbeat(
        self, request: BrokerHeartbeatRequest, *, metadata_version: int, partitions: PartitionEffects = NO_PARTITIONS
    ) -> tuple[list[Record], BrokerHeartbeatReply]:
        """BrokerHeartbeat (``QuorumController.processBrokerHeartbeat`` and
        ``ReplicationControlManager.processBrokerHeartbeat``): the records of the broker's
        state change and of newly offline or cordoned log directories, and the answer. Call
        :meth:`track_heartbeat` first. Raises ApiError STALE_BROKER_EPOCH before the broker's
        registration or for another epoch.

        Entering controlled shutdown (``handleBrokerInControlledShutdown``) writes the
        InControlledShutdown change only from metadata.version 3.3-IV3: Kafka 4.4 runs no lower
        level, and Kafka 3.9 gates it on ``MetadataVersion.isInControlledShutdownStateSupported``
        (below it the state lives in the heartbeat sessions only)."""
        sessions = self._sessions()
        broker_id, epoch = request.broker_id, request.broker_epoch
        register_offset = self.register_offsets.get(broker_id)
        if register_offset is None:
            raise ApiError(Errors.STALE_BROKER_EPOCH, f"Receive a heartbeat from broker {broker_id} before registration")
        self.check_broker_epoch(broker_id, epoch)
        current, following = sessions.next_state(
            broker_id, request, register_offset, leads_partitions=lambda: partitions.has_leaderships(broker_id)
        )
        records: list[Record] = []
        if current is not following:
            if following in FENCED_STATES:
                records.extend(partitions.broker_removed(broker_id))
                records.extend(self._fence_records(broker_id, metadata_version))
            elif following is BrokerControlState.UNFENCED:
                records.append(self._unfence_record(broker_id, epoch, metadata_version))
                records.extend(partitions.broker_unfenced(broker_id))
            else:
                supported = metadata_version >= _CONTROLLED_SHUTDOWN_LEVEL
                if supported and not self.registrations[broker_id].in_controlled_shutdown:
                    records.append(
                        (BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, in_controlled_shutdown=1), 1)
                    )
                records.extend(partitions.broker_removed(broker_id))
        sessions.touch(broker_id, following.fenced, request.current_metadata_offset)
        registration = self.registrations[broker_id]
        if metadata_version >= _DIRECTORY_ASSIGNMENT_LEVEL:
            offline = [d for d in registration.log_dirs if d in request.offline_log_dirs]
            if offline:
                # handleDirectoriesOffline: each directory's partitions first, then the change
                for directory in offline:
                    records.extend(partitions.directory_offline(broker_id, directory))
                online = [d for d in registration.log_dirs if d not in request.offline_log_dirs]
                records.append((BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, log_dirs=online), 2))
        cordoned = request.cordoned_log_dirs
        if metadata_version >= _CORDONED_LOG_DIRS_LEVEL and cordoned is not None:
            if registration.cordoned_log_dirs is None or set(registration.cordoned_log_dirs) != set(cordoned):
                records.append(
                    (BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, cordoned_log_dirs=list(cordoned)), 3)
                )
        reply = BrokerHeartbeatReply(
            is_caught_up=request.current_metadata_offset >= register_offset,
            is_fenced=following.fenced,
            in_controlled_shutdown=following is BrokerControlState.CONTROLLED_SHUTDOWN,
            should_shut_down=following.should_shut_down,
        )
        return records, reply

    def _fence_records(self, broker_id: int, metadata_version: int) -> list[Record]:
        epoch = self.registrations[broker_id].epoch
        if metadata_version >= _REGISTRATION_CHANGE_LEVEL:
            return [(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=_FENCE), 0)]
        return [(FenceBrokerRecord(id=broker_id, epoch=epoch), 0)]

    def _unfence_record(self, broker_id: int, epoch: int, metadata_version: int) -> Record:
        if metadata_version >= _REGISTRATION_CHANGE_LEVEL:
            return BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=_UNFENCE), 0
        return UnfenceBrokerRecord(id=broker_id, epoch=epoch), 0

    def next_session_expiry_ms(self) -> int | None:
        """When the oldest broker session ends (:meth:`BrokerHeartbeats.next_expiry_ms`); None
        without a session or while this controller keeps none (it is not active)."""
        return None if self.heartbeats is None else self.heartbeats.next_expiry_ms()

    def maybe_fence_stale_broker(
        self, now_ms: int, *, metadata_version: int, partitions: PartitionEffects = NO_PARTITIONS
    ) -> list[Record] | None:
        """One expired session (``maybeFenceOneStaleBroker``): None when no session expired;
        else the records fencing its broker (none when that broker is gone or has another
        epoch now). Kafka runs it every ``broker.session.timeout.ms`` / 8, and again at once
        after it found one."""
        sessions = self._sessions()
        expired = sessions.remove_expired(now_ms)
        if expired is None:
            return None
        broker_id, epoch = expired
        registration = self.registrations.get(broker_id)
        if registration is None:
            sessions.remove(broker_id)
            return []
        if registration.epoch != epoch:
            return []
        records = [*partitions.broker_removed(broker_id), *self._fence_records(broker_id, metadata_version)]
        sessions.fence(broker_id)
        return records

    def unregister_broker(self, broker_id: int, partitions: PartitionEffects = NO_PARTITIONS) -> list[Record]:
        """UnregisterBroker (``ReplicationControlManager.unregisterBroker``): the changes of its
        partitions, then an UnregisterBrokerRecord of the broker's epoch. Raises ApiError
        BROKER_ID_NOT_REGISTERED for an id without a registration."""
        registration = self.registrations.get(broker_id)
        if registration is None:
            raise ApiError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
        records = partitions.broker_unregistered(broker_id)
        records.append((UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=registration.epoch), 0))
        return records

    def controlled_shutdown_committed(self, broker_id: int, end_offset: int) -> None:
        """A heartbeat that put the broker in controlled shutdown had its batch end at
        ``end_offset`` (``maybeUpdateControlledShutdownOffset``)."""
        if self.heartbeats is not None and broker_id in self.heartbeats.states:
            self.heartbeats.update_controlled_shutdown_offset(broker_id, end_offset)


def _check_feature(name: str, low: int, high: int, finalized: Mapping[str, int]) -> None:
    """``processRegistrationFeature``: the finalized level (0 when not finalized) must lie in
    the broker's range, else UNSUPPORTED_VERSION."""
    level = finalized.get(name, 0)
    if not low <= level <= high:
        raise ApiError(
            Errors.UNSUPPORTED_VERSION,
            f"Unable to register because the broker does not support finalized version {level} of {name}. "
            f"The broker wants a version between {low} and {high}, inclusive.",
        )
