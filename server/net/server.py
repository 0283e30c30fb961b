"""The Trio server: listeners, one task per connection, frames in, responses out.

Per connection (Kafka's ``SocketServer`` processor + ``RequestChannel``, simplified)::

    receive_some ──► FrameDecoder (size checked before any body is buffered)
                 ──► decode_request_header
                       ApiVersions          → answered here (server.net.api_versions)
                       enabled key/version  → body decoded → await dispatcher.handle(...)
                       anything else        → connection closed, reason logged
                 ──► encode_response ──► its parts sent in order (records from their own buffer,
                                         a log region from its file by sendfile)

Requests on one connection are handled one at a time, in order; pipelined requests wait in the
decoder's buffer, which therefore never holds more than one receive beyond the frame being
handled. A malformed frame (bad size, undecodable header or body, unknown API key or a version
not enabled) closes that connection only, without a response, as Kafka's
``processChannelException`` does; other connections and the server keep going.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import trio

from kwire.api_keys import ApiKey
from kwire.frame import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameError
from kwire.wire import Buffer, DecodeError, EncodeError, RecordsRegion, ScatterBuffer, as_buffer
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.registry import REQUESTS
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from messages.protocol import Request, UnknownApiError, decode_request_header, encode_response
from messages.runtime import Message
from server.config import KRaftConfig, Listener
from server.net.api_versions import ApiVersionsResponder
from server.net.dispatcher import Dispatcher, RequestContext
from server.net.sasl import SaslFailure, SaslServerConfig, SaslSession
from server.net.tls import DEFAULT_PRINCIPAL_RULES, PrincipalRule, TlsError, principal_of
from storage.errors import KafkaStorageError
from storage.fileio import FileRegion

__all__ = ["BoundListener", "RunningServer", "TlsListener", "serve"]

log = logging.getLogger("server.net")

RECEIVE_BYTES = 65536
API_VERSIONS = int(ApiKey.API_VERSIONS)
SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)


def _api_name(api_key: int) -> str:
    """The ``ApiKeys`` constant of the key (``DESCRIBE_CLUSTER``), or its number."""
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


@dataclass(frozen=True, slots=True)
class BoundListener:
    """A listening socket: the configured listener ``name`` and the address actually bound."""

    name: str
    host: str
    port: int


@dataclass
class RunningServer:
    """What :func:`serve` reports once every listener is bound."""

    listeners: tuple[BoundListener, ...]
    cancel_scope: trio.CancelScope
    connections_accepted: int = 0
    connections_open: int = 0
    connections_closed_on_error: int = 0
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def port(self, listener_name: str | None = None) -> int:
        """The bound port of ``listener_name`` (default: the first listener)."""
        for bound in self.listeners:
            if listener_name is None or bound.name == listener_name.upper():
                return bound.port
        raise KeyError(listener_name)

    def close(self) -> None:
        """Stop listening and close every connection."""
        self.cancel_scope.cancel()


IOV_MAX = 1024
"""The most buffers one ``sendmsg`` takes (Linux's ``UIO_MAXIOV``)."""


async def send_parts(stream: trio.abc.Stream, parts: Sequence[Buffer | RecordsRegion]) -> None:
    """Write ``parts`` (a response's :meth:`ScatterBuffer.parts`) in order. On a plain socket
    the buffers go out in one ``sendmsg`` per kernel buffer's worth (one, unless the socket's
    send buffer fills), so that a Fetch response -- its header, the records value held by
    reference, its tail -- costs one system call and one pass through Trio's scheduler, not
    three; a file region (``storage.fileio.FileRegion``: a leader's records in its log) goes
    from its file by ``sendfile``, never through this process's memory (Kafka's
    ``FileRecords.writeTo``), after the buffers before it. Those are not sent with
    ``MSG_MORE``: with it, each response's first ``sendfile`` on loopback stopped after 64 KiB
    and the socket then stayed unwritable for up to 200 ms. On any other stream (TLS) the
    parts go as one joined buffer, a region read into it, sealed in as few TLS records as it
    takes. Every region is closed once this returns. Raises what ``SocketStream.send_all``
    raises: trio.BrokenResourceError when the peer is gone or a region cannot be read (its
    file was truncated under it), trio.ClosedResourceError when the stream was closed."""
    try:
        if len(parts) == 1 and isinstance(parts[0], Buffer):
            await stream.send_all(parts[0])
        elif not isinstance(stream, trio.SocketStream):
            await stream.send_all(b"".join([as_buffer(part) for part in parts]))
        else:
            await _send_on_socket(stream, parts)
    except KafkaStorageError as exc:
        raise trio.BrokenResourceError(f"a response's records could not be read: {exc}") from exc
    finally:
        for part in parts:
            if isinstance(part, FileRegion):
                part.close()


async def _send_on_socket(stream: trio.SocketStream, parts: Sequence[Buffer | RecordsRegion]) -> None:
    sock = stream.socket
    if sock.did_shutdown_SHUT_WR or sock.fileno() == -1:
        raise trio.ClosedResourceError("the socket was closed")
    pending: list[memoryview] = []
    try:
        for part in parts:
            if isinstance(part, Buffer):
                if len(part):
                    pending.append(memoryview(part).cast("B"))
                continue
            if not isinstance(part, FileRegion):
                pending.append(memoryview(bytes(part)))
                continue
            part.check_intact()
            await _sendmsg_all(sock, pending)
            pending = []
            await _sendfile_all(sock, part)
        await _sendmsg_all(sock, pending)
    except OSError as exc:
        raise trio.BrokenResourceError(f"the socket failed: {exc}") from exc


async def _sendmsg_all(sock: trio.socket.SocketType, pending: list[memoryview]) -> None:
    first = 0
    while first < len(pending):
        sent = await sock.sendmsg(pending[first:first + IOV_MAX])
        while first < len(pending) and sent >= len(pending[first]):
            sent -= len(pending[first])
            first += 1
        if sent:
            pending[first] = pending[first][sent:]


async def _sendfile_all(sock: trio.socket.SocketType, region: FileRegion) -> None:
    offset, left = region.position, region.length
    while left:
        try:
            sent = os.sendfile(sock.fileno(), region.fd, offset, left)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        if sent == 0:
            raise KafkaStorageError(f"{region.path} ended at {offset}, inside a region ending at {offset + left}")
        offset += sent
        left -= sent


class _CloseConnection(Exception):
    """Raised inside a connection to close it, with the reason to log."""


class _Connection:
    """One accepted connection; :meth:`run` is its task."""

    __slots__ = ("_close_after", "_ctx", "_decoder", "_dispatcher", "_enabled", "_expires_at", "_reauth_started",
                 "_responder", "_sasl", "_server", "_stream")

    def __init__(
        self,
        stream: trio.SocketStream,
        ctx: RequestContext,
        server: _Server,
    ) -> None:
        self._stream = stream
        self._ctx = ctx
        self._server = server
        self._decoder = FrameDecoder(server.max_request_bytes)
        self._dispatcher = server.dispatcher
        self._enabled = server.enabled
        self._responder = server.responder
        sasl = server.sasl.get(ctx.listener_name)
        self._sasl = None if sasl is None else SaslSession(sasl)
        self._close_after = False
        self._expires_at = math.inf
        """When the SASL session expires (trio time; KIP-368)."""
        self._reauth_started = -math.inf
        """When the last re-authentication began (trio time)."""

    async def run(self) -> None:
        stream, decoder = self._stream, self._decoder
        idle_s = self._server.idle_timeout_s
        idle = trio.CancelScope()
        with idle:
            while True:
                if idle_s is not None:
                    idle.deadline = trio.current_time() + idle_s
                data = await stream.receive_some(RECEIVE_BYTES)
                if not data:
                    if decoder.buffered_bytes:
                        log.info(
                            "connection %s from %s on %s closed by the peer with %d bytes of an "
                            "incomplete frame",
                            self._ctx.connection_id, self._ctx.peer_text,
                            self._ctx.listener_name, decoder.buffered_bytes,
                        )
                    return
                idle.deadline = math.inf
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not None:
                    session = self._sasl
                    if session is not None and session.authenticated:
                        session = self._after_login(frame, session)
                    if session is not None and not session.authenticated:
                        response = self._authenticate(frame, session)
                    else:
                        response = await self._respond(frame)
                    await send_parts(stream, response.parts())
                    if self._close_after:
                        return
        if idle.cancelled_caught:
            log.info(
                "closing connection %s from %s: idle for more than %.0f ms",
                self._ctx.connection_id, self._ctx.peer_text, (idle_s or 0) * 1000,
            )

    def _after_login(self, frame: bytes, session: SaslSession) -> SaslSession:
        """The session a frame on an authenticated SASL connection goes to (KIP-368): a new one
        for a SaslHandshake that starts a re-authentication, else ``session``. Raises
        _CloseConnection for any other request after the session expired."""
        now = trio.current_time()
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if api_key == SASL_HANDSHAKE and self._expires_at != math.inf and now - self._reauth_started >= 1.0:
            self._reauth_started = now
            self._sasl = SaslSession(session.config, previous=session)
            log.info("connection %s from %s on %s (%s) is re-authenticating", self._ctx.connection_id,
                     self._ctx.peer_text, self._ctx.listener_name, self._ctx.principal)
            return self._sasl
        if now > self._expires_at:
            raise _CloseConnection(f"its SASL session ({self._ctx.principal}, {session.lifetime_ms} ms) expired and it "
                                   "did not re-authenticate")
        return session

    def _authenticate(self, frame: bytes, session: SaslSession) -> ScatterBuffer:
        """A frame before the connection is authenticated (``server.net.sasl``)."""
        ctx = self._ctx
        if session.raw:
            try:
                token = session.token(frame)
            except SaslFailure as exc:
                raise _CloseConnection(f"SASL {session.what} failed ({exc}): {exc.client_message}") from None
            self._authenticated(session)
            raw = ScatterBuffer(len(token).to_bytes(4, "big"))
            raw += token
            return raw
        try:
            header, _, pos = decode_request_header(frame)
        except UnknownApiError as exc:
            raise _CloseConnection(f"unknown api key {exc.api_key} (version {exc.api_version}) during SASL handshake") from None
        api_key, version = header.request_api_key, header.request_api_version
        if api_key == API_VERSIONS:
            return self._api_versions(frame, pos, version, header.correlation_id)
        if api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            raise _CloseConnection(f"Unexpected Kafka request of type {_api_name(api_key)} during SASL handshake.")
        versions = self._enabled.get(api_key)
        if versions is None or not versions[0] <= version <= versions[1]:
            raise _CloseConnection(f"api key {api_key} version {version} is not enabled")
        cls = REQUESTS[api_key]
        body, end = cls.read(frame, pos, version)
        if end != len(frame):
            raise DecodeError(f"{len(frame) - end} trailing bytes after {cls.__name__}")
        response: Message
        if isinstance(body, SaslHandshakeRequest):
            response, self._close_after = session.handshake(body, version)
            if self._close_after:
                log.warning("closing connection %s from %s on %s: SASL mechanism %s is not enabled (enabled: %s)",
                            ctx.connection_id, ctx.peer_text, ctx.listener_name, body.mechanism,
                            ", ".join(session.config.mechanisms))
        else:
            assert isinstance(body, SaslAuthenticateRequest)
            try:
                response, self._close_after = session.authenticate(body)
            except SaslFailure as exc:
                raise _CloseConnection(f"SASL {session.what} failed: {exc}") from None
            if self._close_after:
                log.warning("%s of connection %s from %s on %s failed with SASL mechanism %s: %s", session.what,
                            ctx.connection_id, ctx.peer_text, ctx.listener_name, session.mechanism, session.failure)
            elif session.authenticated:
                self._authenticated(session)
        return encode_response(response, version, header.correlation_id)

    def _authenticated(self, session: SaslSession) -> None:
        if session.authenticated:
            self._ctx.principal = f"User:{session.user}"
            lifetime = session.lifetime_ms
            self._expires_at = trio.current_time() + lifetime / 1000 if lifetime > 0 else math.inf
            log.info("connection %s from %s on %s %s as %s with SASL mechanism %s%s", self._ctx.connection_id,
                     self._ctx.peer_text, self._ctx.listener_name,
                     "authenticated" if session.previous is None else "re-authenticated", self._ctx.principal,
                     session.mechanism, f" for {lifetime} ms" if lifetime > 0 else "")

    def _api_versions(self, frame: bytes, pos: int, version: int, correlation_id: int) -> ScatterBuffer:
        body, end = ApiVersionsRequest.read(frame, pos, version)
        if end != len(frame):
            raise DecodeError(f"{len(frame) - end} trailing bytes after ApiVersionsRequest")
        return self._responder.respond(body, version, correlation_id)

    async def _respond(self, frame: bytes) -> ScatterBuffer:
        try:
            header, header_version, pos = decode_request_header(frame)
        except UnknownApiError as exc:
            if exc.api_key == API_VERSIONS and exc.header is not None:
                return self._responder.unsupported_version(exc.header.correlation_id)
            raise _CloseConnection(
                f"unknown api key {exc.api_key} (version {exc.api_version})"
            ) from None
        api_key = header.request_api_key
        version = header.request_api_version
        if api_key == API_VERSIONS:
            return self._api_versions(frame, pos, version, header.correlation_id)
        versions = self._enabled.get(api_key)
        if versions is None or not versions[0] <= version <= versions[1]:
            raise _CloseConnection(f"api key {api_key} version {version} is not enabled")
        cls = REQUESTS[api_key]
        request_body, end = cls.read(frame, pos, version)
        if end != len(frame):
            raise DecodeError(f"{len(frame) - end} trailing bytes after {cls.__name__}")
        response = await self._dispatcher.handle(
            Request(header, header_version, request_body), self._ctx
        )
        return encode_response(response, version, header.correlation_id)


@dataclass
class _Server:
    dispatcher: Dispatcher
    enabled: dict[int, tuple[int, int]]
    responder: ApiVersionsResponder
    max_request_bytes: int
    idle_timeout_s: float | None
    sasl: Mapping[str, SaslServerConfig] = field(default_factory=dict)
    tls: Mapping[str, TlsListener] = field(default_factory=dict)
    running: RunningServer | None = None

    async def handle(self, listener_name: str, stream: trio.SocketStream) -> None:
        running = self.running
        assert running is not None
        running.connections_accepted += 1
        running.connections_open += 1
        try:
            peer = _peer(stream)
        except OSError:
            peer = ("?", 0)
        ctx = RequestContext(listener_name, peer, next(running._ids))
        tls = self.tls.get(listener_name)
        try:
            if tls is not None:
                stream = await _tls_handshake(stream, tls, ctx)  # type: ignore[assignment]
            await _Connection(stream, ctx, self).run()
        except (FrameError, DecodeError, _CloseConnection, TlsError) as exc:
            running.connections_closed_on_error += 1
            log.warning(
                "closing connection %s from %s on %s: %s",
                ctx.connection_id, ctx.peer_text, listener_name, exc,
            )
        except EncodeError as exc:
            running.connections_closed_on_error += 1
            log.error(
                "closing connection %s from %s: the response could not be encoded: %s",
                ctx.connection_id, ctx.peer_text, exc,
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            log.debug("connection %s from %s lost: %r", ctx.connection_id, ctx.peer_text, exc)
        except Exception:
            running.connections_closed_on_error += 1
            log.exception(
                "closing connection %s from %s: request handling failed",
                ctx.connection_id, ctx.peer_text,
            )
        finally:
            running.connections_open -= 1
            await trio.aclose_forcefully(stream)


@dataclass(frozen=True, slots=True)
class TlsListener:
    """A TLS listener's server context and its ``ssl.principal.mapping.rules``, parsed."""

    context: ssl.SSLContext
    principal_rules: tuple[PrincipalRule, ...] = DEFAULT_PRINCIPAL_RULES


TLS_HANDSHAKE_TIMEOUT_S = 10.0
"""How long a client may take over its TLS handshake."""


async def _tls_handshake(stream: trio.SocketStream, tls: TlsListener, ctx: RequestContext) -> trio.SSLStream[trio.SocketStream]:
    """The TLS side of an accepted connection, handshake done: its principal the client
    certificate's (``server.net.tls.principal_of``). Raises _CloseConnection for a failed or
    stalled handshake (a plaintext client, an untrusted or expired certificate)."""
    wrapped = trio.SSLStream(stream, tls.context, server_side=True)
    try:
        with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
            await wrapped.do_handshake()
    except trio.TooSlowError:
        raise _CloseConnection(f"TLS handshake not done within {TLS_HANDSHAKE_TIMEOUT_S:.0f} s") from None
    except trio.BrokenResourceError as exc:
        reason = exc.__cause__ if exc.__cause__ is not None else exc
        raise _CloseConnection(f"TLS handshake failed: {reason}") from None
    ctx.principal = principal_of(wrapped.getpeercert(binary_form=True), tls.principal_rules)
    return wrapped


def _peer(stream: trio.SocketStream) -> tuple[str, int]:
    address = stream.socket.getpeername()
    return (str(address[0]), int(address[1]))


def _check_enabled(dispatcher: Dispatcher) -> dict[int, tuple[int, int]]:
    enabled: dict[int, tuple[int, int]] = {}
    for key, (lo, hi) in dispatcher.api_versions().items():
        cls = REQUESTS.get(key)
        if key == API_VERSIONS:
            raise ValueError("ApiVersions is answered by the network layer; do not register it")
        if cls is None:
            raise ValueError(f"api key {key} has no codec in messages.generated")
        if not cls.LOWEST_VERSION <= lo <= hi <= cls.HIGHEST_VERSION:
            raise ValueError(
                f"{cls.__name__} versions {lo}-{hi} are outside the codec's "
                f"{cls.LOWEST_VERSION}-{cls.HIGHEST_VERSION}"
            )
        enabled[int(key)] = (lo, hi)
    return enabled


async def _bind(listener: Listener) -> list[trio.SocketListener]:
    """Listening sockets for ``listener``. With port 0 on a name that resolves to several
    addresses (an empty host, or ``localhost``), every socket gets the port chosen for the
    first, so that one port number describes the listener; addresses where that port is taken
    are skipped."""
    sockets = await trio.open_tcp_listeners(listener.port, host=listener.host)
    if listener.port != 0 or len(sockets) < 2:
        return sockets
    first, rest = sockets[0], sockets[1:]
    port = first.socket.getsockname()[1]
    result = [first]
    for extra in rest:
        address = extra.socket.getsockname()[0]
        await extra.aclose()
        try:
            result.extend(await trio.open_tcp_listeners(port, host=address))
        except OSError as exc:
            log.debug("listener %s: not binding %s port %d: %s", listener.name, address, port, exc)
    return result


async def serve(
    listeners: KRaftConfig | Sequence[Listener],
    dispatcher: Dispatcher,
    *,
    max_request_bytes: int | None = None,
    idle_timeout_ms: int | None = None,
    sasl: Mapping[str, SaslServerConfig] | None = None,
    tls: Mapping[str, TlsListener] | None = None,
    task_status: trio.TaskStatus[RunningServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on every listener and serve until cancelled.

    ``listeners`` is a :class:`KRaftConfig` (its ``listeners``, ``socket.request.max.bytes``
    and ``connections.max.idle.ms`` are used unless given here) or a list of
    :class:`Listener`. ``task_status.started`` receives a :class:`RunningServer` once every
    socket is bound (port 0 gives an ephemeral port; see ``RunningServer.port``).
    ``idle_timeout_ms`` None (the default for a plain list) never closes idle connections.
    ``sasl`` maps the names of SASL listeners to their settings: a connection to one must
    authenticate first (``server.net.sasl``); ``tls`` the names of SSL and SASL_SSL listeners
    to their TLS contexts (``server.net.tls``): a connection first completes its handshake.

    Raises ValueError if the dispatcher advertises a key or version without a codec, OSError
    if a listener cannot be bound.
    """
    if isinstance(listeners, KRaftConfig):
        config = listeners
        listeners = config.listeners
        if max_request_bytes is None:
            max_request_bytes = config.socket_request_max_bytes
        if idle_timeout_ms is None:
            idle_timeout_ms = config.connections_max_idle_ms
    if max_request_bytes is None:
        max_request_bytes = DEFAULT_MAX_FRAME_BYTES
    enabled = _check_enabled(dispatcher)
    server = _Server(
        dispatcher=dispatcher,
        enabled=enabled,
        responder=ApiVersionsResponder(enabled, dispatcher),
        max_request_bytes=max_request_bytes,
        idle_timeout_s=None if idle_timeout_ms is None else idle_timeout_ms / 1000,
        sasl={name.upper(): settings for name, settings in (sasl or {}).items()},
        tls={name.upper(): settings for name, settings in (tls or {}).items()},
    )
    async with trio.open_nursery() as nursery:
        bound: list[BoundListener] = []
        sockets: list[tuple[str, list[trio.SocketListener]]] = []
        try:
            for listener in listeners:
                socks = await _bind(listener)
                sockets.append((listener.name, socks))
                for sock in socks:
                    host, port = sock.socket.getsockname()[:2]
                    bound.append(BoundListener(listener.name, host, port))
        except BaseException:
            for _, socks in sockets:
                for sock in socks:
                    await trio.aclose_forcefully(sock)
            raise
        server.running = RunningServer(tuple(bound), nursery.cancel_scope)
        for name, socks in sockets:
            # Accepted trio.SocketStreams set TCP_NODELAY themselves.
            nursery.start_soon(trio.serve_listeners, partial(server.handle, name), socks)
            log.info(
                "listening on %s",
                ", ".join(f"{name}://{s.socket.getsockname()[0]}:{s.socket.getsockname()[1]}"
                          for s in socks),
            )
        task_status.started(server.running)
