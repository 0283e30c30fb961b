"""What every controller operation (one per RPC, as Kafka's ``QuorumController`` has one
public method per RPC) is given: :class:`ControllerConfig` (the node's settings),
:class:`OperationContext` (the image, the time, the raft layer's facts) and the injected
:class:`ControllerLog`.

Every operation (``server.controller.cluster_operations``, ``topic_operations``,
``security_operations``) has the same shape, ``operation(ctx, request, version) ->
ControllerResult``: it reads the image through an :class:`OperationContext` and returns a
:class:`~server.controller.result.ControllerResult` (records to append as one batch, the
result the answer is built from) or raises :class:`~server.controller.errors.ApiError`, which
fails the request whole; ``server.controller.registry`` pairs each with its answer builder in
one line. The operations decide nothing about timing: the host (``server.controller.host``)
runs a write only on the active controller and after the writes before it committed, and
answers once its batch commits. Reads (the Describe RPCs: ``write=False`` in the registry) any
controller answers from its own image at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from server.controller import configs
from server.controller.activation import ELIGIBLE_LEADER_REPLICAS_FEATURE
from server.controller.authorizer import Authorize
from server.controller.cluster import ClusterControlManager
from server.controller.controller import ControlManagers
from server.controller.delegation_tokens import TokenSettings
from server.controller.image import ReplicationControlManager
from server.controller.partition_effects import (
    BrokerPartitionEffects,
    TopicConfigLayers,
)
from server.controller.plugins import NO_PLUGINS, ControllerPlugins

if TYPE_CHECKING:
    import random


__all__ = [
    "ControllerConfig",
    "ControllerLog",
    "OperationContext",
    "RaftFacts",
]


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The settings a controller decides by, with Kafka's keys and defaults (the node builds
    them from server.properties): ``node_id`` (``node.id``), ``cluster_id`` (meta.properties),
    ``static_config`` (the node's properties as given, for topic config defaults and
    DescribeConfigs), ``quorum_node_ids`` (the ids of ``controller.quorum.voters``, empty for a
    dynamic quorum), then ``min.insync.replicas``, ``broker.session.timeout.ms``,
    ``num.partitions``, ``default.replication.factor``, ``delete.topic.enable``,
    ``auto.leader.rebalance.enable``, ``leader.imbalance.check.interval.seconds`` (in ms here),
    ``unclean.leader.election.interval.ms``, ``metadata.max.idle.interval.ms`` (0: no NoOps),
    ``metadata.log.max.record.bytes.between.snapshots`` and
    ``metadata.log.max.snapshot.interval.ms`` (0: no time trigger); the authorizer settings
    (below); ``unsafe_ack_on_append``
    (TEST ONLY, ``kwire.unsafe.test.ack.on.append``) answers a write once appended, before it
    commits, for the fault tests' positive control."""

    node_id: int
    cluster_id: str
    static_config: Mapping[str, str]
    quorum_node_ids: frozenset[int] = frozenset()
    min_insync_replicas: int = 1
    session_timeout_ms: int = 9000
    num_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    unclean_leader_election_interval_ms: int = 300_000
    max_idle_interval_ms: int = 500
    snapshot_max_bytes: int = 20_971_520
    snapshot_max_interval_ms: int = 3_600_000
    unsafe_ack_on_append: bool = False
    authorizer: bool = False
    """``authorizer.class.name`` names Kafka's ``StandardAuthorizer`` (the one authorizer kwire
    has): the ACL RPCs are served and requests are authorized against the ACLs."""
    super_users: frozenset[str] = frozenset()
    """``super.users``: principals every operation is allowed to."""
    allow_everyone_if_no_acl_found: bool = False
    """``allow.everyone.if.no.acl.found``."""
    tokens: TokenSettings = TokenSettings()
    """The ``delegation.token.*`` settings."""
    plugins: ControllerPlugins = NO_PLUGINS
    """The policies and replica placer the node loaded (``server.controller.plugins``)."""


class ControllerLog(Protocol):
    """Where the controller's INFO and ERROR lines go (a ``logging.Logger`` fits; the host
    takes it injected, so the controller itself never touches the logging registry)."""

    def info(self, msg: str, *args: Any) -> None:
        """One line at INFO, %-formatted."""

    def error(self, msg: str, *args: Any) -> None:
        """One line at ERROR, %-formatted."""


class RaftFacts(Protocol):
    """What the operations read of the raft layer (``server.raft.core.RaftCore`` fits)."""

    @property
    def kraft_version(self) -> int:
        """The finalized kraft.version."""

    @property
    def next_append_offset(self) -> int | None:
        """The offset the next append starts at on this leader, None elsewhere."""

    def check_kraft_upgrade(self, epoch: int, level: int) -> bool:
        """Whether this leader of ``epoch`` will append kraft.version ``level`` (raises
        ``UpgradeRefused``)."""


@dataclass(slots=True)
class OperationContext:
    """What one operation sees: the controller's image, the node's settings, the time, the
    raft layer's facts, and where its own uncommitted appends end."""

    controller: ControlManagers
    config: ControllerConfig
    now_ms: int
    raft: RaftFacts
    voter_ids: frozenset[int]
    rng: random.Random
    log: ControllerLog
    listener_name: str = ""
    """The listener the request arrived on (DescribeCluster lists endpoints on it)."""
    leader_id: int | None = None
    pending_records: int = 0
    """Records this host handed over for appending that the raft layer has not taken yet."""
    logger_levels: Callable[[], Mapping[str, str]] = dict
    principal: str = "User:ANONYMOUS"
    """The request's principal (``Type:name``)."""
    token_requests_allowed: bool = True
    """The request may ask for delegation tokens (``ControllerApis.allowTokenRequests``: not
    from a token-authenticated principal, nor unforwarded over PLAINTEXT or anonymous SSL)."""
    authorize: Authorize | None = None
    """With an authorizer, whether the request's principal may do an operation on a resource
    (``authorize(operation, resource type, name, log_denied)``, the ACL codes of
    ``server.controller.acls``); None without one, when everything is allowed."""

    @property
    def image(self) -> ReplicationControlManager:
        """Topics, partitions, configs and producer ids as replayed."""
        return self.controller.replication

    @property
    def cluster(self) -> ClusterControlManager:
        """Broker registrations and, on the active controller, their sessions."""
        return self.controller.cluster

    @property
    def metadata_version(self) -> int:
        """The finalized metadata.version (an active controller always has one)."""
        level = self.controller.metadata_version
        assert level is not None
        return level

    @property
    def elr_enabled(self) -> bool:
        """eligible.leader.replicas.version is finalized at 1 or more."""
        return self.controller.feature_levels.get(ELIGIBLE_LEADER_REPLICAS_FEATURE, 0) >= 1

    @property
    def next_write_offset(self) -> int:
        """The offset this operation's batch will start at (Kafka's
        ``OffsetControlManager.nextWriteOffset``): a new broker incarnation's epoch."""
        offset = self.raft.next_append_offset
        assert offset is not None
        return offset + self.pending_records

    @property
    def topic_configs(self) -> TopicConfigLayers:
        """The layers a topic's effective configs come from, on this node."""
        return TopicConfigLayers(self.image, self.config.node_id, self.config.static_config)

    def partition_context(self) -> dict[str, Any]:
        """What the partition operations (AlterPartition, ElectLeaders, AssignReplicasToDirs,
        reassignments, the periodic elections) read."""
        return {
            "image": self.image, "cluster": self.cluster, "configs": self.topic_configs,
            "metadata_version": self.metadata_version, "elr_enabled": self.elr_enabled,
        }

    @property
    def partition_effects(self) -> BrokerPartitionEffects:
        """What a broker's state change does to the partitions, on this image."""
        return BrokerPartitionEffects(**self.partition_context())

    @property
    def config_context(self) -> configs.ConfigContext:
        """What config changes are checked against: the image, the node ids a broker resource
        may name (registered brokers and controllers, voters), this node's properties."""
        known = set(self.cluster.registrations) | set(self.controller.controllers) | self.voter_ids
        return configs.ConfigContext(
            self.image, frozenset(known), self.config.static_config, self.elr_enabled, self.config.plugins
        )

    @property
    def finalized_features(self) -> dict[str, int]:
        """The finalized levels (above 0) of the FeatureLevelRecords."""
        return {name: level for name, level in self.controller.feature_levels.items() if level > 0}
