"""The controller's topic, partition and config operations, one function per RPC of Kafka's
``QuorumController``: CreateTopics, DeleteTopics, CreatePartitions, AlterPartition,
AssignReplicasToDirs, ElectLeaders, partition reassignments (KIP-455), (Incremental)AlterConfigs,
DescribeConfigs and AlterClientQuotas (KIP-546), each
``operation(ctx, request, version) -> ControllerResult`` over an
:class:`~server.controller.operation_context.OperationContext`.
"""

from __future__ import annotations

from kwire.errors import Errors
from messages.generated.alter_client_quotas_request import AlterClientQuotasRequest
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from messages.generated.alter_partition_request import AlterPartitionRequest
from messages.generated.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from messages.generated.create_partitions_request import CreatePartitionsRequest
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.describe_configs_request import DescribeConfigsRequest
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from server.controller import alter_partition as partitions
from server.controller import (
    configs,
    elections,
    partition_creation,
    reassignments,
    topic_deletion,
    topics,
)
from server.controller import describe_configs as config_description
from server.controller.operation_context import OperationContext
from server.controller.result import ControllerResult

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
    """DeleteTopics (``server.controller.topic_deletion.delete_topics``), under ``delete.topic.enable``."""
    return ControllerResult(*topic_deletion.delete_topics(
        request, version, image=ctx.image, delete_enabled=ctx.config.delete_topic_enable, authorize=ctx.authorize
    ))


def create_partitions(ctx: OperationContext, request: CreatePartitionsRequest, version: int) -> ControllerResult:
    """CreatePartitions (``server.controller.partition_creation.create_partitions``)."""
    return ControllerResult(*partition_creation.create_partitions(
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




def describe_configs(ctx: OperationContext, request: DescribeConfigsRequest, version: int) -> ControllerResult:
    """DescribeConfigs (``server.controller.describe_configs``), from this node's image, its
    properties and its loggers."""
    view = config_description.NodeConfigView(ctx.config.node_id, ctx.image, ctx.config.static_config, ctx.logger_levels)
    return ControllerResult((), config_description.describe_configs(request, view, ctx.authorize))


# ---------------------------------------------------------------------- client quotas (KIP-546)


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
