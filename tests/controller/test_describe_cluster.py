"""DescribeCluster on a controller listener (``server.controller.describe_cluster``, Kafka's
``ControllerApis.handleDescribeCluster`` and ``AuthHelper.computeDescribeClusterResponse``,
KIP-919)."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from server.controller.controller import ControllerRegistration
from server.controller.describe_cluster import CONTROLLER_ENDPOINT_TYPE, describe_cluster
from tests.controller.fixtures import CLUSTER_ID, controller_at, controller_record

CONTROLLERS = {
    controller_id: ControllerRegistration.from_record(record)
    for controller_id, record in (
        (3002, controller_record(3002, endpoints=(("CONTROLLER", "c2", 9095), ("SSL", "c2", 9195)))),
        (3000, controller_record(3000, endpoints=(("CONTROLLER", "c0", 9093),))),
        (3001, controller_record(3001, endpoints=(("SSL", "c1", 9194),))),
    )
}


def _describe(
    version: int = 1,
    *,
    endpoint_type: int = CONTROLLER_ENDPOINT_TYPE,
    listener: str = "CONTROLLER",
    metadata_version: int | None = 21,
    leader_id: int | None = 3000,
) -> DescribeClusterResponse:
    return describe_cluster(
        DescribeClusterRequest(endpoint_type=endpoint_type),
        version,
        listener,
        cluster_id=CLUSTER_ID,
        metadata_version=metadata_version,
        controllers=CONTROLLERS,
        leader_id=leader_id,
    )


def test_without_a_metadata_version_direct_to_controller_is_unsupported() -> None:
    response = _describe(metadata_version=None)
    assert response.error_code == Errors.UNSUPPORTED_VERSION
    assert response.error_message == (
        "There is no finalized MetadataVersion, so direct-to-controller communication is not supported."
    )
    assert response.brokers == [] and response.cluster_id == ""


@pytest.mark.parametrize("level", [1, 7, 14])
def test_below_3_7_iv0_direct_to_controller_is_unsupported(level: int) -> None:
    response = _describe(metadata_version=level)
    assert response.error_code == Errors.UNSUPPORTED_VERSION
    assert response.error_message == "Direct-to-controller communication is not supported with the current MetadataVersion."


def test_from_3_7_iv0_the_controllers_are_described() -> None:
    response = _describe(metadata_version=15)
    assert (response.error_code, response.error_message) == (Errors.NONE, None)
    assert (response.endpoint_type, response.cluster_id, response.controller_id) == (2, CLUSTER_ID, 3000)


def test_the_metadata_version_is_checked_before_the_endpoint_type() -> None:
    response = _describe(0, endpoint_type=1, metadata_version=14)
    assert response.error_code == Errors.UNSUPPORTED_VERSION


@pytest.mark.parametrize("version", [1, 2])
def test_asking_a_controller_for_brokers_is_a_mismatched_endpoint_type(version: int) -> None:
    response = _describe(version, endpoint_type=1)
    assert response.error_code == Errors.MISMATCHED_ENDPOINT_TYPE
    assert response.error_message == (
        "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
    )
    assert response.brokers == []


def test_at_v0_asking_for_brokers_is_an_invalid_request() -> None:
    response = _describe(0, endpoint_type=1)
    assert response.error_code == Errors.INVALID_REQUEST
    assert response.error_message == (
        "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
    )


@pytest.mark.parametrize("endpoint_type", [0, 3])
def test_an_unknown_endpoint_type_is_unsupported(endpoint_type: int) -> None:
    response = _describe(2, endpoint_type=endpoint_type)
    assert response.error_code == Errors.UNSUPPORTED_ENDPOINT_TYPE
    assert response.error_message == f"Unsupported endpoint type {endpoint_type}"


def test_at_v0_an_unknown_endpoint_type_is_an_invalid_request() -> None:
    response = _describe(0, endpoint_type=-1)
    assert (response.error_code, response.error_message) == (Errors.INVALID_REQUEST, "Unsupported endpoint type -1")


def test_only_controllers_with_an_endpoint_on_the_request_s_listener_are_listed() -> None:
    assert _describe(listener="CONTROLLER").brokers == [
        DescribeClusterBroker(broker_id=3000, host="c0", port=9093, rack=None),
        DescribeClusterBroker(broker_id=3002, host="c2", port=9095, rack=None),
    ]
    assert _describe(listener="SSL", leader_id=3001).brokers == [
        DescribeClusterBroker(broker_id=3001, host="c1", port=9194),
        DescribeClusterBroker(broker_id=3002, host="c2", port=9195),
    ]
    assert _describe(listener="PLAINTEXT", leader_id=None).brokers == []


def test_listed_controllers_are_never_fenced_and_have_no_rack() -> None:
    assert all(b.rack is None and not b.is_fenced for b in _describe().brokers)


def test_without_a_leader_the_controller_id_is_minus_one() -> None:
    response = _describe(leader_id=None)
    assert response.controller_id == -1 and len(response.brokers) == 2


def test_the_leader_is_the_controller_id() -> None:
    assert _describe(leader_id=3002).controller_id == 3002


def test_a_leader_that_is_not_listed_is_not_named() -> None:
    response = _describe(listener="CONTROLLER", leader_id=3001)  # 3001 has no CONTROLLER endpoint
    assert response.controller_id == -1


def test_no_registered_controllers_lists_nobody() -> None:
    response = describe_cluster(
        DescribeClusterRequest(endpoint_type=2), 1, "CONTROLLER", cluster_id="x", metadata_version=21,
        controllers={}, leader_id=None,
    )
    assert (response.error_code, response.cluster_id, response.brokers, response.controller_id) == (
        Errors.NONE, "x", [], -1
    )


def test_the_answer_lists_the_controllers_a_replayed_log_registered() -> None:
    controller = controller_at(
        21, (controller_record(3001, endpoints=(("CONTROLLER", "h1", 1),)), 0), (controller_record(3000), 0)
    )
    response = describe_cluster(
        DescribeClusterRequest(endpoint_type=2), 2, "CONTROLLER", cluster_id=CLUSTER_ID,
        metadata_version=controller.metadata_version, controllers=controller.controllers, leader_id=3001,
    )
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(3000, "localhost", 9093), (3001, "h1", 1)]
    assert response.controller_id == 3001


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_answer_encodes_at_every_version(version: int) -> None:
    response = _describe(version, endpoint_type=2 if version else 1)
    assert DescribeClusterResponse.decode(response.encode(version), version) == response
