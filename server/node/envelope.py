"""Requests brokers forward to the controller inside an Envelope (key 58, KIP-590; Kafka's
``EnvelopeUtils`` and ``RequestContext.buildResponseEnvelopePayload``).

:func:`open_envelope` checks an EnvelopeRequest in Kafka's order and returns the forwarded
request (its header, header version and body), or the envelope-level error:

1. RequestPrincipal not a serialized ``DefaultPrincipalData`` (int16 version 0, then type,
   name, token flag and tagged fields) -> PRINCIPAL_DESERIALIZATION_FAILURE;
2. ClientHostAddress not 4 or 16 bytes -> INVALID_REQUEST;
3. a request header that does not parse -> UNSUPPORTED_VERSION;
4. an API that brokers never forward -> INVALID_REQUEST;
5. a body that does not parse at its version, or a version this node does not serve ->
   UNSUPPORTED_VERSION.

The forwarded request is answered as if it came from the client; :func:`envelope_response`
wraps that answer with its own response header (the client's correlation id), without a size
prefix, in ResponseData; an answer holding NOT_CONTROLLER anywhere (a DescribeQuorum answer:
NOT_LEADER_OR_FOLLOWER, which a controller that does not lead answers it with) is replaced by an envelope NOT_CONTROLLER without data
(``RequestChannel.Request.buildResponseSend``), which tells the broker to find the active
controller again. :func:`relay_answer` waits for the forwarded
request's answer and completes the envelope with it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from kwire.wire import INT16, DecodeError, read_compact_bytes, read_unknown_tagged
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.envelope_response import EnvelopeResponse
from messages.protocol import (
    REQUESTS,
    Request,
    UnknownApiError,
    decode_request_header,
    encode_response,
)
from messages.runtime import Message
from server.net import PendingRequest

__all__ = ["FORWARDABLE", "envelope_response", "forwarded_client", "open_envelope", "relay_answer"]

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
    ``DefaultPrincipalData``."""
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
    """The forwarded request of ``envelope``, or the envelope's error (module docstring);
    ``served`` is the node's ApiVersions table (api key -> (min, max))."""
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
    """The EnvelopeResponse carrying ``response`` to the forwarded request: its response
    header and body at the request's version, as the client will read them; NOT_CONTROLLER
    alone when the answer holds that error or, for DescribeQuorum, NOT_LEADER_OR_FOLLOWER
    instead (``RequestChannel.Request.shouldReturnNotController``: a controller
    that is no longer the leader, such as a restarted former leader that a broker's forwarding
    channel reconnected to, sends the broker to look for the active controller again rather
    than fail its DescribeQuorum until the client gives up)."""
    describe_quorum = forwarded.header.request_api_key == ApiKey.DESCRIBE_QUORUM
    if _holds_error(response, Errors.NOT_LEADER_OR_FOLLOWER if describe_quorum else Errors.NOT_CONTROLLER):
        return EnvelopeResponse(response_data=None, error_code=Errors.NOT_CONTROLLER)
    frame = bytes(encode_response(response, forwarded.header.request_api_version, forwarded.header.correlation_id))
    return EnvelopeResponse(response_data=frame[4:], error_code=Errors.NONE)


async def relay_answer(outer: PendingRequest, inner: PendingRequest) -> None:
    """Answer the envelope ``outer`` once its forwarded request ``inner`` is answered
    (:func:`envelope_response`); a failed forwarded request fails its envelope too."""
    try:
        response = await inner.wait()
    except Exception as exc:
        if not outer.done:
            outer.fail(exc)
        return
    if not outer.done:
        outer.respond(envelope_response(inner.request, response))
