"""The node's outbound side towards one peer: one connection and one request at a time.

The core never has more than one request in flight per destination (``RequestManager``), so a
:class:`Peer` is a task reading the requests for its destination from a channel, exchanging
each over one connection (opened on demand, with ApiVersions negotiation, kept while the
endpoint stays the same) and posting the outcome back to the driver as a core event:
``ResponseReceived`` or ``RequestFailed`` with a :class:`~server.raft.events.FailureReason`.
"""

from __future__ import annotations

import logging
import math
import ssl
from collections.abc import Callable
from typing import Any

import trio

from kwire.wire import EncodeError
from server.net.client import (
    KafkaConnection,
    KafkaConnectionError,
    RequestTimeoutError,
    UnsupportedVersionError,
    open_connection,
)
from server.net.sasl import SaslClient
from server.raft.events import (
    Event,
    FailureReason,
    OutboundRequest,
    RequestFailed,
    ResponseReceived,
)
from server.raft.types import Endpoint

__all__ = ["Peer", "Peers"]

log = logging.getLogger("server.node")


class Peer:
    """The outbound side towards node ``destination_id``.

    ``post`` takes each outcome (called from :meth:`run`'s task); ``client_id`` goes into every
    request header (Kafka's raft client sends ``raft-client-<node id>``). Feed requests with
    ``peer.send.send_nowait(outbound)``; the channel is unbounded because the core bounds it.
    """

    def __init__(
        self, destination_id: int, post: Callable[[Event], None], client_id: str, sasl: SaslClient | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.destination_id = destination_id
        self.post = post
        self.client_id = client_id
        self.sasl = sasl
        """How to log in to a SASL controller listener (``sasl.mechanism.controller.protocol``)."""
        self.ssl_context = ssl_context
        """The TLS context of connections to a TLS controller listener."""
        self.send, self.receive = trio.open_memory_channel[OutboundRequest](math.inf)
        self.connection: KafkaConnection | None = None
        self.address: tuple[str, int] | None = None

    async def run(self) -> None:
        """Exchange requests until the channel closes or the task is cancelled; the
        connection is closed on the way out."""
        try:
            async for outbound in self.receive:
                self.post(await self._exchange(outbound))
        finally:
            if self.connection is not None:
                await self.connection.aclose()

    async def _exchange(self, outbound: OutboundRequest) -> Event:
        failed = RequestFailed(outbound.correlation_id, self.destination_id, FailureReason.UNREACHABLE)
        endpoint = outbound.endpoint
        if endpoint is None:
            return failed
        address = (endpoint.host, endpoint.port)
        timeout_s = outbound.timeout_ms / 1000
        try:
            with trio.fail_after(timeout_s):
                reused = self._connected_to(address)
                try:
                    response = await self._send_on(outbound, endpoint, address)
                except (KafkaConnectionError, OSError) as exc:
                    if not reused or isinstance(exc, RequestTimeoutError):
                        raise
                    # an idle connection whose peer went away (a killed node restarted on the
                    # same address) fails on first use: Kafka's NetworkClient sees the close
                    # and reconnects; here the request goes once more on a new connection
                    log.debug("connection to node %d was gone (%s): reconnecting", self.destination_id, exc)
                    await self._drop()
                    response = await self._send_on(outbound, endpoint, address)
        except trio.TooSlowError:
            await self._drop()
            return RequestFailed(outbound.correlation_id, self.destination_id, FailureReason.TIMEOUT)
        except (UnsupportedVersionError, EncodeError) as exc:
            # The peer's versions cannot carry the request (e.g. a pre-vote to a voter that only
            # speaks Vote v1): Kafka's UnsupportedVersionException, which the core answers by
            # falling back to a real election.
            log.debug("request to node %d not expressible: %s", self.destination_id, exc)
            return RequestFailed(
                outbound.correlation_id, self.destination_id, FailureReason.UNSUPPORTED_VERSION
            )
        except (KafkaConnectionError, OSError) as exc:
            log.debug("request to node %d failed: %s", self.destination_id, exc)
            await self._drop()
            return RequestFailed(outbound.correlation_id, self.destination_id, FailureReason.DISCONNECTED)
        return ResponseReceived(outbound.correlation_id, self.destination_id, response)

    async def _send_on(self, outbound: OutboundRequest, endpoint: Endpoint, address: tuple[str, int]) -> Any:
        """Send on the current connection to ``address``, opening one first if needed."""
        if not self._connected_to(address):
            if self.connection is not None:
                await self.connection.aclose()
            self.connection = None
            self.connection = await open_connection(
                endpoint.host,
                endpoint.port,
                client_id=self.client_id,
                request_timeout_ms=outbound.timeout_ms,
                sasl=self.sasl,
                ssl_context=self.ssl_context,
            )
            self.address = address
        connection = self.connection
        assert connection is not None
        return await connection.request(outbound.request, timeout_ms=outbound.timeout_ms)

    def _connected_to(self, address: tuple[str, int]) -> bool:
        return self.connection is not None and not self.connection.closed and self.address == address

    async def _drop(self) -> None:
        if self.connection is not None:
            await self.connection.aclose()
            self.connection = None


class Peers:
    """The node's :class:`Peer` tasks, one per destination (started in ``nursery`` on first
    use), and the count of requests sent and not yet answered (a graceful stop waits for
    them). ``post`` takes each outcome to the node's channel."""

    def __init__(
        self, nursery: trio.Nursery, post: Callable[[Event], None], client_id: str, sasl: SaslClient | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._nursery = nursery
        self._post = post
        self._client_id = client_id
        self._sasl = sasl
        self._ssl_context = ssl_context
        self._peers: dict[int, Peer] = {}
        self.in_flight = 0
        self._idle = trio.Event()

    def send(self, request: OutboundRequest) -> None:
        """Hand ``request`` to its destination's peer task."""
        peer = self._peers.get(request.destination_id)
        if peer is None:
            peer = self._peers[request.destination_id] = Peer(
                request.destination_id, self._post, self._client_id, self._sasl, self._ssl_context)
            self._nursery.start_soon(peer.run)
        self.in_flight += 1
        peer.send.send_nowait(request)

    def answered(self) -> None:
        """One request's outcome reached the node."""
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Until no request is in flight."""
        while self.in_flight > 0:
            self._idle = trio.Event()
            await self._idle.wait()
