"""DescribeCluster on a controller listener (``ControllerApis.handleDescribeCluster`` and
``AuthHelper.computeDescribeClusterResponse``, KIP-919), answered by any controller from its
image.

From metadata.version 3.7-IV0 on: EndpointType 2 (controller), Brokers = the registered
controllers that have an endpoint on the listener the request arrived on, ControllerId = the
raft leader if Brokers lists it, else -1 (``computeDescribeClusterResponse`` looks the leader up
in the collection it answers). Before 3.7-IV0, or with no metadata.version, UNSUPPORTED_VERSION
(direct-to-controller clients need KIP-919 registrations). Then, as
``computeDescribeClusterResponse`` checks the EndpointType: an id that is neither BROKER (1) nor
CONTROLLER (2) gets UNSUPPORTED_ENDPOINT_TYPE (v1+) or INVALID_REQUEST (v0) with "Unsupported
endpoint type N"; a request for broker endpoints gets MISMATCHED_ENDPOINT_TYPE (v1+) or
INVALID_REQUEST (v0).
"""

from __future__ import annotations

from collections.abc import Mapping

from kwire.errors import Errors
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from server.controller.controller import ControllerRegistration
from server.controller.features import CONTROLLER_REGISTRATION_LEVEL

__all__ = ["CONTROLLER_ENDPOINT_TYPE", "describe_cluster"]

CONTROLLER_ENDPOINT_TYPE = 2
"""DescribeCluster's EndpointType for controllers (``EndpointType.CONTROLLER``)."""

_ENDPOINT_TYPES = {1: "BROKER", CONTROLLER_ENDPOINT_TYPE: "CONTROLLER"}
"""The known EndpointType ids and their names (``EndpointType.fromId``, ``toString``)."""


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
    ``leader_id``, for a request (at ``version``) that arrived on ``listener`` (module
    docstring)."""
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
    requested = _ENDPOINT_TYPES.get(request.endpoint_type)
    if requested is None:
        # EndpointType.fromId answers UNKNOWN for any id but BROKER's and CONTROLLER's
        return DescribeClusterResponse(
            error_code=Errors.UNSUPPORTED_ENDPOINT_TYPE if version >= 1 else Errors.INVALID_REQUEST,
            error_message=f"Unsupported endpoint type {request.endpoint_type}",
        )
    if request.endpoint_type != CONTROLLER_ENDPOINT_TYPE:
        return DescribeClusterResponse(
            error_code=Errors.MISMATCHED_ENDPOINT_TYPE if version >= 1 else Errors.INVALID_REQUEST,
            error_message=(
                f"The request was sent to an endpoint of type {_ENDPOINT_TYPES[CONTROLLER_ENDPOINT_TYPE]}, "
                f"but we wanted an endpoint of type {requested}"
            ),
        )
    brokers = []
    for controller_id in sorted(controllers):
        endpoint = next((e for e in controllers[controller_id].endpoints if e[0] == listener), None)
        if endpoint is not None:
            brokers.append(DescribeClusterBroker(broker_id=controller_id, host=endpoint[1], port=endpoint[2]))
    controller_id = -1  # no leader, or one the answer does not list
    if leader_id is not None and any(b.broker_id == leader_id for b in brokers):
        controller_id = leader_id
    return DescribeClusterResponse(
        endpoint_type=CONTROLLER_ENDPOINT_TYPE,
        cluster_id=cluster_id,
        controller_id=controller_id,
        brokers=brokers,
    )
