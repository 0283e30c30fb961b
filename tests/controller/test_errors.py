"""The refusal of a controller operation (``server.controller.errors.ApiError``) and the line
Kafka's ``QuorumController`` logs for it."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from server.controller.errors import ApiError


@pytest.mark.parametrize(
    ("error", "name"),
    [
        (Errors.UNSUPPORTED_VERSION, "UnsupportedVersionException"),
        (Errors.INVALID_REGISTRATION, "InvalidRegistrationException"),
        (Errors.INCONSISTENT_CLUSTER_ID, "InconsistentClusterIdException"),
        (Errors.DUPLICATE_BROKER_REGISTRATION, "DuplicateBrokerRegistrationException"),
        (Errors.BROKER_ID_NOT_REGISTERED, "BrokerIdNotRegisteredException"),
    ],
)
def test_the_exception_name_is_kafkas_for_the_registration_refusals(error: Errors, name: str) -> None:
    assert ApiError(error, "x").exception_name == name


def test_the_failure_line_is_quorum_controllers_without_the_time() -> None:
    refused = ApiError(Errors.INVALID_REGISTRATION, "No directories specified in request")
    assert refused.failure_message("registerBroker") == (
        "registerBroker: event failed with InvalidRegistrationException. "
        "Exception message: No directories specified in request"
    )
    # an exception without a message ends at the name, as EventHandlerExceptionInfo writes it
    assert ApiError(Errors.NOT_CONTROLLER).failure_message("registerBroker") == (
        "registerBroker: event failed with NotControllerException."
    )
