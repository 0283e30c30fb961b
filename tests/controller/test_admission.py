"""Forwarded requests (``server.controller.admission``, Kafka's ``ControllerApis`` and ``EnvelopeUtils``)."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from messages.generated.create_delegation_token_request import CreateDelegationTokenRequest
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_response import (
    DescribeQuorumResponse,
    PartitionData,
    TopicData,
)
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.envelope_response import EnvelopeResponse
from messages.generated.fetch_request import FetchRequest
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_authenticate_response import SaslAuthenticateResponse
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from messages.generated.sasl_handshake_response import SaslHandshakeResponse
from messages.generated.vote_request import VoteRequest
from messages.protocol import Request, decode_response, encode_request
from server.controller.acls import ALLOW, CLUSTER, CLUSTER_NAME, LITERAL, AclBinding
from server.controller.admission import (
    FORWARDABLE,
    Admission,
    Caller,
    Forwarded,
    Malformed,
    Refused,
    ToController,
    ToRaft,
    allow_token_requests,
    envelope_response,
    open_envelope,
)
from server.controller.admission import served_api_versions as api_versions
from server.controller.authorizer import CLUSTER_ACTION, DESCRIBE, StandardAuthorizer
from server.controller.operation_context import ControllerConfig
from tests.controller.fixtures import RecordingLog

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


def _create_topics() -> bytes:
    return encode_request(CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=1,
                                                                     replication_factor=1)]), 7, 78, "adminclient-1")


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


# ---------------------------------------------------------------------------- admission



def _admission(*bindings: AclBinding, authorizer: bool = True, loaded: bool = True,
               super_users: frozenset[str] = frozenset()) -> tuple[Admission, RecordingLog]:
    config = ControllerConfig(node_id=1, cluster_id="admission-test", static_config={}, authorizer=authorizer,
                              super_users=super_users)
    standard = StandardAuthorizer(config.super_users, config.allow_everyone_if_no_acl_found)
    standard.loaded = loaded
    log = RecordingLog()
    return Admission(config, standard, lambda: bindings, log), log


def _allow(principal: str, operation: int) -> AclBinding:
    return AclBinding(CLUSTER, CLUSTER_NAME, LITERAL, principal, "*", operation, ALLOW)


BROKER = Caller("User:broker", "10.0.0.5", "CONTROLLER", "SASL_PLAINTEXT")


@pytest.mark.parametrize(
    ("caller", "allowed"),
    [
        (Caller("User:ANONYMOUS", "h", "CONTROLLER", "PLAINTEXT"), False),  # no authenticated channel
        (Caller("User:ANONYMOUS", "h", "CONTROLLER", "SSL"), False),  # TLS without a client certificate
        (Caller("User:alice", "h", "CONTROLLER", "SSL"), True),  # a client certificate
        (Caller("User:alice", "h", "CONTROLLER", "SASL_PLAINTEXT"), True),
        (Caller("User:alice", "h", "CONTROLLER", "SASL_SSL"), True),
        (Caller("User:alice", "h", "CONTROLLER", "SASL_SSL", token_authenticated=True), False),  # logged in with a token
        (Caller("User:ANONYMOUS", "h", "CONTROLLER", "PLAINTEXT", forwarded=True), True),  # the broker checked it
        (Caller("User:alice", "h", "CONTROLLER", "PLAINTEXT", token_authenticated=True, forwarded=True), False),
    ],
)
def test_token_requests_follow_allow_token_requests(caller: Caller, allowed: bool) -> None:
    assert allow_token_requests(caller) is allowed
    admission, _ = _admission(authorizer=False)
    assert admission.admit(CreateDelegationTokenRequest(), 3, caller) == ToController(allowed)


def test_stray_sasl_requests_get_illegal_sasl_state() -> None:
    admission, _ = _admission(authorizer=False)
    handshake = admission.admit(SaslHandshakeRequest(mechanism="PLAIN"), 1, BROKER)
    authenticate = admission.admit(SaslAuthenticateRequest(auth_bytes=b"x"), 2, BROKER)
    assert isinstance(handshake, Refused) and isinstance(authenticate, Refused)
    assert handshake.response == SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])
    assert isinstance(authenticate.response, SaslAuthenticateResponse)
    assert authenticate.response.error_code == Errors.ILLEGAL_SASL_STATE
    assert authenticate.response.error_message == "SaslAuthenticate request received after successful authentication"


def test_an_envelope_is_opened_as_the_forwarded_client_with_cluster_action() -> None:
    admission, log = _admission(_allow("User:broker", CLUSTER_ACTION))
    alice = b"\x00\x00" + b"\x05User" + b"\x06alice" + b"\x01" + b"\x00"  # logged in with a token
    verdict = admission.admit(_envelope(_describe_quorum(), alice, bytes([10, 1, 2, 3])), 0, BROKER)
    assert isinstance(verdict, Forwarded)
    assert (verdict.principal, verdict.client_host, verdict.token_authenticated) == ("User:alice", "10.1.2.3", True)
    assert isinstance(verdict.request.body, DescribeQuorumRequest) and log.lines == []
    wrapped = verdict.answer(DescribeQuorumResponse(error_code=Errors.NONE))
    assert isinstance(wrapped, EnvelopeResponse) and wrapped.error_code == Errors.NONE
    assert decode_response(wrapped.response_data, 55, 2)[0].correlation_id == 77


def test_an_envelope_without_cluster_action_is_refused_and_audited() -> None:
    admission, log = _admission(_allow("User:broker", DESCRIBE))
    verdict = admission.admit(_envelope(_describe_quorum()), 0, BROKER)
    assert verdict == Refused(EnvelopeResponse(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED))
    assert log.lines == [
        "Principal = User:broker is Denied operation = CLUSTER_ACTION from host = 10.0.0.5 on resource = "
        "Cluster:LITERAL:kafka-cluster for request = Envelope with resourceRefCount = 1 based on rule DefaultDeny"
    ]
    # authorized first, opened after: a broken envelope from a refused broker is still a refusal
    assert admission.admit(_envelope(b"\x00"), 0, BROKER) == verdict


def test_a_broken_envelope_from_an_allowed_broker_gets_its_envelope_error() -> None:
    admission, _ = _admission(authorizer=False)
    assert admission.admit(_envelope(_describe_quorum(), None), 0, BROKER) == Refused(
        EnvelopeResponse(error_code=Errors.PRINCIPAL_DESERIALIZATION_FAILURE))


def test_raft_rpcs_need_their_cluster_operation() -> None:
    admission, log = _admission(_allow("User:broker", CLUSTER_ACTION))
    assert admission.admit(FetchRequest(), 17, BROKER) == ToRaft()
    refused = admission.admit(DescribeQuorumRequest(), 2, BROKER)
    assert refused == Refused(DescribeQuorumResponse(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                                                     error_message="Cluster authorization failed."))
    assert "operation = DESCRIBE" in log.lines[-1] and "for request = DescribeQuorum" in log.lines[-1]
    not_loaded, _ = _admission(loaded=False, super_users=frozenset({"User:admin"}))
    assert isinstance(not_loaded.admit(VoteRequest(), 2, BROKER), Refused)
    assert not_loaded.admit(VoteRequest(), 2, Caller("User:admin", "h")) == ToRaft()
    assert _admission(authorizer=False)[0].admit(VoteRequest(), 2, BROKER) == ToRaft()


def test_a_malformed_acl_request_closes_the_connection() -> None:
    admission, _ = _admission(authorizer=False)
    verdict = admission.admit(DescribeAclsRequest(resource_type_filter=0), 3, BROKER)
    assert isinstance(verdict, Malformed) and verdict.reason
    assert admission.admit(DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=3, operation=1,
                                               permission_type=1), 3, BROKER) == ToController(True)
