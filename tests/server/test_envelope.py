"""Forwarded requests (``server.node.envelope``, Kafka's ``EnvelopeUtils``)."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_response import (
    DescribeQuorumResponse,
    PartitionData,
    TopicData,
)
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.fetch_request import FetchRequest
from messages.protocol import Request, decode_response, encode_request
from server.node.apis import api_versions
from server.node.envelope import FORWARDABLE, envelope_response, open_envelope

# DefaultPrincipalData v0 of User:ANONYMOUS, after its int16 version
PRINCIPAL = b"\x00\x00" + b"\x05User" + b"\x0aANONYMOUS" + b"\x00" + b"\x00"
LOOPBACK = bytes([127, 0, 0, 1])


def _envelope(inner: bytes, principal: bytes | None = PRINCIPAL, address: bytes = LOOPBACK) -> EnvelopeRequest:
    return EnvelopeRequest(request_data=inner, request_principal=principal, client_host_address=address)


def _describe_quorum() -> bytes:
    return encode_request(DescribeQuorumRequest(), 2, 77, "adminclient-1")


def test_a_forwarded_request_is_opened_and_answered_with_its_own_header() -> None:
    forwarded = open_envelope(_envelope(_describe_quorum()), api_versions())
    assert isinstance(forwarded, Request) and isinstance(forwarded.body, DescribeQuorumRequest)
    assert (forwarded.header.correlation_id, forwarded.header.client_id) == (77, "adminclient-1")
    wrapped = envelope_response(forwarded, DescribeQuorumResponse(error_code=Errors.NOT_LEADER_OR_FOLLOWER))
    assert wrapped.error_code == Errors.NONE
    header, response = decode_response(wrapped.response_data, 55, 2)
    assert header.correlation_id == 77 and response.error_code == Errors.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize(
    ("principal", "address", "inner", "error"),
    [
        (None, LOOPBACK, None, Errors.PRINCIPAL_DESERIALIZATION_FAILURE),
        (b"\x00\x01" + PRINCIPAL[2:], LOOPBACK, None, Errors.PRINCIPAL_DESERIALIZATION_FAILURE),
        (PRINCIPAL[:-2], LOOPBACK, None, Errors.PRINCIPAL_DESERIALIZATION_FAILURE),
        (PRINCIPAL, b"\x01\x02\x03", None, Errors.INVALID_REQUEST),
        (PRINCIPAL, LOOPBACK, b"\x00", Errors.UNSUPPORTED_VERSION),  # no header
        (PRINCIPAL, LOOPBACK, encode_request(FetchRequest(), 17, 1, "x"), Errors.INVALID_REQUEST),  # not forwardable
        (PRINCIPAL, LOOPBACK, _describe_quorum()[:-1], Errors.UNSUPPORTED_VERSION),  # truncated body
        (PRINCIPAL, LOOPBACK, _describe_quorum() + b"\x00", Errors.UNSUPPORTED_VERSION),  # trailing bytes
    ],
)
def test_bad_envelopes_get_kafkas_errors(principal: bytes | None, address: bytes, inner: bytes | None, error: Errors) -> None:
    envelope = _envelope(_describe_quorum() if inner is None else inner, principal, address)
    assert open_envelope(envelope, api_versions()) == error


def test_a_forwardable_request_this_node_does_not_serve_is_unsupported() -> None:
    served = {k: v for k, v in api_versions().items() if k != 55}
    assert open_envelope(_envelope(_describe_quorum()), served) == Errors.UNSUPPORTED_VERSION
    assert 55 in FORWARDABLE and 1 not in FORWARDABLE and len(FORWARDABLE) == 21


def test_an_answer_holding_not_controller_goes_back_as_the_envelopes_error() -> None:
    forwarded = open_envelope(_envelope(_describe_quorum()), api_versions())
    assert isinstance(forwarded, Request)
    top = envelope_response(forwarded, DescribeQuorumResponse(error_code=Errors.NOT_CONTROLLER))
    nested = envelope_response(
        forwarded,
        DescribeQuorumResponse(topics=[TopicData(partitions=[PartitionData(error_code=Errors.NOT_CONTROLLER)])]),
    )
    for wrapped in (top, nested):
        assert (wrapped.error_code, wrapped.response_data) == (Errors.NOT_CONTROLLER, None)
