"""The controller's cluster operations, one function per RPC of Kafka's ``QuorumController``:
controller and broker registration (KIP-919, KIP-631), heartbeats and fencing, producer id
blocks, feature updates (KIP-584) and DescribeCluster, each
``operation(ctx, request, version) -> ControllerResult`` over an
:class:`~server.controller.operation_context.OperationContext`.
"""

from __future__ import annotations

from functools import partial

from messages.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.controller_registration_request import ControllerRegistrationRequest
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.generated.unregister_controller_request import UnregisterControllerRequest
from messages.generated.update_features_request import UpdateFeaturesRequest
from server.controller import describe_cluster as cluster_description
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.features import ClusterSupport, supported_features, update_features
from server.controller.operation_context import OperationContext
from server.controller.responses import feature_updates
from server.controller.result import ControllerResult
from server.raft.kraft_upgrade import UpgradeRefused

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
        ctx.log.info("%s", exc.failure_message("registerBroker"))
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
