"""What the node advertises and the one API it answers itself.

* :func:`api_versions`: the ApiVersions table, exactly the RPCs the KRaft core handles (with
  the versions their handlers accept, from ``server.raft.registry``) plus DescribeCluster.
* :func:`supported_features`: the SupportedFeatures of ApiVersions v3+
  (``BrokerFeatures.defaultSupportedFeatures``).
* :func:`describe_cluster`: DescribeCluster on a controller listener
  (``ControllerApis.handleDescribeCluster``, kraft-facts §1.5): EndpointType 2, Brokers = the
  voters that have an endpoint on the listener the request arrived on, ControllerId = the
  leader if it is among them, else -1.
"""

from __future__ import annotations

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from messages.generated.api_versions_response import SupportedFeatureKey
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from server.raft import registry
from server.raft.types import VoterSet
from storage.bootstrap import FEATURES, METADATA_VERSION_FEATURE, METADATA_VERSIONS

__all__ = [
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


def api_versions() -> dict[int, tuple[int, int]]:
    """``{api key: (min version, max version)}`` the node advertises besides ApiVersions: the
    core's registry (``server.raft.registry.DEFAULT``) plus DescribeCluster."""
    versions = registry.DEFAULT.advertised_versions()
    versions[int(ApiKey.DESCRIBE_CLUSTER)] = (
        DescribeClusterRequest.LOWEST_VERSION,
        DescribeClusterRequest.HIGHEST_VERSION,
    )
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
    voters: VoterSet,
    leader_id: int | None,
) -> DescribeClusterResponse:
    """The DescribeCluster response of a controller whose voter set is ``voters`` and whose
    known leader is ``leader_id``, for a request (at ``version``) that arrived on ``listener``.
    A request for broker endpoints gets MISMATCHED_ENDPOINT_TYPE (v1+) or INVALID_REQUEST (v0),
    as ``AuthHelper.computeDescribeClusterResponse`` on a controller."""
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
    for voter in voters.voters:
        endpoint = voter.endpoint(listener)
        if endpoint is not None:
            brokers.append(
                DescribeClusterBroker(broker_id=voter.key.id, host=endpoint.host, port=endpoint.port)
            )
    listed = {b.broker_id for b in brokers}
    return DescribeClusterResponse(
        endpoint_type=CONTROLLER_ENDPOINT_TYPE,
        cluster_id=cluster_id,
        controller_id=leader_id if leader_id is not None and leader_id in listed else -1,
        brokers=brokers,
    )
