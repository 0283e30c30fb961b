"""What the node advertises and the APIs it answers outside the KRaft core.

* :func:`api_versions`: the ApiVersions table, exactly the RPCs the KRaft core handles (with
  the versions their handlers accept, from ``server.raft.registry``) plus the controller's:
  DescribeCluster, UpdateFeatures, ControllerRegistration, BrokerRegistration,
  BrokerHeartbeat, UnregisterBroker, Envelope, AllocateProducerIds, CreateTopics,
  DeleteTopics, CreatePartitions, AlterPartition, IncrementalAlterConfigs, AlterConfigs,
  AssignReplicasToDirs, ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments
  and DescribeConfigs.
* :func:`supported_features`: the SupportedFeatures of ApiVersions v3+
  (``BrokerFeatures.defaultSupportedFeatures``).
* :func:`describe_cluster`: DescribeCluster on a controller listener
  (``ControllerApis.handleDescribeCluster``, controller-facts §5.4): from metadata.version
  3.7-IV0 on, EndpointType 2, Brokers = the registered controllers (KIP-919) that have an
  endpoint on the listener the request arrived on, ControllerId = the raft leader.
"""

from __future__ import annotations

from collections.abc import Mapping

from kwire.errors import Errors
from messages.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from messages.generated.alter_partition_request import AlterPartitionRequest
from messages.generated.api_versions_response import SupportedFeatureKey
from messages.generated.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import BrokerRegistrationRequest
from messages.generated.controller_registration_request import ControllerRegistrationRequest
from messages.generated.create_partitions_request import CreatePartitionsRequest
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from messages.generated.describe_configs_request import DescribeConfigsRequest
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from messages.generated.unregister_broker_request import UnregisterBrokerRequest
from messages.generated.update_features_request import UpdateFeaturesRequest
from server.controller.controller import ControllerRegistration
from server.controller.features import CONTROLLER_REGISTRATION_LEVEL
from server.raft import registry
from storage.features import (
    FEATURES,
    METADATA_VERSION_FEATURE,
    METADATA_VERSIONS,
)

__all__ = [
    "CONTROLLER_OPS",
    "CONTROLLER_ENDPOINT_TYPE",
    "MAX_METADATA_VERSION_LEVEL",
    "api_versions",
    "describe_cluster",
    "supported_features",
]

CONTROLLER_ENDPOINT_TYPE = 2
"""DescribeCluster's EndpointType for controllers (``EndpointType.CONTROLLER``)."""

MAX_METADATA_VERSION_LEVEL = max(mv.level for mv in METADATA_VERSIONS if mv.production)
"""The newest production metadata.version kwire can format a cluster with."""


CONTROLLER_OPS = (
    ControllerRegistrationRequest,
    UpdateFeaturesRequest,
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    UnregisterBrokerRequest,
    AllocateProducerIdsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    CreatePartitionsRequest,
    AlterPartitionRequest,
    IncrementalAlterConfigsRequest,
    AlterConfigsRequest,
    AssignReplicasToDirsRequest,
    ElectLeadersRequest,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
"""Requests the active controller answers from its state, one at a time, each after the writes
before it are committed (``server.node.controller_requests``)."""


def api_versions() -> dict[int, tuple[int, int]]:
    """``{api key: (min version, max version)}`` the node advertises besides ApiVersions: the
    core's registry (``server.raft.registry.DEFAULT``) plus the controller's RPCs, each with
    the union of the pinned releases' versions (controller-facts §7.1)."""
    versions = registry.DEFAULT.advertised_versions()
    for request in (DescribeClusterRequest, DescribeConfigsRequest, EnvelopeRequest, *CONTROLLER_OPS):
        assert request.API_KEY is not None
        versions[request.API_KEY] = (request.LOWEST_VERSION, request.HIGHEST_VERSION)
    return versions


def supported_features() -> list[SupportedFeatureKey]:
    """``BrokerFeatures.defaultSupportedFeatures``, sorted by name: metadata.version 1 up to
    the newest production level, and every feature ``kwire storage format`` can finalize
    (kraft.version, group, transaction, share, streams, eligible.leader.replicas) from 0 to its
    newest level, so a cluster formatted with them accepts this node. Only kraft.version changes
    what the quorum layer does; the others are levels the controller keeps, not behaviour of
    this node."""
    keys = [
        SupportedFeatureKey(name=name, min_version=0, max_version=max(v.level for v in versions))
        for name, versions in FEATURES.items()
    ]
    keys.append(
        SupportedFeatureKey(
            name=METADATA_VERSION_FEATURE, min_version=1, max_version=MAX_METADATA_VERSION_LEVEL
        )
    )
    return sorted(keys, key=lambda k: k.name)


def describe_cluster(
    request: DescribeClusterRequest,
    version: int,
    listener: str,
    *,
    cluster_id: str,
    metadata_version: int | None,
    controllers: Mapping[int, ControllerRegistration],
    leader_id: int | None,
) -> DescribeClusterResponse:
    """The DescribeCluster response of a controller at ``metadata_version`` (None before one is
    finalized) whose registered controllers are ``controllers`` and whose raft leader is
    ``leader_id``, for a request (at ``version``) that arrived on ``listener``. Before 3.7-IV0,
    or with no metadata.version, UNSUPPORTED_VERSION (direct-to-controller clients need KIP-919
    registrations); a request for broker endpoints gets MISMATCHED_ENDPOINT_TYPE (v1+) or
    INVALID_REQUEST (v0), as ``AuthHelper.computeDescribeClusterResponse`` on a controller."""
    if metadata_version is None:
        return DescribeClusterResponse(
            error_code=Errors.UNSUPPORTED_VERSION,
            error_message=(
                "There is no finalized MetadataVersion, so direct-to-controller communication is not supported."
            ),
        )
    if metadata_version < CONTROLLER_REGISTRATION_LEVEL:
        return DescribeClusterResponse(
            error_code=Errors.UNSUPPORTED_VERSION,
            error_message="Direct-to-controller communication is not supported with the current MetadataVersion.",
        )
    if request.endpoint_type != CONTROLLER_ENDPOINT_TYPE:
        error = Errors.MISMATCHED_ENDPOINT_TYPE if version >= 1 else Errors.INVALID_REQUEST
        return DescribeClusterResponse(
            error_code=error,
            error_message=(
                "The request was sent to an endpoint of type CONTROLLER, but we wanted an "
                "endpoint of type BROKER"
            ),
        )
    brokers = []
    for controller_id in sorted(controllers):
        endpoint = next((e for e in controllers[controller_id].endpoints if e[0] == listener), None)
        if endpoint is not None:
            brokers.append(DescribeClusterBroker(broker_id=controller_id, host=endpoint[1], port=endpoint[2]))
    return DescribeClusterResponse(
        endpoint_type=CONTROLLER_ENDPOINT_TYPE,
        cluster_id=cluster_id,
        controller_id=leader_id if leader_id is not None else -1,
        brokers=brokers,
    )
