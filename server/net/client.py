"""A small Trio client connection to a Kafka-protocol node (used by the tools and by the node's
outbound side).

``await open_connection(host, port, client_id)`` connects and negotiates like Kafka's
``NetworkClient``: it sends ApiVersions at the highest version kwire can encode; on
``UNSUPPORTED_VERSION`` it retries once at the node's advertised maximum (KIP-511); any other
error fails the connection. Afterwards ``await conn.request(body)`` sends ``body`` at the highest
version both sides support (or the ``version`` given) and returns the decoded response body.

One request is in flight at a time (concurrent callers queue on a lock), each frame is written
with one ``send_all``, correlation ids count up from 0 and every response's id is checked.
A request that times out, a response that cannot be decoded, or a closed socket closes the
connection: the byte stream can no longer be trusted.

It lives in ``server.net``, above ``messages``: it uses the generated codecs and trio, which the
bottom package ``kwire`` (whose framing and negotiation it builds on) must not import.
"""

from __future__ import annotations

import logging
import math
import random
import ssl
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import Any

import trio

from kwire.api_keys import ApiKey
from kwire.frame import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameError
from kwire.negotiation import (
    API_VERSIONS_KEY,
    NodeApiVersions,
    UnsupportedVersionError,
    api_versions_retry_version,
)
from kwire.wire import DecodeError
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.api_versions_response import ApiVersionsResponse
from messages.generated.registry import REQUESTS
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from messages.protocol import decode_response, encode_request
from messages.runtime import Message
from server.net.sasl import SaslClient
from server.net.scram import ScramFailure

__all__ = [
    "KafkaConnection",
    "KafkaConnectionError",
    "RequestTimeoutError",
    "UnsupportedVersionError",
    "open_connection",
]

RECEIVE_BYTES = 65536
MAX_RECEIVE_BYTES = 1 << 20
"""The most one read asks for while a response's frame is known to need that much more: each
read is a turn of the event loop, and a node busy replaying between turns would otherwise take
a turn per 64 KiB of a catch-up Fetch response."""


def _software_version() -> str:
    try:
        return _dist_version("kwire")
    except PackageNotFoundError:
        return "0.0.0"


def _decode_response(payload: bytes, api_key: int, version: int) -> tuple[Any, Any]:
    try:
        return decode_response(payload, api_key, version)
    except DecodeError:
        # KIP-511: a node that cannot parse our ApiVersions version answers with a v0 body
        # (UNSUPPORTED_VERSION); Kafka's ApiVersionsResponse.parse falls back the same way.
        if api_key != API_VERSIONS_KEY or version == 0:
            raise
        return decode_response(payload, api_key, 0)


log = logging.getLogger("server.net.client")


class KafkaConnectionError(ConnectionError):
    """The connection failed or was closed; it cannot be used any more."""


class RequestTimeoutError(KafkaConnectionError, TimeoutError):
    """No response within the request timeout (the connection is closed, as Kafka does)."""


class KafkaConnection:
    """An open, negotiated connection. Use :func:`open_connection` to make one."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        client_id: str | None,
        request_timeout_ms: int,
        max_response_bytes: int,
        peer: str,
    ) -> None:
        self._stream = stream
        self._decoder = FrameDecoder(max_response_bytes)
        self._lock = trio.Lock()
        self._next_correlation_id = 0
        self._closed = False
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.peer = peer
        self.api_versions: NodeApiVersions = NodeApiVersions({})
        self.api_versions_response: ApiVersionsResponse | None = None
        self.api_versions_version = -1
        self._sasl: SaslClient | None = None
        self._reauthenticating: trio.Event | None = None
        self._reauthenticate_at = math.inf
        """When to log in again (trio time): 85-95% into the session lifetime the server gave
        (KIP-368, ``SaslClientAuthenticator.ReauthInfo``); never when it gave none."""

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once closed, by :meth:`aclose` or after a failed request (timeout, broken socket,
        undecodable response)."""
        return self._closed

    async def aclose(self) -> None:
        """Close the socket. Idempotent; a request in flight fails with KafkaConnectionError."""
        self._closed = True
        await trio.aclose_forcefully(self._stream)

    async def __aenter__(self) -> KafkaConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- requests -------------------------------------------------------------------------

    def version_for(self, body: Message) -> int:
        """The version :meth:`request` would use for ``body``: the max of the intersection of
        the codec's versions and the node's; UnsupportedVersionError if there is none."""
        api_key = body.API_KEY
        if api_key is None or api_key not in REQUESTS:
            raise TypeError(f"{type(body).__name__} is not a request")
        return self.api_versions.latest_usable_version(
            api_key, type(body).LOWEST_VERSION, type(body).HIGHEST_VERSION
        )

    async def request(
        self, body: Message, version: int | None = None, *, timeout_ms: int | None = None
    ) -> Any:
        """Send ``body`` and return the response body.

        ``version`` None negotiates (:meth:`version_for`); an explicit version must be one the
        node advertised. ``timeout_ms`` defaults to the connection's request timeout.
        Raises UnsupportedVersionError, RequestTimeoutError, KafkaConnectionError.
        """
        if version is None:
            version = self.version_for(body)
        else:
            api_key = body.API_KEY
            if api_key is None:
                raise TypeError(f"{type(body).__name__} is not a request")
            self.api_versions.latest_usable_version(api_key, version, version)
        while self._reauthenticating is not None:
            await self._reauthenticating.wait()
        if trio.current_time() >= self._reauthenticate_at:
            await self._reauthenticate()
        return await self._exchange(body, version, timeout_ms)

    async def _reauthenticate(self) -> None:
        """Log in again on this connection (KIP-368); requests made meanwhile wait for it, those
        queued before it go first. A failure closes the connection."""
        assert self._sasl is not None
        self._reauthenticate_at = math.inf
        done = self._reauthenticating = trio.Event()
        try:
            await _log_in(self, self._sasl)
        except BaseException:
            await self.aclose()
            raise
        finally:
            self._reauthenticating = None
            done.set()
        log.info("re-authenticated to %s as %s with SASL mechanism %s", self.peer, self._sasl.username,
                 self._sasl.mechanism)

    async def _exchange(self, body: Message, version: int, timeout_ms: int | None) -> Any:
        api_key = body.API_KEY
        assert api_key is not None
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        async with self._lock:
            if self._closed:
                raise KafkaConnectionError(f"connection to {self.peer} is closed")
            correlation_id = self._next_correlation_id
            self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
            frame = encode_request(body, version, correlation_id, self.client_id)
            try:
                with trio.fail_after(timeout_s if timeout_s > 0 else math.inf):
                    await self._stream.send_all(len(frame).to_bytes(4, "big") + frame)
                    payload = await self._receive_frame()
            except trio.TooSlowError:
                await self.aclose()
                raise RequestTimeoutError(
                    f"no response from {self.peer} to {type(body).__name__} v{version} "
                    f"within {timeout_s * 1000:.0f} ms"
                ) from None
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                await self.aclose()
                raise KafkaConnectionError(f"connection to {self.peer} failed: {exc}") from exc
            try:
                header, response = _decode_response(payload, api_key, version)
            except DecodeError as exc:
                await self.aclose()
                raise KafkaConnectionError(
                    f"undecodable {type(body).__name__} v{version} response from {self.peer}: {exc}"
                ) from exc
            if header.correlation_id != correlation_id:
                await self.aclose()
                raise KafkaConnectionError(
                    f"response from {self.peer} has correlation id {header.correlation_id}, "
                    f"expected {correlation_id}"
                )
            return response

    async def _receive_frame(self) -> bytes:
        decoder = self._decoder
        while True:
            frame = decoder.next_frame()
            if frame is not None:
                return frame
            # the rest of a large response (a catch-up Fetch of 8 MiB) in few reads, not 128
            data = await self._stream.receive_some(max(RECEIVE_BYTES, min(decoder.missing_bytes, MAX_RECEIVE_BYTES)))
            if not data:
                raise trio.BrokenResourceError("the peer closed the connection")
            try:
                decoder.feed(data)
            except FrameError as exc:
                raise trio.BrokenResourceError(f"bad response frame: {exc}") from exc

    async def _negotiate(self, software_name: str, software_version: str) -> None:
        version = ApiVersionsRequest.HIGHEST_VERSION
        body = ApiVersionsRequest(
            client_software_name=software_name, client_software_version=software_version
        )
        while True:
            response: ApiVersionsResponse = await self._exchange(body, version, None)
            retry = api_versions_retry_version(response, version, ApiVersionsRequest.HIGHEST_VERSION)
            if retry is None:
                break
            version = retry
        self.api_versions = NodeApiVersions.from_response(response)
        self.api_versions_response = response
        self.api_versions_version = version


async def open_connection(
    host: str,
    port: int,
    client_id: str | None = "kwire",
    *,
    request_timeout_ms: int = 30_000,
    max_response_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    client_software_name: str = "kwire",
    client_software_version: str | None = None,
    sasl: SaslClient | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> KafkaConnection:
    """Connect to ``host:port`` (with ``ssl_context``, over TLS, the server's name checked when
    the context says so) and negotiate API versions; with ``sasl``, log in to the SASL listener
    (SaslHandshake v1, then SaslAuthenticate until the mechanism's exchange is done).

    Connecting and the ApiVersions exchange each get ``request_timeout_ms``. Raises
    KafkaConnectionError (RequestTimeoutError on timeout; a refused login), or ApiVersionsError
    when the node answers ApiVersions with an error other than a retriable UNSUPPORTED_VERSION.
    """
    peer = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    stream: trio.abc.Stream
    try:
        with trio.fail_after(request_timeout_ms / 1000):
            stream = await trio.open_tcp_stream(host, port)
            if ssl_context is not None:
                stream = trio.SSLStream(stream, ssl_context, server_hostname=host)
                await stream.do_handshake()
    except trio.TooSlowError:
        raise RequestTimeoutError(f"connecting to {peer} timed out") from None
    except trio.BrokenResourceError as exc:
        raise KafkaConnectionError(f"TLS handshake with {peer} failed: {exc.__cause__ or exc}") from exc
    except OSError as exc:
        raise KafkaConnectionError(f"cannot connect to {peer}: {exc}") from exc
    conn = KafkaConnection(
        stream,
        client_id=client_id,
        request_timeout_ms=request_timeout_ms,
        max_response_bytes=max_response_bytes,
        peer=peer,
    )
    try:
        await conn._negotiate(client_software_name, client_software_version or _software_version())
        if sasl is not None:
            await _log_in(conn, sasl)
    except BaseException:
        await conn.aclose()
        raise
    return conn


async def _log_in(conn: KafkaConnection, sasl: SaslClient) -> None:
    """The SASL exchange of ``sasl`` on ``conn`` (``SaslClientAuthenticator``). Raises
    KafkaConnectionError for a refused mechanism or login."""
    conn.api_versions.latest_usable_version(int(ApiKey.SASL_HANDSHAKE), 1, 1)
    conn.api_versions.latest_usable_version(int(ApiKey.SASL_AUTHENTICATE), 2, 2)
    handshake = await conn._exchange(SaslHandshakeRequest(mechanism=sasl.mechanism), 1, None)
    if handshake.error_code != 0:
        raise KafkaConnectionError(
            f"{conn.peer} refused SASL mechanism {sasl.mechanism} (enabled: {', '.join(handshake.mechanisms)})"
        )
    exchange = sasl.tokens()
    token: bytes | None = exchange.first()
    while token is not None:
        answer = await conn._exchange(SaslAuthenticateRequest(auth_bytes=token), 2, None)
        if answer.error_code != 0:
            raise KafkaConnectionError(f"{conn.peer} refused the SASL login: {answer.error_message}")
        try:
            token = exchange.next(bytes(answer.auth_bytes))
        except ScramFailure as exc:
            raise KafkaConnectionError(f"SASL login to {conn.peer} failed: {exc}") from None
    conn._sasl = sasl
    if answer.session_lifetime_ms > 0:
        conn._reauthenticate_at = trio.current_time() + answer.session_lifetime_ms * random.uniform(0.85, 0.95) / 1000
