"""Request admission: everything a request meets on a controller before its operation runs
(Kafka's ``ControllerApis``, ahead of ``QuorumController``). No I/O: the node hands each decoded
request to :meth:`Admission.admit` and moves bytes by the verdict; the host asks
:meth:`Admission.refusal` and :meth:`Admission.resource_authorizer` when it runs a controller
RPC.

What a request meets, in this order (``ControllerApis.handle``):

1. **Stray SASL** (``SaslAuthenticator``): a SaslHandshake or SaslAuthenticate that reaches a
   controller is one sent after authentication, or on a listener without SASL: ILLEGAL_SASL_STATE.
2. **Envelope** (key 58, KIP-590; ``ControllerApis.handleEnvelopeRequest``, ``EnvelopeUtils``):
   the forwarding broker needs CLUSTER_ACTION on the cluster (else
   CLUSTER_AUTHORIZATION_FAILED, audited as ``Envelope``); then the envelope is opened
   (:func:`open_envelope`) and its request is admitted again as the forwarded client's, from
   step 1. Its answer goes back wrapped (:func:`envelope_response`).
3. **Controller RPCs** (``server.controller.registry``): a body Kafka's request class refuses to
   parse (the entry's ``malformed``) closes the connection; otherwise the request goes to the
   host with the ``allowTokenRequests`` verdict (:func:`allow_token_requests`). When it runs,
   :meth:`Admission.refusal` applies the cluster operation its entry needs
   (``authorizeClusterOperation``) and the entry's ``check``; the operation itself decides on
   resources through :meth:`Admission.resource_authorizer`.
4. **Raft RPCs** (``ControllerApis.handleRaftRequest``): Fetch, FetchSnapshot, Vote,
   BeginQuorumEpoch, EndQuorumEpoch and UpdateRaftVoter need CLUSTER_ACTION, DescribeQuorum
   DESCRIBE, AddRaftVoter and RemoveRaftVoter ALTER (:data:`RAFT_OPERATIONS`); a refusal is the
   request's ``getErrorResponse`` with CLUSTER_AUTHORIZATION_FAILED at the top
   (:func:`raft_refusal`), DescribeQuorum and the voter changes with Kafka's default message,
   "Cluster authorization failed.".

Without ``authorizer.class.name`` every authorization passes. Before the ACLs are loaded only
super users pass: a controller RPC gets UNKNOWN_SERVER_ERROR (``AuthorizerNotReadyException``),
the others the refusal above.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from kwire.wire import INT16, DecodeError, read_compact_bytes, read_unknown_tagged
from messages.generated.add_raft_voter_request import AddRaftVoterRequest
from messages.generated.add_raft_voter_response import AddRaftVoterResponse
from messages.generated.begin_quorum_epoch_request import BeginQuorumEpochRequest
from messages.generated.begin_quorum_epoch_response import BeginQuorumEpochResponse
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_response import DescribeQuorumResponse
from messages.generated.end_quorum_epoch_request import EndQuorumEpochRequest
from messages.generated.end_quorum_epoch_response import EndQuorumEpochResponse
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.envelope_response import EnvelopeResponse
from messages.generated.fetch_request import FetchRequest
from messages.generated.fetch_response import FetchResponse
from messages.generated.fetch_snapshot_request import FetchSnapshotRequest
from messages.generated.fetch_snapshot_response import FetchSnapshotResponse
from messages.generated.remove_raft_voter_request import RemoveRaftVoterRequest
from messages.generated.remove_raft_voter_response import RemoveRaftVoterResponse
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_authenticate_response import SaslAuthenticateResponse
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from messages.generated.sasl_handshake_response import SaslHandshakeResponse
from messages.generated.update_raft_voter_request import UpdateRaftVoterRequest
from messages.generated.update_raft_voter_response import UpdateRaftVoterResponse
from messages.generated.vote_request import VoteRequest
from messages.generated.vote_response import VoteResponse
from messages.protocol import (
    REQUESTS,
    Request,
    UnknownApiError,
    decode_request_header,
    encode_response,
)
from messages.runtime import Message
from server.controller import registry
from server.controller.acls import ACL_OPERATIONS, CLUSTER, CLUSTER_NAME, AclBinding
from server.controller.authorizer import (
    ALTER,
    CLUSTER_ACTION,
    DESCRIBE,
    Authorize,
    StandardAuthorizer,
    audit_line,
)
from server.controller.errors import ApiError
from server.controller.operation_context import ControllerConfig, ControllerLog
from server.raft import registry as raft_registry

if TYPE_CHECKING:
    from server.controller.registry import ControllerApi
    from server.controller.request_runner import ControllerRequest

__all__ = [
    "FORWARDABLE",
    "RAFT_OPERATIONS",
    "Admission",
    "Caller",
    "Forwarded",
    "Malformed",
    "Refused",
    "ToController",
    "ToRaft",
    "Verdict",
    "allow_token_requests",
    "envelope_response",
    "forwarded_client",
    "open_envelope",
    "raft_refusal",
    "served_api_versions",
]

_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED
_DENIED_MESSAGE = "Cluster authorization failed."

# ---------------------------------------------------------------------------- verdicts


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request and over what (Kafka's ``RequestContext``): ``principal``
    (``Type:name``), ``client_host`` (the address authorization matches: the client's inside an
    Envelope), the ``listener_name`` it arrived on and that listener's ``security_protocol``
    (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``); ``token_authenticated``: the
    principal logged in with a delegation token; ``forwarded``: it came inside an Envelope."""

    principal: str = "User:ANONYMOUS"
    client_host: str = ""
    listener_name: str = ""
    security_protocol: str = "PLAINTEXT"
    token_authenticated: bool = False
    forwarded: bool = False


@dataclass(frozen=True, slots=True)
class Refused:
    """Answer ``response`` at once; the request goes no further."""

    response: Message


@dataclass(frozen=True, slots=True)
class Malformed:
    """A body Kafka's request class refuses to parse: close the connection (``reason`` for
    the log), as Kafka's network layer does."""

    reason: str


@dataclass(frozen=True, slots=True)
class Forwarded:
    """An Envelope opened: admit ``request`` again as sent by the forwarded client (the
    caller's principal, host and token flag replaced by these), and answer the envelope with
    :meth:`answer` of the forwarded request's answer."""

    request: Request
    principal: str
    client_host: str
    token_authenticated: bool

    def answer(self, response: Message) -> Message:
        """The envelope's answer carrying ``response`` (:func:`envelope_response`)."""
        return envelope_response(self.request, response)


@dataclass(frozen=True, slots=True)
class ToController:
    """A controller RPC for the host (``QuorumController.request``), with the
    ``allowTokenRequests`` verdict its ``ControllerRequest`` carries."""

    token_requests_allowed: bool


@dataclass(frozen=True, slots=True)
class ToRaft:
    """A raft RPC (or any other request) for the KRaft core."""


Verdict = Refused | Malformed | Forwarded | ToController | ToRaft
"""What :meth:`Admission.admit` decides."""

_TO_RAFT = ToRaft()

# ---------------------------------------------------------------------------- the policies


def allow_token_requests(caller: Caller) -> bool:
    """``ControllerApis.allowTokenRequests``: delegation tokens are refused to a principal that
    logged in with a token; a request sent directly (not forwarded) needs an authenticated
    channel: SASL, or SSL with a client certificate (a principal other than
    ``User:ANONYMOUS``). A forwarded request was checked by the broker that forwarded it."""
    if caller.token_authenticated:
        return False
    if caller.forwarded:
        return True
    protocol = caller.security_protocol
    return protocol != "PLAINTEXT" and not (protocol == "SSL" and caller.principal == "User:ANONYMOUS")


def served_api_versions() -> dict[int, tuple[int, int]]:
    """``{api key: (min version, max version)}`` a controller serves besides ApiVersions: the
    raft RPCs (``server.raft.registry``), the controller RPCs (``server.controller.registry``),
    Envelope, SaslHandshake and SaslAuthenticate, each with the versions its handler accepts."""
    versions = raft_registry.DEFAULT.advertised_versions()
    versions.update(registry.advertised_versions())
    for message in (EnvelopeRequest, SaslHandshakeRequest, SaslAuthenticateRequest):
        assert message.API_KEY is not None
        versions[message.API_KEY] = (message.LOWEST_VERSION, message.HIGHEST_VERSION)
    return versions


RAFT_OPERATIONS: dict[type[Message], int] = {
    FetchRequest: CLUSTER_ACTION,
    FetchSnapshotRequest: CLUSTER_ACTION,
    VoteRequest: CLUSTER_ACTION,
    BeginQuorumEpochRequest: CLUSTER_ACTION,
    EndQuorumEpochRequest: CLUSTER_ACTION,
    UpdateRaftVoterRequest: CLUSTER_ACTION,
    DescribeQuorumRequest: DESCRIBE,
    AddRaftVoterRequest: ALTER,
    RemoveRaftVoterRequest: ALTER,
}
"""The operation on the cluster each raft RPC needs."""


def raft_refusal(request: Message) -> Message:
    """The answer refusing ``request`` (a raft RPC of :data:`RAFT_OPERATIONS`)."""
    if isinstance(request, FetchRequest):
        return FetchResponse(error_code=_DENIED, session_id=0, responses=[])
    if isinstance(request, FetchSnapshotRequest):
        return FetchSnapshotResponse(error_code=_DENIED)
    if isinstance(request, VoteRequest):
        return VoteResponse(error_code=_DENIED)
    if isinstance(request, BeginQuorumEpochRequest):
        return BeginQuorumEpochResponse(error_code=_DENIED)
    if isinstance(request, EndQuorumEpochRequest):
        return EndQuorumEpochResponse(error_code=_DENIED)
    if isinstance(request, UpdateRaftVoterRequest):
        return UpdateRaftVoterResponse(error_code=_DENIED)
    if isinstance(request, DescribeQuorumRequest):
        return DescribeQuorumResponse(error_code=_DENIED, error_message=_DENIED_MESSAGE)
    if isinstance(request, AddRaftVoterRequest):
        return AddRaftVoterResponse(error_code=_DENIED, error_message=_DENIED_MESSAGE)
    assert isinstance(request, RemoveRaftVoterRequest), type(request).__name__
    return RemoveRaftVoterResponse(error_code=_DENIED, error_message=_DENIED_MESSAGE)


# ---------------------------------------------------------------------------- Envelope

FORWARDABLE = frozenset(
    int(k)
    for k in (
        ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.ALTER_CONFIGS,
        ApiKey.CREATE_PARTITIONS, ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
        ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.ELECT_LEADERS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.ALTER_CLIENT_QUOTAS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_QUORUM, ApiKey.UPDATE_FEATURES,
        ApiKey.UNREGISTER_BROKER, ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER,
    )
)
"""``ApiKeys.forwardable`` (the same set in 3.9.2 and 4.4.0)."""


def _check_principal(data: bytes | None) -> tuple[str, bool]:
    """``DefaultKafkaPrincipalBuilder.deserialize``: the principal as ``Type:name`` and whether
    it logged in with a delegation token; raises DecodeError unless ``data`` is a version-0
    ``DefaultPrincipalData`` (int16 version 0, then type, name, token flag and tagged fields)."""
    if data is None or len(data) < 2:
        raise DecodeError("no principal")
    (version,) = INT16.unpack_from(data, 0)
    if version != 0:
        raise DecodeError(f"principal data version {version}")
    kind, pos = read_compact_bytes(data, 2)
    name, pos = read_compact_bytes(data, pos)
    text = f"{kind.decode('utf-8')}:{name.decode('utf-8')}"
    if pos >= len(data) or data[pos] not in (0, 1):
        raise DecodeError("no token flag")
    token = data[pos] == 1
    _, pos = read_unknown_tagged(data, pos + 1)
    if pos != len(data):
        raise DecodeError(f"{len(data) - pos} trailing bytes after the principal")
    return text, token


def forwarded_client(envelope: EnvelopeRequest) -> tuple[str, str, bool]:
    """The forwarded client's principal (``Type:name``), host address (as Java's
    ``InetAddress.getHostAddress`` writes it) and whether it logged in with a delegation token,
    of an envelope :func:`open_envelope` accepted: the inner request is authorized as them
    (``EnvelopeUtils``)."""
    principal, token = _check_principal(envelope.request_principal)
    address = ipaddress.ip_address(bytes(envelope.client_host_address))
    if address.version == 6:
        host = ":".join(f"{int(part, 16):x}" for part in address.exploded.split(":"))
    else:
        host = str(address)
    return principal, host, token


def open_envelope(envelope: EnvelopeRequest, served: Mapping[int, tuple[int, int]]) -> Request | Errors:
    """The forwarded request of ``envelope`` (its header, header version and body), or the
    envelope-level error, checked in Kafka's order; ``served`` is the node's ApiVersions table
    (api key -> (min, max)):

    1. RequestPrincipal not a serialized ``DefaultPrincipalData`` ->
       PRINCIPAL_DESERIALIZATION_FAILURE;
    2. ClientHostAddress not 4 or 16 bytes -> INVALID_REQUEST;
    3. a request header that does not parse -> UNSUPPORTED_VERSION;
    4. an API that brokers never forward (:data:`FORWARDABLE`) -> INVALID_REQUEST;
    5. a body that does not parse at its version, or a version this node does not serve ->
       UNSUPPORTED_VERSION.
    """
    try:
        _check_principal(envelope.request_principal)
    except (DecodeError, UnicodeDecodeError):
        return Errors.PRINCIPAL_DESERIALIZATION_FAILURE
    if len(envelope.client_host_address) not in (4, 16):
        return Errors.INVALID_REQUEST
    data = bytes(envelope.request_data)
    try:
        header, header_version, pos = decode_request_header(data)
    except UnknownApiError as exc:
        if exc.header is None:
            return Errors.UNSUPPORTED_VERSION
        # an API or version kwire has no codec for: forwardable or not decides the answer
        return Errors.UNSUPPORTED_VERSION if exc.api_key in FORWARDABLE else Errors.INVALID_REQUEST
    except DecodeError:
        return Errors.UNSUPPORTED_VERSION
    api_key, version = header.request_api_key, header.request_api_version
    if api_key not in FORWARDABLE:
        return Errors.INVALID_REQUEST
    versions = served.get(api_key)
    if versions is None or not versions[0] <= version <= versions[1]:
        return Errors.UNSUPPORTED_VERSION
    try:
        body, end = REQUESTS[api_key].read(data, pos, version)
    except DecodeError:
        return Errors.UNSUPPORTED_VERSION
    if end != len(data):
        return Errors.UNSUPPORTED_VERSION
    return Request(header, header_version, body)


def _holds_error(message: Message, error: Errors) -> bool:
    """Whether ``message`` or any message inside it has ``error`` in an ErrorCode field
    (Kafka's ``AbstractResponse.errorCounts``)."""
    names: tuple[str, ...] = type(message).__slots__  # every field, the unknown tags last
    for name in names:
        value = getattr(message, name)
        if name == "error_code" and value == error:
            return True
        if isinstance(value, list) and value and isinstance(value[0], Message):
            if any(_holds_error(item, error) for item in value):
                return True
        elif isinstance(value, Message) and _holds_error(value, error):
            return True
    return False


def envelope_response(forwarded: Request, response: Message) -> EnvelopeResponse:
    """The EnvelopeResponse carrying ``response`` to the forwarded request
    (``RequestContext.buildResponseEnvelopePayload``): its response header (the client's
    correlation id) and body at the request's version, without a size prefix, as the client
    will read them; an answer holding NOT_CONTROLLER anywhere, or for DescribeQuorum
    NOT_LEADER_OR_FOLLOWER instead (``RequestChannel.Request.shouldReturnNotController``: what
    a controller that does not lead answers it with), is replaced by an envelope NOT_CONTROLLER
    without data (``RequestChannel.Request.buildResponseSend``), which tells the broker to find
    the active controller again (a broker's idle forwarding channel that reconnected to a
    restarted former leader otherwise fails every DescribeQuorum until the client gives up)."""
    describe_quorum = forwarded.header.request_api_key == ApiKey.DESCRIBE_QUORUM
    if _holds_error(response, Errors.NOT_LEADER_OR_FOLLOWER if describe_quorum else Errors.NOT_CONTROLLER):
        return EnvelopeResponse(response_data=None, error_code=Errors.NOT_CONTROLLER)
    frame = bytes(encode_response(response, forwarded.header.request_api_version, forwarded.header.correlation_id))
    return EnvelopeResponse(response_data=frame[4:], error_code=Errors.NONE)


# ---------------------------------------------------------------------------- admission


class Admission:
    """The admission of one controller (module docstring): ``config``'s authorizer settings,
    the ``authorizer`` deciding on ``bindings()`` (the ACL image's, read at each decision) and
    the ``log`` its audit lines (INFO) and not-ready refusals (ERROR) go to; ``served`` is the
    ApiVersions table an Envelope's request must fit (default :func:`served_api_versions`)."""

    def __init__(
        self,
        config: ControllerConfig,
        authorizer: StandardAuthorizer,
        bindings: Callable[[], Iterable[AclBinding]],
        log: ControllerLog,
        served: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.config = config
        self.authorizer = authorizer
        self._bindings = bindings
        self._log = log
        self.served = served if served is not None else served_api_versions()

    def admit(self, body: Message, version: int, caller: Caller) -> Verdict:
        """Where the decoded request ``body`` (at ``version``) from ``caller`` goes next
        (module docstring, steps 1 to 4)."""
        if isinstance(body, SaslHandshakeRequest):  # authenticated already, or not a SASL listener
            return Refused(SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[]))
        if isinstance(body, SaslAuthenticateRequest):
            return Refused(SaslAuthenticateResponse(
                error_code=Errors.ILLEGAL_SASL_STATE, auth_bytes=b"",
                error_message="SaslAuthenticate request received after successful authentication",
            ))
        if isinstance(body, EnvelopeRequest):
            if not self.envelope_allowed(caller.principal, caller.client_host):
                return Refused(EnvelopeResponse(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED))
            forwarded = open_envelope(body, self.served)
            if not isinstance(forwarded, Request):
                return Refused(EnvelopeResponse(error_code=forwarded))
            principal, client_host, token = forwarded_client(body)
            return Forwarded(forwarded, principal, client_host, token)
        api = registry.find(body)
        if api is not None:
            reason = None if api.malformed is None else api.malformed(body, version)
            if reason is not None:
                return Malformed(reason)
            return ToController(allow_token_requests(caller))
        refusal = self.raft_refusal(body, caller.principal, caller.client_host)
        return _TO_RAFT if refusal is None else Refused(refusal)

    def envelope_allowed(self, principal: str, host: str) -> bool:
        """Whether a connection of ``principal`` from ``host`` may forward requests in an
        Envelope: CLUSTER_ACTION on the cluster (``EnvelopeUtils``); always without an
        authorizer."""
        if not self.config.authorizer:
            return True
        decision = self.authorizer.authorize_cluster(self._bindings(), principal, host, CLUSTER_ACTION)
        if not decision.allowed:
            self._log.info("%s", audit_line(decision, principal, host, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME, "Envelope"))
        return decision.allowed

    def raft_refusal(self, body: Message, principal: str, host: str) -> Message | None:
        """The refusal of a raft RPC whose principal lacks the cluster operation it needs
        (:data:`RAFT_OPERATIONS`), None when it may go to the core (always without an
        authorizer, and for a request that is no raft RPC of that table)."""
        operation = RAFT_OPERATIONS.get(type(body))
        if not self.config.authorizer or operation is None:
            return None
        decision = self.authorizer.authorize_cluster(self._bindings(), principal, host, operation)
        if decision.allowed:
            return None
        name = type(body).__name__.removesuffix("Request")
        self._log.info("%s", audit_line(decision, principal, host, operation, CLUSTER, CLUSTER_NAME, name))
        return raft_refusal(body)

    def refusal(self, request: ControllerRequest, api: ControllerApi) -> ApiError | None:
        """Why the controller RPC ``request`` (served by ``api``) is refused whole before its
        operation runs, None when it may run: the operation its API needs on the cluster
        (``authorizeClusterOperation``; a principal refused only because the ACLs are not
        loaded yet gets UNKNOWN_SERVER_ERROR, as Kafka's ``AuthorizerNotReadyException``
        does), then the entry's ``check``."""
        refused = self._cluster_refusal(request, api)
        if refused is None and api.check is not None:
            refused = api.check(self.config, request.body, request.version)
        return refused

    def _cluster_refusal(self, request: ControllerRequest, api: ControllerApi) -> ApiError | None:
        if not self.config.authorizer or api.cluster_operation is None:
            return None
        operation = api.cluster_operation
        decision = self.authorizer.authorize_cluster(self._bindings(), request.principal, request.client_host, operation)
        if decision.allowed:
            return None
        name = type(request.body).__name__.removesuffix("Request")
        if not decision.ready:
            self._log.error("refused %s from %s: the authorizer has not loaded the ACLs yet", name, request.principal)
            return ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
        self._log.info("%s", audit_line(decision, request.principal, request.client_host, operation, CLUSTER,
                                        CLUSTER_NAME, name))
        return ApiError(Errors.CLUSTER_AUTHORIZATION_FAILED, f"Request {name} needs {ACL_OPERATIONS[operation]} permission.")

    def resource_authorizer(self, request: ControllerRequest) -> Authorize | None:
        """The request's :data:`~server.controller.authorizer.Authorize` for its operation's
        decisions on resources, None without an authorizer; a denial it is asked to log goes
        to the log as Kafka's audit line; raises ApiError UNKNOWN_SERVER_ERROR while the ACLs
        are not loaded."""
        if not self.config.authorizer:
            return None
        name = type(request.body).__name__.removesuffix("Request")

        def authorize(operation: int, resource_type: int, resource_name: str, log_denied: bool = True) -> bool:
            decision = self.authorizer.authorize(self._bindings(), request.principal, request.client_host,
                                                 operation, resource_type, resource_name)
            if not decision.ready:
                raise ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
            if not decision.allowed and log_denied:
                self._log.info("%s", audit_line(decision, request.principal, request.client_host, operation,
                                                resource_type, resource_name, name))
            return decision.allowed

        return authorize
