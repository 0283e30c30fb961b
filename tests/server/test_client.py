"""server.net.client against server.net and against scripted fake nodes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from kwire.frame import FrameDecoder
from kwire.negotiation import ApiVersionsError
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.api_versions_response import ApiVersion, ApiVersionsResponse
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_response import DescribeQuorumResponse
from messages.generated.describe_quorum_response import TopicData as DQTopic
from messages.generated.vote_request import VoteRequest
from messages.protocol import Request, decode_request, encode_response
from messages.runtime import Message
from server.config import Listener
from server.net import HandlerTable, RequestContext, RunningServer, serve
from server.net.client import (
    KafkaConnectionError,
    RequestTimeoutError,
    UnsupportedVersionError,
    open_connection,
)

MAX_AV = ApiVersionsRequest.HIGHEST_VERSION


async def start_server(nursery: trio.Nursery) -> RunningServer:
    async def dq(request: Request, ctx: RequestContext) -> Message:
        return DescribeQuorumResponse(topics=[DQTopic(f"v{request.header.request_api_version}")])

    table = HandlerTable()
    table.register(ApiKey.DESCRIBE_QUORUM, (0, 1), dq)
    running: RunningServer = await nursery.start(
        lambda task_status: serve([Listener("C", "127.0.0.1", 0)], table, task_status=task_status)
    )
    return running


class Close:
    """A script reply: send ``data``, then close the connection."""

    def __init__(self, data: bytes) -> None:
        self.data = data


Script = Callable[[Request], Awaitable[bytes | Close | None]]


async def start_fake(nursery: trio.Nursery, script: Script) -> int:
    """A node that decodes each request and answers with whatever ``script`` returns
    (None: no answer; Close: answer, then close)."""

    async def handle(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(65536):
                decoder.feed(data)
                while (f := decoder.next_frame()) is not None:
                    reply = await script(decode_request(f))
                    if isinstance(reply, Close):
                        await stream.send_all(reply.data)
                        return
                    if reply is not None:
                        await stream.send_all(reply)

    listeners = await nursery.start(trio.serve_tcp, handle, 0)
    return int(listeners[0].socket.getsockname()[1])


def av_ok(corr: int, version: int, keys: list[ApiVersion]) -> bytes:
    return bytes(encode_response(ApiVersionsResponse(api_keys=keys), version, corr))


async def test_against_server(nursery: trio.Nursery) -> None:
    running = await start_server(nursery)
    conn = await open_connection("127.0.0.1", running.port(), "tool")
    assert conn.api_versions_version == MAX_AV
    assert conn.api_versions.get(55) is not None and conn.api_versions.get(55).max_version == 1  # type: ignore[union-attr]
    assert conn.version_for(DescribeQuorumRequest()) == 1
    assert (await conn.request(DescribeQuorumRequest())).topics[0].topic_name == "v1"
    assert (await conn.request(DescribeQuorumRequest(), 0)).topics[0].topic_name == "v0"
    with pytest.raises(UnsupportedVersionError):
        await conn.request(DescribeQuorumRequest(), 2)
    with pytest.raises(UnsupportedVersionError, match="VOTE"):
        await conn.request(VoteRequest())
    # ApiVersions itself can be sent again on an open connection.
    again = await conn.request(ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    assert again.error_code == 0
    await conn.aclose()
    assert conn.closed
    with pytest.raises(KafkaConnectionError, match="closed"):
        await conn.request(DescribeQuorumRequest())
    await conn.aclose()  # idempotent


async def test_retries_api_versions_at_the_nodes_max(nursery: trio.Nursery) -> None:
    seen: list[int] = []
    keys = [ApiVersion(18, 0, 2), ApiVersion(55, 0, 2)]

    async def script(request: Request) -> bytes:
        version = request.header.request_api_version
        seen.append(version)
        if version > 2:
            # KIP-511: a v0 body with UNSUPPORTED_VERSION and the node's ApiVersions range.
            body = ApiVersionsResponse(error_code=Errors.UNSUPPORTED_VERSION, api_keys=keys[:1])
            return bytes(encode_response(body, 0, request.header.correlation_id))
        return av_ok(request.header.correlation_id, version, keys)

    port = await start_fake(nursery, script)
    async with await open_connection("127.0.0.1", port) as conn:
        assert seen == [MAX_AV, 2]
        assert conn.api_versions_version == 2
        assert conn.version_for(DescribeQuorumRequest()) == 2


async def test_other_api_versions_error_fails(nursery: trio.Nursery) -> None:
    async def script(request: Request) -> bytes:
        body = ApiVersionsResponse(error_code=Errors.INVALID_REQUEST)
        return bytes(encode_response(body, request.header.request_api_version, request.header.correlation_id))

    port = await start_fake(nursery, script)
    with pytest.raises(ApiVersionsError):
        await open_connection("127.0.0.1", port)


async def test_request_timeout_closes(nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> None:
    async def script(request: Request) -> bytes | None:
        if request.header.request_api_key == 18:
            return av_ok(request.header.correlation_id, request.header.request_api_version, [ApiVersion(18, 0, MAX_AV), ApiVersion(55, 0, 2)])
        return None  # never answers anything else

    port = await start_fake(nursery, script)
    conn = await open_connection("127.0.0.1", port, request_timeout_ms=2000)
    t0 = trio.current_time()
    with pytest.raises(RequestTimeoutError):
        await conn.request(DescribeQuorumRequest())
    assert trio.current_time() - t0 == pytest.approx(2.0)
    assert conn.closed


async def test_wrong_correlation_id_closes(nursery: trio.Nursery) -> None:
    async def script(request: Request) -> bytes:
        corr = request.header.correlation_id
        if request.header.request_api_key == 18:
            return av_ok(corr, request.header.request_api_version, [ApiVersion(18, 0, MAX_AV), ApiVersion(55, 0, 2)])
        return bytes(encode_response(DescribeQuorumResponse(), 2, corr + 7))

    port = await start_fake(nursery, script)
    conn = await open_connection("127.0.0.1", port)
    with pytest.raises(KafkaConnectionError, match="correlation id"):
        await conn.request(DescribeQuorumRequest())
    assert conn.closed


@pytest.mark.parametrize(
    "reply",
    [
        b"\x00\x00\x00\x10\x00",  # a frame cut short
        b"",  # nothing at all
        b"\x00\x00\x00\x06\x00\x00\x00\x01\xff\xff",  # a frame that is not a response
        b"\xff\xff\xff\xff",  # a negative size
    ],
)
async def test_peer_closing_or_garbage(nursery: trio.Nursery, reply: bytes) -> None:
    async def script(request: Request) -> bytes | Close:
        if request.header.request_api_key == 18:
            return av_ok(request.header.correlation_id, request.header.request_api_version, [ApiVersion(18, 0, MAX_AV), ApiVersion(55, 0, 2)])
        return Close(reply)

    port = await start_fake(nursery, script)
    conn = await open_connection("127.0.0.1", port)
    with trio.fail_after(5), pytest.raises(KafkaConnectionError):
        await conn.request(DescribeQuorumRequest())
    assert conn.closed


async def test_connect_refused() -> None:
    with trio.socket.socket() as s:
        await s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(KafkaConnectionError, match="cannot connect"):
        await open_connection("127.0.0.1", port)
