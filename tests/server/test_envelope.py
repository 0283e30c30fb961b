"""Forwarded requests (``server.node.envelope``, Kafka's ``EnvelopeUtils``)."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.create_topics_response import CreatableTopicResult, CreateTopicsResponse
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


def _create_topics() -> bytes:
    return encode_request(CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=1,
                                                                     replication_factor=1)]), 7, 78, "adminclient-1")


def test_a_forwarded_request_is_opened_and_answered_with_its_own_header() -> None:
    forwarded = open_envelope(_envelope(_describe_quorum()), api_versions())
    assert isinstance(forwarded, Request) and isinstance(forwarded.body, DescribeQuorumRequest)
    assert (forwarded.header.correlation_id, forwarded.header.client_id) == (77, "adminclient-1")
    wrapped = envelope_response(forwarded, DescribeQuorumResponse(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED))
    assert wrapped.error_code == Errors.NONE
    header, response = decode_response(wrapped.response_data, 55, 2)
    assert header.correlation_id == 77 and response.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED


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
    """Kafka's ``shouldReturnNotController``: NOT_CONTROLLER anywhere in an answer, and for
    DescribeQuorum (which a controller that does not lead answers with NOT_LEADER_OR_FOLLOWER)
    that error instead, so that the broker looks for the active controller again."""
    forwarded = open_envelope(_envelope(_create_topics()), api_versions())
    assert isinstance(forwarded, Request)
    top = envelope_response(forwarded, CreateTopicsResponse(topics=[CreatableTopicResult(
        name="t", error_code=Errors.NOT_CONTROLLER)]))
    assert (top.error_code, top.response_data) == (Errors.NOT_CONTROLLER, None)
    kept = envelope_response(forwarded, CreateTopicsResponse(topics=[CreatableTopicResult(
        name="t", error_code=Errors.NOT_LEADER_OR_FOLLOWER)]))
    assert kept.error_code == Errors.NONE and kept.response_data is not None
    quorum = open_envelope(_envelope(_describe_quorum()), api_versions())
    assert isinstance(quorum, Request)
    top = envelope_response(quorum, DescribeQuorumResponse(error_code=Errors.NOT_LEADER_OR_FOLLOWER))
    nested = envelope_response(
        quorum,
        DescribeQuorumResponse(topics=[TopicData(partitions=[PartitionData(error_code=Errors.NOT_LEADER_OR_FOLLOWER)])]),
    )
    for wrapped in (top, nested):
        assert (wrapped.error_code, wrapped.response_data) == (Errors.NOT_CONTROLLER, None)
    kept = envelope_response(quorum, DescribeQuorumResponse(error_code=Errors.NOT_CONTROLLER))
    assert kept.error_code == Errors.NONE  # Kafka lifts only NOT_LEADER_OR_FOLLOWER for DescribeQuorum
