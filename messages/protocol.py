"""Requests and responses as they travel in frames: header + body, with Kafka's header-version
rules (``kwire.headers``) and the generated codecs.

Shapes::

    request frame body   = RequestHeader(v0|v1|v2) + <Api>Request(version)
    response frame body  = ResponseHeader(v0|v1) + <Api>Response(version)

Errors: :class:`UnknownApiError` for an API key kwire has no spec for, :class:`DecodeError` for
malformed bytes, :class:`EncodeError` for a body that cannot be written at that version.
"""

from __future__ import annotations

from dataclasses import dataclass

from kwire.headers import request_header_version, response_header_version
from kwire.wire import INT16, DecodeError, EncodeError, ScatterBuffer
from messages.generated.registry import FLEXIBLE_VERSIONS, REQUESTS, RESPONSES
from messages.generated.request_header import RequestHeader
from messages.generated.response_header import ResponseHeader
from messages.runtime import Buffer, Message

__all__ = [
    "DecodeError",
    "EncodeError",
    "Request",
    "UnknownApiError",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "is_flexible",
]


class UnknownApiError(DecodeError):
    """A request whose API key (or version) has no spec in kwire."""

    def __init__(self, api_key: int, api_version: int, header: RequestHeader | None = None):
        super().__init__(f"no codec for api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.header = header


def is_flexible(spec_name: str, version: int) -> bool:
    lo, hi = FLEXIBLE_VERSIONS[spec_name]
    return lo <= version <= hi


def _request_flexible(api_key: int, api_version: int) -> bool:
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise UnknownApiError(api_key, api_version)
    return is_flexible(cls.SPEC_NAME, api_version)


@dataclass(slots=True)
class Request:
    header: RequestHeader
    header_version: int
    body: Message


def decode_request_header(frame: Buffer) -> tuple[RequestHeader, int, int]:
    """The header of a request frame: ``(header, header_version, body_position)``.

    Raises UnknownApiError (carrying the header when it could be read) for an API key or
    version kwire has no codec for, DecodeError for a malformed header.
    """
    if len(frame) < 4:
        raise DecodeError("request shorter than its api key and version")
    api_key = INT16.unpack_from(frame, 0)[0]
    api_version = INT16.unpack_from(frame, 2)[0]
    cls = REQUESTS.get(api_key)
    if cls is None or not cls.LOWEST_VERSION <= api_version <= cls.HIGHEST_VERSION:
        # Read the header at v1 (non-flexible) so that the caller can still answer with the
        # right correlation id; v1 is a prefix of v2.
        header, _ = RequestHeader.read(frame, 0, 1)
        raise UnknownApiError(api_key, api_version, header)
    hv = request_header_version(api_key, api_version, is_flexible(cls.SPEC_NAME, api_version))
    header, pos = RequestHeader.read(frame, 0, hv)
    return header, hv, pos


def decode_request(frame: Buffer) -> Request:
    """Header and body of a request frame (without its size prefix)."""
    header, hv, pos = decode_request_header(frame)
    cls = REQUESTS[header.request_api_key]
    body, end = cls.read(frame, pos, header.request_api_version)
    if end != len(frame):
        raise DecodeError(f"{len(frame) - end} trailing bytes after {cls.__name__}")
    return Request(header, hv, body)


def encode_request(
    body: Message, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """A request frame body (no size prefix) for ``body`` at ``api_version``."""
    api_key = body.API_KEY
    if api_key is None:
        raise EncodeError(f"{type(body).__name__} is not a request")
    hv = request_header_version(api_key, api_version, _request_flexible(api_key, api_version))
    out = bytearray()
    RequestHeader(api_key, api_version, correlation_id, client_id).write(out, hv)
    body.write(out, api_version)
    return bytes(out)


def encode_response(body: Message, api_version: int, correlation_id: int) -> ScatterBuffer:
    """A response frame *with* its size prefix, for ``body`` at ``api_version``: a ScatterBuffer
    holding large records by reference; send its ``parts()`` in order, or take ``bytes()`` of
    it (``kwire.wire.ScatterBuffer``)."""
    api_key = body.API_KEY
    if api_key is None:
        raise EncodeError(f"{type(body).__name__} is not a response")
    hv = response_header_version(
        api_key, api_version, is_flexible(body.SPEC_NAME, api_version)
    )
    buf = ScatterBuffer(b"\0\0\0\0")
    ResponseHeader(correlation_id).write(buf, hv)
    body.write(buf, api_version)
    buf[0:4] = (buf.nbytes - 4).to_bytes(4, "big")
    return buf


def decode_response(frame: Buffer, api_key: int, api_version: int) -> tuple[ResponseHeader, Message]:
    """Header and body of a response frame (without its size prefix) to a request of
    ``api_key`` at ``api_version``."""
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise UnknownApiError(api_key, api_version)
    hv = response_header_version(api_key, api_version, is_flexible(cls.SPEC_NAME, api_version))
    header, pos = ResponseHeader.read(frame, 0, hv)
    body, end = cls.read(frame, pos, api_version)
    if end != len(frame):
        raise DecodeError(f"{len(frame) - end} trailing bytes after {cls.__name__}")
    return header, body
