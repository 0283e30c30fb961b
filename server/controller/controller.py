"""The replayed state of the metadata log and the controller's claim on it (the part of Kafka's
``QuorumController``, ``FeatureControlManager`` and ``OffsetControlManager`` built so far).

The host feeds every committed data record in log order (:meth:`ControlManagers.replay`),
starting again from a snapshot's records when one is loaded (:meth:`ControlManagers.reset`).
When its raft leadership of some epoch has replayed everything before that epoch's start, the
host calls :meth:`ControlManagers.activate` and appends what it returns (Kafka claims
leadership at the same point: ``KafkaRaftClient`` tells its listener of its own leadership once
the listener has read up to the epoch start offset). No I/O and no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from kwire.errors import Errors
from kwire.uuid import Uuid
from kwire.wire import read_uvarint
from messages.generated.abort_transaction_record import AbortTransactionRecord
from messages.generated.access_control_entry_record import AccessControlEntryRecord
from messages.generated.begin_transaction_record import BeginTransactionRecord
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.clear_elr_record import ClearElrRecord
from messages.generated.client_quota_record import ClientQuotaRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.controller_registration_request import ControllerRegistrationRequest
from messages.generated.delegation_token_record import DelegationTokenRecord
from messages.generated.end_transaction_record import EndTransactionRecord
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.producer_ids_record import ProducerIdsRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.register_controller_record import (
    ControllerEndpoint,
    ControllerFeature,
    RegisterControllerRecord,
)
from messages.generated.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from messages.generated.remove_delegation_token_record import RemoveDelegationTokenRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from messages.generated.topic_record import TopicRecord
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.generated.unregister_controller_record import UnregisterControllerRecord
from messages.generated.user_scram_credential_record import UserScramCredentialRecord
from messages.metadata import decode_record
from server.controller.acls import AclControlManager
from server.controller.activation import (
    METADATA_VERSION_FEATURE,
    ActivationRecords,
    activation_records,
)
from server.controller.client_quotas import ClientQuotaControlManager
from server.controller.cluster import ClusterControlManager, ReplayError
from server.controller.delegation_tokens import DelegationTokenControlManager
from server.controller.errors import ApiError
from server.controller.features import (
    CONTROLLER_REGISTRATION_LEVEL,
    CONTROLLER_UNREGISTRATION_LEVEL,
)
from server.controller.image import ReplicationControlManager
from server.controller.image_writer import image_view
from server.controller.result import Record
from server.controller.scram import ScramControlManager

__all__ = ["REPLAYED_KEY_BYTES", "ControlManagers", "ControllerRegistration"]

_PARTITION_RECORD_KEY = PartitionRecord.API_KEY
_REPLAYED_KEYS = frozenset(
    {
        FeatureLevelRecord.API_KEY,
        BeginTransactionRecord.API_KEY,
        EndTransactionRecord.API_KEY,
        AbortTransactionRecord.API_KEY,
        RegisterControllerRecord.API_KEY,
        UnregisterControllerRecord.API_KEY,
        RegisterBrokerRecord.API_KEY,
        BrokerRegistrationChangeRecord.API_KEY,
        FenceBrokerRecord.API_KEY,
        UnfenceBrokerRecord.API_KEY,
        UnregisterBrokerRecord.API_KEY,
        TopicRecord.API_KEY,
        PartitionRecord.API_KEY,
        PartitionChangeRecord.API_KEY,
        RemoveTopicRecord.API_KEY,
        ConfigRecord.API_KEY,
        ProducerIdsRecord.API_KEY,
        ClearElrRecord.API_KEY,
        AccessControlEntryRecord.API_KEY,
        RemoveAccessControlEntryRecord.API_KEY,
        UserScramCredentialRecord.API_KEY,
        RemoveUserScramCredentialRecord.API_KEY,
        ClientQuotaRecord.API_KEY,
        DelegationTokenRecord.API_KEY,
        RemoveDelegationTokenRecord.API_KEY,
    }
)
REPLAYED_KEY_BYTES = frozenset(_REPLAYED_KEYS | set(range(0x80, 0x100)))
"""The second byte of a framed record value (its api key's first varint byte) that
:meth:`ControlManagers.replay` may replay: each replayed api key below 0x80, and any first
byte of a longer key. ``replay`` passes over a value whose second byte is not in it (a
NoOpRecord, a ZkMigrationStateRecord), so the host skips those without the call."""
_BROKER_RECORDS = (
    RegisterBrokerRecord,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
_REPLICATION_RECORDS = (
    TopicRecord,
    PartitionRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
    ConfigRecord,
    ProducerIdsRecord,
    ClearElrRecord,
)


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """A controller as its RegisterControllerRecord registered it (KIP-919,
    ``ControllerRegistration``): ``endpoints`` as ``(listener name, host, port, security
    protocol id)``, ``features`` as name -> (min, max) supported level."""

    controller_id: int
    incarnation_id: Uuid
    endpoints: tuple[tuple[str, str, int, int], ...]
    features: Mapping[str, tuple[int, int]]

    @classmethod
    def from_record(cls, record: RegisterControllerRecord) -> ControllerRegistration:
        """The registration a replayed RegisterControllerRecord holds."""
        return cls(
            record.controller_id,
            record.incarnation_id,
            tuple((e.name, e.host, e.port, e.security_protocol) for e in record.end_points),
            {f.name: (f.min_supported_version, f.max_supported_version) for f in record.features},
        )

    def to_record(self) -> RegisterControllerRecord:
        """The RegisterControllerRecord (v0) a snapshot holds for this registration
        (``ControllerRegistration.toRecord``): ZkMigrationReady false."""
        return RegisterControllerRecord(
            controller_id=self.controller_id,
            incarnation_id=self.incarnation_id,
            zk_migration_ready=False,
            end_points=[
                ControllerEndpoint(name=name, host=host, port=port, security_protocol=protocol)
                for name, host, port, protocol in self.endpoints
            ],
            features=[
                ControllerFeature(name=name, min_supported_version=low, max_supported_version=high)
                for name, (low, high) in self.features.items()
            ],
        )


class ControlManagers:
    """The controller of one node: finalized feature levels, metadata-transaction state,
    controller and broker registrations, topics, partitions, configs, producer ids, client
    quotas, ACLs, SCRAM credentials and delegation tokens from the committed records, and the
    epoch it is active in.

    ``bootstrap`` is the formatted bootstrap metadata (``(record, version)`` pairs, the
    metadata.version FeatureLevelRecord among them); ``min_insync_replicas`` the node's
    ``min.insync.replicas``, which 4.x activation writes as a cluster default; ``cluster_id``
    the id brokers must register with; ``session_timeout_ms`` the node's
    ``broker.session.timeout.ms``.
    """

    def __init__(
        self,
        *,
        bootstrap: Sequence[Record],
        min_insync_replicas: int = 1,
        cluster_id: str = "",
        session_timeout_ms: int = 9000,
    ) -> None:
        self.bootstrap = tuple(bootstrap)
        self.min_insync_replicas = min_insync_replicas
        self.cluster = ClusterControlManager(cluster_id, session_timeout_ms)
        """Broker registrations, and broker sessions while active (``ClusterControlManager``)."""
        self.replication = ReplicationControlManager()
        """Topics, partitions, configs and producer ids (``server.controller.image``)."""
        self.feature_levels: dict[str, int] = {}
        """Feature name -> finalized level, from FeatureLevelRecords (0: not finalized)."""
        self.transaction_open = False
        """A BeginTransactionRecord was replayed without its End or Abort."""
        self.controllers: dict[int, ControllerRegistration] = {}
        """Controller id -> its latest registration (``ClusterImage.controllers``)."""
        self.acls = AclControlManager()
        """ACL bindings by id (``AclControlManager``)."""
        self.scram = ScramControlManager()
        """SCRAM credentials by user and mechanism (``ScramControlManager``)."""
        self.client_quotas = ClientQuotaControlManager()
        """Client quotas by entity (``ClientQuotaControlManager``)."""
        self.delegation_tokens = DelegationTokenControlManager()
        """Delegation tokens by id (``DelegationTokenControlManager``)."""
        self.active_epoch: int | None = None
        """The leader epoch this controller is active in, None while it is not."""

    # ------------------------------------------------------------------ replay

    @property
    def metadata_version(self) -> int | None:
        """The finalized metadata.version level, None before its FeatureLevelRecord."""
        level = self.feature_levels.get(METADATA_VERSION_FEATURE, 0)
        return level if level > 0 else None

    def reset(self, record_values: Iterable[bytes | None], offset: int = -1) -> None:
        """Start again from a snapshot whose data records' values are ``record_values``;
        ``offset`` is its last contained offset, which its records are replayed at."""
        self.feature_levels = {}
        self.transaction_open = False
        self.controllers = {}
        self.cluster.reset()
        self.replication = ReplicationControlManager()
        self.acls = AclControlManager()
        self.scram = ScramControlManager()
        self.client_quotas = ClientQuotaControlManager()
        self.delegation_tokens = DelegationTokenControlManager()
        for value in record_values:
            self.replay(value, offset)

    def replay(self, value: bytes | None, offset: int = -1) -> None:
        """Replay one committed data record value (a framed metadata record) at log offset
        ``offset``. Only the record types this controller keeps are decoded: the api key is
        read first. Raises ``kwire.wire.DecodeError`` for a record of those types that does
        not decode, and ``server.controller.cluster.ReplayError`` for a record that does not
        fit the image (a change of an unknown broker, topic or partition; it is skipped)."""
        # the frame is (frame version, api key, version) varints
        if value is None or len(value) < 2:
            return
        api_key = value[1] if value[1] < 0x80 else read_uvarint(value, 1)[0]
        if api_key not in _REPLAYED_KEYS:
            return
        if api_key == _PARTITION_RECORD_KEY and self.replication.replay_partition_value(value):
            return  # replayed from its bytes: most records of a large image are these
        message, _ = decode_record(value)
        if isinstance(message, FeatureLevelRecord):
            self.feature_levels[message.name] = message.feature_level
        elif isinstance(message, BeginTransactionRecord):
            self.transaction_open = True
        elif isinstance(message, RegisterControllerRecord):
            self.controllers[message.controller_id] = ControllerRegistration.from_record(message)
        elif isinstance(message, UnregisterControllerRecord):
            if self.controllers.pop(message.controller_id, None) is None:
                raise ReplayError(f"Unable to replay {message}: no controller registration found for that id")
        elif isinstance(message, _BROKER_RECORDS):
            self.cluster.replay(message, offset)
        elif isinstance(message, _REPLICATION_RECORDS):
            self.replication.replay(message)
        elif isinstance(message, (AccessControlEntryRecord, RemoveAccessControlEntryRecord)):
            self.acls.replay(message)
        elif isinstance(message, (UserScramCredentialRecord, RemoveUserScramCredentialRecord)):
            self.scram.replay(message)
        elif isinstance(message, ClientQuotaRecord):
            self.client_quotas.replay(message)
        elif isinstance(message, (DelegationTokenRecord, RemoveDelegationTokenRecord)):
            self.delegation_tokens.replay(message)
        else:  # End or Abort
            self.transaction_open = False

    def snapshot_records(self) -> list[Record]:
        """The image as the ``(record, version)`` data records of a metadata snapshot
        (``server.controller.image_writer``). Raises ``ImageLossError`` without a finalized
        metadata.version, RuntimeError inside a metadata transaction (Kafka publishes, and so
        snapshots, only the images between transactions)."""
        return list(self.snapshot_view())

    def snapshot_view(self) -> Iterator[Record]:
        """:meth:`snapshot_records` as of this call, made as they are read
        (``image_writer.image_view``): later replays do not change them, so they may be read
        a piece at a time while the controller goes on. Raises as :meth:`snapshot_records`
        does, at once."""
        if self.transaction_open:
            raise RuntimeError("no snapshot inside a metadata transaction")
        return image_view(
            feature_levels=self.feature_levels,
            cluster=self.cluster,
            controllers=[c.to_record() for c in self.controllers.values()],
            replication=self.replication,
            client_quotas=self.client_quotas.snapshot_records(),
            security=[
                *self.acls.snapshot_records(),
                *self.scram.snapshot_records(),
                *self.delegation_tokens.snapshot_records(),
            ],
        )

    def image_record_estimate(self) -> int:
        """Roughly how many records :meth:`snapshot_view` gives: the partitions, topics,
        brokers, controllers and config resources, counted without walking the image (each
        resource's config entries, quotas and security records are left out)."""
        replication = self.replication
        return (replication.partition_count + len(replication.topics) + len(self.cluster.registrations)
                + len(self.controllers) + len(replication.configs))

    # ------------------------------------------------------------------ writes

    def register_controller(self, request: ControllerRegistrationRequest) -> list[Record]:
        """ControllerRegistration at the active controller (``ClusterControlManager
        .registerController``): one RegisterControllerRecord v0 of the request's id,
        incarnation, listeners and features, ZkMigrationReady false; the features are not
        checked. Raises ApiError UNSUPPORTED_VERSION below metadata.version 3.7-IV0."""
        level = self.metadata_version
        if level is None or level < CONTROLLER_REGISTRATION_LEVEL:
            raise ApiError(
                Errors.UNSUPPORTED_VERSION,
                "The current MetadataVersion is too old to support controller registrations.",
            )
        record = RegisterControllerRecord(
            controller_id=request.controller_id,
            incarnation_id=request.incarnation_id,
            zk_migration_ready=False,
            end_points=[
                ControllerEndpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                for e in request.listeners
            ],
            features=[
                ControllerFeature(
                    name=f.name, min_supported_version=f.min_supported_version, max_supported_version=f.max_supported_version
                )
                for f in request.features
            ],
        )
        return [(record, 0)]

    def unregister_controller(self, controller_id: int) -> list[Record]:
        """UnregisterController at the active controller (``ClusterControlManager
        .unregisterController``, KIP-919's counterpart): one UnregisterControllerRecord v0.
        Raises ApiError UNSUPPORTED_VERSION below metadata.version 4.4-IV2, and
        CONTROLLER_ID_NOT_REGISTERED for an id without a registration."""
        level = self.metadata_version
        if level is None or level < CONTROLLER_UNREGISTRATION_LEVEL:
            raise ApiError(
                Errors.UNSUPPORTED_VERSION,
                "The current MetadataVersion is too old to support controller unregistration.",
            )
        if controller_id not in self.controllers:
            raise ApiError(Errors.CONTROLLER_ID_NOT_REGISTERED, f"Controller ID {controller_id} is not currently registered.")
        return [(UnregisterControllerRecord(controller_id=controller_id), 0)]

    # ------------------------------------------------------------------ leadership

    def activate(self, epoch: int, now_ms: int = 0) -> ActivationRecords | None:
        """Become the active controller of leader epoch ``epoch`` at ``now_ms``: the records
        to append first (possibly none), or None when already active in that epoch. Every
        registered broker's session starts afresh. Call only once everything committed before
        the epoch's start has been replayed."""
        if self.active_epoch == epoch:
            return None
        self.active_epoch = epoch
        self.cluster.activate(now_ms)
        return activation_records(
            metadata_version_replayed=self.metadata_version is not None,
            transaction_open=self.transaction_open,
            bootstrap=self.bootstrap,
            min_insync_replicas=self.min_insync_replicas,
        )

    def renounce(self) -> None:
        """No longer the active controller (leadership lost or resigned)."""
        self.active_epoch = None
        self.cluster.deactivate()
