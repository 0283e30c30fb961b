"""The controller's operations, one function per RPC, as the public methods of Kafka's
``QuorumController`` are: each reads the image through an :class:`OperationContext` and returns
a :class:`~server.controller.result.ControllerResult` (records to append as one batch, the
result the answer is built from) or raises :class:`~server.controller.errors.ApiError`, which
fails the request whole.

Every operation has the same shape, ``operation(ctx, request, version) -> ControllerResult``,
so that ``server.controller.registry`` can pair it with its answer builder in one line. The
operations decide nothing about timing: the host (``server.controller.host``) runs a write only
on the active controller and after the writes before it committed, and answers once its batch
commits. :func:`describe_cluster` and :func:`describe_configs` are reads any controller answers
from its own image at once; their result is the whole response.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from kwire.errors import Errors
from messages.generated.access_control_entry_record import AccessControlEntryRecord
from messages.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from messages.generated.alter_client_quotas_request import AlterClientQuotasRequest
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from messages.generated.alter_partition_request import AlterPartitionRequest
from messages.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from messages.generated.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.controller_registration_request import ControllerRegistrationRequest
from messages.generated.create_acls_request import CreateAclsRequest
from messages.generated.create_delegation_token_request import CreateDelegationTokenRequest
from messages.generated.create_partitions_request import CreatePartitionsRequest
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_configs_request import DescribeConfigsRequest
from messages.generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from messages.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from messages.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from messages.generated.renew_delegation_token_request import RenewDelegationTokenRequest
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.generated.unregister_controller_request import UnregisterControllerRequest
from messages.generated.update_features_request import UpdateFeaturesRequest
from server.controller import alter_partition as partitions
from server.controller import configs, elections, reassignments, topics
from server.controller import describe_cluster as cluster_description
from server.controller import describe_configs as config_description
from server.controller.acls import CLUSTER, CLUSTER_NAME, USER, AclBinding, AclFilter
from server.controller.activation import ELIGIBLE_LEADER_REPLICAS_FEATURE
from server.controller.authorizer import CREATE_TOKENS, Authorize
from server.controller.cluster import ClusterControlManager
from server.controller.controller import ControlManagers
from server.controller.delegation_tokens import TokenOutcome, TokenSettings
from server.controller.errors import ApiError
from server.controller.features import ClusterSupport, supported_features, update_features
from server.controller.image import ReplicationControlManager
from server.controller.partition_effects import (
    BrokerPartitionEffects,
    TopicConfigLayers,
)
from server.controller.plugins import NO_PLUGINS, ControllerPlugins
from server.controller.responses import feature_updates
from server.controller.result import ControllerResult, Record
from server.raft.kraft_upgrade import UpgradeRefused

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


# ---------------------------------------------------------------------- cluster membership


def register_controller(ctx: OperationContext, request: ControllerRegistrationRequest, version: int) -> ControllerResult:
    """ControllerRegistration (KIP-919, ``QuorumController.registerController``)."""
    return ControllerResult(ctx.controller.register_controller(request))


def unregister_controller(ctx: OperationContext, request: UnregisterControllerRequest, version: int) -> ControllerResult:
    """UnregisterController (``QuorumController.unregisterController``): removes a controller's
    KIP-919 registration, from metadata.version 4.4-IV2 on."""
    return ControllerResult(ctx.controller.unregister_controller(request.controller_id))


def register_broker(ctx: OperationContext, request: BrokerRegistrationRequest, version: int) -> ControllerResult:
    """BrokerRegistration (``ClusterControlManager.registerBroker``): a new incarnation's epoch
    is the offset its batch will start at; the finalized levels it must support include the
    quorum's kraft.version (``QuorumController.registerBroker``). The result is the epoch."""
    finalized = ctx.finalized_features
    finalized["kraft.version"] = ctx.raft.kraft_version
    try:
        records, epoch = ctx.cluster.register_broker(
            request,
            new_epoch=ctx.next_write_offset,
            finalized=finalized,
            metadata_version=ctx.metadata_version,
            now_ms=ctx.now_ms,
            request_version=version,
            partitions=ctx.partition_effects,
        )
    except ApiError as exc:
        ctx.log.info("broker %d registration refused: %s %s", request.broker_id, exc.error.name, exc.message)
        raise
    ctx.log.info("registering broker %d (incarnation %s) with broker epoch %d", request.broker_id, request.incarnation_id, epoch)
    return ControllerResult(records, epoch)


def track_heartbeat(controller: ControlManagers, request: BrokerHeartbeatRequest, now_ms: int) -> None:
    """A heartbeat's contact counts when it arrives, even while it waits behind a write
    (``BrokerHeartbeatManager.trackBrokerHeartbeat``)."""
    controller.cluster.track_heartbeat(request.broker_id, request.broker_epoch, now_ms)


def broker_heartbeat(ctx: OperationContext, request: BrokerHeartbeatRequest, version: int) -> ControllerResult:
    """BrokerHeartbeat (``QuorumController.processBrokerHeartbeat``): the reply, with the
    fencing change's records when there is one; a controlled shutdown learns the offset its
    records committed at."""
    records, reply = ctx.cluster.process_heartbeat(
        request, metadata_version=ctx.metadata_version, partitions=ctx.partition_effects
    )
    changes = sum(1 for record, _ in records if isinstance(record, PartitionChangeRecord))
    for record, _ in records:
        if not isinstance(record, PartitionChangeRecord):  # the broker's own change, once
            ctx.log.info("broker %d heartbeat: %s (%d partition changes)", request.broker_id, record, changes)
    on_commit = partial(ctx.cluster.controlled_shutdown_committed, request.broker_id) if reply.in_controlled_shutdown else None
    return ControllerResult(records, reply, on_commit=on_commit)


def unregister_broker(ctx: OperationContext, request: UnregisterBrokerRequest, version: int) -> ControllerResult:
    """UnregisterBroker (``ClusterControlManager.unregisterBroker``)."""
    return ControllerResult(ctx.cluster.unregister_broker(request.broker_id, ctx.partition_effects))


def allocate_producer_ids(ctx: OperationContext, request: AllocateProducerIdsRequest, version: int) -> ControllerResult:
    """AllocateProducerIds (``ProducerIdControlManager``): a block for a registered broker at
    its epoch (STALE_BROKER_EPOCH for another); the result is the block's first id."""
    ctx.cluster.check_broker_epoch(request.broker_id, request.broker_epoch)
    records, start = ctx.image.allocate_producer_ids(request.broker_id, request.broker_epoch)
    return ControllerResult(records, start)


def update_features_op(ctx: OperationContext, request: UpdateFeaturesRequest, version: int) -> ControllerResult:
    """UpdateFeatures (``QuorumController.updateFeatures``, ``server.controller.features``): a
    kraft.version upgrade is checked by the raft leader here and appended as its control batch
    before the request's own records (a NoOpRecord)."""
    epoch = ctx.controller.active_epoch
    assert epoch is not None
    kraft_level: int | None = None

    def upgrade_kraft(level: int, validate_only: bool) -> None:
        nonlocal kraft_level
        try:
            needed = ctx.raft.check_kraft_upgrade(epoch, level)
        except UpgradeRefused as exc:
            raise ApiError(exc.error, exc.message) from None
        if needed and not validate_only:
            kraft_level = level

    records = update_features(
        feature_updates(request, version),
        finalized=ctx.finalized_features,
        kraft_version=ctx.raft.kraft_version,
        support=ClusterSupport(
            node_id=ctx.config.node_id,
            local={f.name: (f.min_version, f.max_version) for f in supported_features()},
            brokers={i: r.features for i, r in ctx.cluster.registrations.items()},
            controllers={i: r.features for i, r in ctx.controller.controllers.items()},
            quorum_node_ids=ctx.config.quorum_node_ids,
        ),
        validate_only=bool(request.validate_only) if version >= 1 else False,
        upgrade_kraft=upgrade_kraft,
    )
    return ControllerResult(records, kraft_upgrade=kraft_level)


# ---------------------------------------------------------------------- topics and partitions


def create_topics(ctx: OperationContext, request: CreateTopicsRequest, version: int) -> ControllerResult:
    """CreateTopics (``server.controller.topics.create_topics``), each topic's outcome logged;
    topic ids and placement from the host's random source."""
    config = ctx.config
    records, results = topics.create_topics(
        request,
        image=ctx.image,
        cluster=ctx.cluster,
        metadata_version=ctx.metadata_version,
        elr_enabled=ctx.elr_enabled,
        defaults=topics.TopicDefaults(
            num_partitions=config.num_partitions,
            replication_factor=config.default_replication_factor,
            node_id=config.node_id,
            static_config=config.static_config,
            plugins=config.plugins,
        ),
        rng=ctx.rng,
        authorize=ctx.authorize,
    )
    for result in results:
        ctx.log.info("CreateTopics %s: %s %s", result.name, Errors.of(result.error_code).name, result.error_message or "")
    return ControllerResult(records, results)


def delete_topics(ctx: OperationContext, request: DeleteTopicsRequest, version: int) -> ControllerResult:
    """DeleteTopics (``server.controller.topics.delete_topics``), under ``delete.topic.enable``."""
    return ControllerResult(*topics.delete_topics(
        request, version, image=ctx.image, delete_enabled=ctx.config.delete_topic_enable, authorize=ctx.authorize
    ))


def create_partitions(ctx: OperationContext, request: CreatePartitionsRequest, version: int) -> ControllerResult:
    """CreatePartitions (``server.controller.topics.create_partitions``)."""
    return ControllerResult(*topics.create_partitions(
        request, image=ctx.image, cluster=ctx.cluster, metadata_version=ctx.metadata_version, rng=ctx.rng,
        authorize=ctx.authorize, plugins=ctx.config.plugins,
    ))


def alter_partition(ctx: OperationContext, request: AlterPartitionRequest, version: int) -> ControllerResult:
    """AlterPartition (``server.controller.alter_partition``)."""
    return ControllerResult(*partitions.alter_partition(request, version, **ctx.partition_context()))


def assign_replicas_to_dirs(ctx: OperationContext, request: AssignReplicasToDirsRequest, version: int) -> ControllerResult:
    """AssignReplicasToDirs (``server.controller.alter_partition``)."""
    return ControllerResult(*partitions.assign_replicas_to_dirs(request, **ctx.partition_context()))


def elect_leaders(ctx: OperationContext, request: ElectLeadersRequest, version: int) -> ControllerResult:
    """ElectLeaders (``server.controller.elections``)."""
    return ControllerResult(*elections.elect_leaders(request, version, **ctx.partition_context()))


def alter_partition_reassignments(
    ctx: OperationContext, request: AlterPartitionReassignmentsRequest, version: int
) -> ControllerResult:
    """AlterPartitionReassignments (KIP-455, ``server.controller.reassignments``)."""
    return ControllerResult(*reassignments.alter_partition_reassignments(request, version, **ctx.partition_context()))


def list_partition_reassignments(
    ctx: OperationContext, request: ListPartitionReassignmentsRequest, version: int
) -> ControllerResult:
    """ListPartitionReassignments (KIP-455): no records."""
    return ControllerResult((), reassignments.list_partition_reassignments(request, image=ctx.image))


# ---------------------------------------------------------------------- configs


def incremental_alter_configs(
    ctx: OperationContext, request: IncrementalAlterConfigsRequest, version: int
) -> ControllerResult:
    """IncrementalAlterConfigs (``server.controller.configs``)."""
    return ControllerResult(*configs.incremental_alter_configs(request, ctx.config_context, ctx.authorize))


def alter_configs(ctx: OperationContext, request: AlterConfigsRequest, version: int) -> ControllerResult:
    """AlterConfigs, the legacy whole-resource form (``server.controller.configs``)."""
    return ControllerResult(*configs.legacy_alter_configs(request, ctx.config_context, ctx.authorize))


# ---------------------------------------------------------------------- reads any controller answers


def describe_cluster(ctx: OperationContext, request: DescribeClusterRequest, version: int) -> ControllerResult:
    """DescribeCluster (``server.controller.describe_cluster``): the registered controllers
    with an endpoint on the request's listener, and the raft leader."""
    return ControllerResult((), cluster_description.describe_cluster(
        request,
        version,
        ctx.listener_name,
        cluster_id=ctx.config.cluster_id,
        metadata_version=ctx.controller.metadata_version,
        controllers=ctx.controller.controllers,
        leader_id=ctx.leader_id,
    ))


def describe_configs(ctx: OperationContext, request: DescribeConfigsRequest, version: int) -> ControllerResult:
    """DescribeConfigs (``server.controller.describe_configs``), from this node's image, its
    properties and its loggers."""
    view = config_description.NodeConfigView(ctx.config.node_id, ctx.image, ctx.config.static_config, ctx.logger_levels)
    return ControllerResult((), config_description.describe_configs(request, view, ctx.authorize))


# ---------------------------------------------------------------------- ACLs (KIP-801)


def check_acl_request(config: ControllerConfig, request: Any, version: int) -> ApiError | None:
    """What ``AclApis`` refuses on any controller before the controller sees a request:
    SECURITY_DISABLED without an authorizer ("... on the broker" for DescribeAcls, Kafka's
    text even on a controller); a creation that Kafka's ``AclBinding`` constructors refuse
    (:meth:`~server.controller.acls.AclBinding.constructor_error`) fails every creation with
    UNKNOWN_SERVER_ERROR and no message."""
    if not config.authorizer:
        if isinstance(request, DescribeAclsRequest):
            return ApiError(Errors.SECURITY_DISABLED, "No Authorizer is configured on the broker")
        return ApiError(Errors.SECURITY_DISABLED, "No Authorizer is configured.")
    if isinstance(request, CreateAclsRequest) and any(b.constructor_error() for b in _bindings(request)):
        return ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
    return None


def _bindings(request: CreateAclsRequest) -> list[AclBinding]:
    return [
        AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                   c.operation, c.permission_type)
        for c in request.creations
    ]


def create_acls(ctx: OperationContext, request: CreateAclsRequest, version: int) -> ControllerResult:
    """CreateAcls (``AclApis.handleCreateAcls``, ``AclControlManager.createAcls``; rules in
    ``server.controller.acls``): the result is one ApiError or None per creation, in order."""
    bindings = _bindings(request)
    refused: dict[AclBinding, ApiError] = {}
    valid: list[AclBinding] = []
    for binding in bindings:
        if binding.resource_type == CLUSTER and binding.resource_name != CLUSTER_NAME:
            refused[binding] = ApiError(Errors.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        elif not binding.resource_name:
            refused[binding] = ApiError(Errors.INVALID_REQUEST, "Invalid empty resource name")
        else:
            valid.append(binding)
    records, results = ctx.controller.acls.create(valid, ctx.rng, ctx.metadata_version)
    first = {binding: results[i] for i, binding in reversed(list(enumerate(valid)))}
    outcome = [refused[b] if b in refused else first[b] for b in bindings]
    for record, _ in records:
        assert isinstance(record, AccessControlEntryRecord)
        ctx.log.info("creating ACL %s with id %s", AclBinding.from_record(record), record.id)
    return ControllerResult(records, outcome)


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


def delete_acls(ctx: OperationContext, request: DeleteAclsRequest, version: int) -> ControllerResult:
    """DeleteAcls (``AclControlManager.deleteAcls``): per filter, the bindings it matched (all
    removed) or its ApiError."""
    records, results = ctx.controller.acls.delete([_filter(f) for f in request.filters])
    for result in results:
        if not isinstance(result, ApiError):
            for binding in result:
                ctx.log.info("deleting ACL %s", binding)
    return ControllerResult(records, results)


def describe_acls(ctx: OperationContext, request: DescribeAclsRequest, version: int) -> ControllerResult:
    """DescribeAcls (``AclApis.handleDescribeAcls``) from this node's image: the matching
    bindings (none for a filter with an unrecognized code, which matches nothing)."""
    return ControllerResult((), ctx.controller.acls.describe(_filter(request)))


# ---------------------------------------------------------------------- SCRAM (KIP-554), quotas (KIP-546)


def alter_user_scram_credentials(
    ctx: OperationContext, request: AlterUserScramCredentialsRequest, version: int
) -> ControllerResult:
    """AlterUserScramCredentials (``ScramControlManager.alterCredentials``; rules in
    ``server.controller.scram``): the result is ``[(user, ApiError or None)]``."""
    records, results = ctx.controller.scram.alter(request, ctx.metadata_version)
    for record, _ in records:
        ctx.log.info("%s SCRAM credential of user %s (mechanism %d)",
                     "removing" if isinstance(record, RemoveUserScramCredentialRecord) else "setting",
                     record.name, record.mechanism)  # type: ignore[attr-defined]
    return ControllerResult(records, results)


def describe_user_scram_credentials(
    ctx: OperationContext, request: DescribeUserScramCredentialsRequest, version: int
) -> ControllerResult:
    """DescribeUserScramCredentials on a controller: Kafka's controller lists it in ApiVersions
    but has no handler (``ControllerApis.handle``'s default case), so every request fails with
    UNKNOWN_SERVER_ERROR; brokers answer it from their image."""
    return ControllerResult((), ApiError(Errors.UNKNOWN_SERVER_ERROR, None))


def alter_client_quotas(ctx: OperationContext, request: AlterClientQuotasRequest, version: int) -> ControllerResult:
    """AlterClientQuotas (``ClientQuotaControlManager.alterClientQuotas``; rules in
    ``server.controller.client_quotas``): the result is ``[(entity, ApiError or None)]``; with
    ``validate_only`` nothing is written."""
    records, results = ctx.controller.client_quotas.alter(request)
    if request.validate_only:
        return ControllerResult((), results)
    for record, _ in records:
        ctx.log.info("client quota %s", record)
    return ControllerResult(records, results)


# ---------------------------------------------------------------------- delegation tokens (KIP-48)


def _principal_parts(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def create_delegation_token(ctx: OperationContext, request: CreateDelegationTokenRequest, version: int) -> ControllerResult:
    """CreateDelegationToken (``ControllerApis.handleCreateDelegationTokenRequest``, then
    ``DelegationTokenControlManager.createDelegationToken``): the result is ``(error, owner,
    requester, TokenOutcome or None)``."""
    requester = ctx.principal
    owner = requester
    if request.owner_principal_name:
        if request.owner_principal_type is None:  # Kafka's KafkaPrincipal refuses a null type
            raise ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
        owner = f"{request.owner_principal_type}:{request.owner_principal_name}"
    if not ctx.token_requests_allowed:
        return ControllerResult((), (Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester, None))
    if owner != requester and ctx.authorize is not None and not ctx.authorize(CREATE_TOKENS, USER, owner, True):
        return ControllerResult((), (Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester, None))
    records, outcome = ctx.controller.delegation_tokens.create(
        owner=owner, requester=requester, renewers=[f"{r.principal_type}:{r.principal_name}" for r in request.renewers],
        max_lifetime_ms=request.max_lifetime_ms, now_ms=ctx.now_ms, settings=ctx.config.tokens,
        metadata_version=ctx.metadata_version, rng=ctx.rng,
    )
    if outcome.token is not None:
        ctx.log.info("created delegation token %s of %s for %s", outcome.token.token_id, owner, requester)
    return ControllerResult(records, (outcome.error, owner, requester, outcome))


def renew_delegation_token(ctx: OperationContext, request: RenewDelegationTokenRequest, version: int) -> ControllerResult:
    """RenewDelegationToken: the result is a :class:`TokenOutcome`."""
    return _token_change(ctx, ctx.controller.delegation_tokens.renew, request.hmac, request.renew_period_ms)


def expire_delegation_token(ctx: OperationContext, request: ExpireDelegationTokenRequest, version: int) -> ControllerResult:
    """ExpireDelegationToken: the result is a :class:`TokenOutcome`."""
    return _token_change(ctx, ctx.controller.delegation_tokens.expire, request.hmac, request.expiry_time_period_ms)


def _token_change(
    ctx: OperationContext, change: Callable[..., tuple[list[Record], TokenOutcome]], token_hmac: bytes, period_ms: int
) -> ControllerResult:
    """A renewal or expiry: refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (expiry -1) where
    the request layer refuses token requests, else the controller's ``change``."""
    if not ctx.token_requests_allowed:
        return ControllerResult((), TokenOutcome(Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, None, -1))
    records, outcome = change(
        token_hmac_bytes=bytes(token_hmac), period_ms=period_ms, principal=ctx.principal, now_ms=ctx.now_ms,
        settings=ctx.config.tokens, metadata_version=ctx.metadata_version,
    )
    return ControllerResult(records, outcome)


def describe_delegation_token(ctx: OperationContext, request: DescribeDelegationTokenRequest, version: int) -> ControllerResult:
    """DescribeDelegationToken on a controller: listed in ApiVersions but not handled
    (``ControllerApis.handle``'s default case): UNKNOWN_SERVER_ERROR; brokers describe tokens."""
    return ControllerResult((), ApiError(Errors.UNKNOWN_SERVER_ERROR, None))
