"""server.net over real loopback sockets: ApiVersions at every version, KIP-511, dispatch,
pipelining, and malformed frames closing only their own connection."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest
import trio
import trio.testing

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from kwire.frame import frame
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_request import PartitionData as DQReqPartition
from messages.generated.describe_quorum_request import TopicData as DQReqTopic
from messages.generated.describe_quorum_response import DescribeQuorumResponse
from messages.generated.describe_quorum_response import PartitionData as DQPartition
from messages.generated.describe_quorum_response import TopicData as DQTopic
from messages.generated.vote_request import VoteRequest
from messages.protocol import Request, decode_response, encode_request
from messages.runtime import Message
from server.config import KRaftConfig, Listener
from server.net import (
    ChannelDispatcher,
    FinalizedFeatures,
    HandlerTable,
    PendingRequest,
    RequestContext,
    RunningServer,
    serve,
)
from server.net.client import KafkaConnection, open_connection

LOCAL = [Listener("CONTROLLER", "127.0.0.1", 0)]
MAX_AV = ApiVersionsRequest.HIGHEST_VERSION
SUPPORTED = [
    SupportedFeatureKey("kraft.version", 0, 1),
    SupportedFeatureKey("metadata.version", 1, 22),
]
FINALIZED = FinalizedFeatures(7, [FinalizedFeatureKey("metadata.version", 21, 21)])


def make_table(seen: list[tuple[Request, RequestContext]] | None = None) -> HandlerTable:
    async def describe_quorum(request: Request, ctx: RequestContext) -> Message:
        if seen is not None:
            seen.append((request, ctx))
        await trio.lowlevel.checkpoint()
        body = request.body
        assert isinstance(body, DescribeQuorumRequest)
        part = body.topics[0].partitions[0].partition_index
        return DescribeQuorumResponse(
            topics=[DQTopic("__cluster_metadata", [DQPartition(part, leader_id=part, leader_epoch=3)])]
        )

    table = HandlerTable(supported=SUPPORTED, finalized=FINALIZED)
    table.register(ApiKey.DESCRIBE_QUORUM, (0, 2), describe_quorum)
    return table


def make_sasl_table() -> HandlerTable:
    """:func:`make_table` whose SaslHandshake and SaslAuthenticate handlers fail the test: on a
    SASL listener the network layer answers them, for logins and re-authentications alike."""
    table = make_table()

    async def api_layer(request: Request, ctx: RequestContext) -> Message:
        raise AssertionError(f"{type(request.body).__name__} reached the API layer")

    table.register(ApiKey.SASL_HANDSHAKE, (0, 1), api_layer)
    table.register(ApiKey.SASL_AUTHENTICATE, (0, 2), api_layer)
    return table


async def start(nursery: trio.Nursery, table: HandlerTable | None = None, **kw: object) -> RunningServer:
    running: RunningServer = await nursery.start(
        lambda task_status: serve(LOCAL, table or make_table(), task_status=task_status, **kw)
    )
    return running


async def read_exactly(stream: trio.SocketStream, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = await stream.receive_some(n - len(buf))
        if not chunk:
            raise EOFError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


async def read_frame(stream: trio.SocketStream) -> bytes:
    (size,) = struct.unpack(">i", await read_exactly(stream, 4))
    return await read_exactly(stream, size)


async def assert_closed(stream: trio.SocketStream, timeout_s: float = 5) -> None:
    with trio.fail_after(timeout_s):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return
            if not data:
                return


def dq_request(partition: int) -> DescribeQuorumRequest:
    return DescribeQuorumRequest([DQReqTopic("__cluster_metadata", [DQReqPartition(partition)])])


def av_request(version: int, name: str = "kwire-test", sw: str = "1.0") -> ApiVersionsRequest:
    if version < 3:
        return ApiVersionsRequest()
    return ApiVersionsRequest(client_software_name=name, client_software_version=sw)


EXPECTED_KEYS = [
    ApiVersion(int(ApiKey.API_VERSIONS), 0, MAX_AV),
    ApiVersion(int(ApiKey.DESCRIBE_QUORUM), 0, 2),
]


@pytest.mark.parametrize("version", range(0, MAX_AV + 1))
async def test_api_versions_every_version(nursery: trio.Nursery, version: int) -> None:
    running = await start(nursery)
    stream = await trio.open_tcp_stream("127.0.0.1", running.port())
    await stream.send_all(frame(encode_request(av_request(version), version, 1234, "c")))
    payload = await read_frame(stream)
    # Header v0 at every version: just the correlation id, the body right after it.
    assert payload[:4] == (1234).to_bytes(4, "big")
    body = ApiVersionsResponse.decode(payload[4:], version)
    assert body.error_code == Errors.NONE
    assert body.api_keys == EXPECTED_KEYS
    if version >= 3:
        names = [f.name for f in body.supported_features]
        # Below v4 a supported feature with minimum 0 is left out (Kafka does the same).
        assert names == (["kraft.version", "metadata.version"] if version >= 4 else ["metadata.version"])
        assert body.finalized_features_epoch == 7
        assert body.finalized_features == [FinalizedFeatureKey("metadata.version", 21, 21)]
    await stream.aclose()


@pytest.mark.parametrize("version", [MAX_AV + 1, 127, -1])
async def test_unknown_api_versions_version_gets_v0_unsupported(nursery: trio.Nursery, version: int) -> None:
    running = await start(nursery)
    stream = await trio.open_tcp_stream("127.0.0.1", running.port())
    # A client from the future: header v2 (flexible), a body we cannot know.
    header = struct.pack(">hhih", 18, version, 99, 3) + b"abc" + b"\x00"
    await stream.send_all(frame(header + b"\x07future-body\x00"))
    payload = await read_frame(stream)
    assert payload[:4] == (99).to_bytes(4, "big")
    body = ApiVersionsResponse.decode(payload[4:], 0)
    assert body.error_code == Errors.UNSUPPORTED_VERSION
    assert body.api_keys == EXPECTED_KEYS
    # The connection stays usable: retry at the advertised maximum.
    await stream.send_all(frame(encode_request(av_request(MAX_AV), MAX_AV, 100, "c")))
    header_v0, response = decode_response(await read_frame(stream), 18, MAX_AV)
    assert header_v0.correlation_id == 100
    assert response.error_code == Errors.NONE


@pytest.mark.parametrize(
    ("name", "sw", "ok"),
    [
        ("apache-kafka-java", "3.9.0", True),
        ("kafka-python", "3.0.12", True),
        ("a", "1", True),
        ("", "1.0", False),
        ("-bad", "1.0", False),
        ("bad-", "1.0", False),
        ("ok", "1.0 beta", False),
        ("ok", "", False),
    ],
)
async def test_api_versions_software_name_validation(
    nursery: trio.Nursery, name: str, sw: str, ok: bool
) -> None:
    running = await start(nursery)
    stream = await trio.open_tcp_stream("127.0.0.1", running.port())
    for version in range(3, MAX_AV + 1):
        await stream.send_all(frame(encode_request(av_request(version, name, sw), version, version, "c")))
        _, body = decode_response(await read_frame(stream), 18, version)
        assert body.error_code == (Errors.NONE if ok else Errors.INVALID_REQUEST)
        assert (body.api_keys == EXPECTED_KEYS) if ok else body.api_keys == []
    # Versions without the fields are never checked.
    await stream.send_all(frame(encode_request(ApiVersionsRequest(), 2, 1, "c")))
    _, body = decode_response(await read_frame(stream), 18, 2)
    assert body.error_code == Errors.NONE


async def test_dispatched_round_trip_every_version(nursery: trio.Nursery) -> None:
    seen: list[tuple[Request, RequestContext]] = []
    running = await start(nursery, make_table(seen))
    async with await open_connection("127.0.0.1", running.port(), "rt-client") as conn:
        assert conn.version_for(dq_request(0)) == 2
        for version in (0, 1, 2):
            response = await conn.request(dq_request(version + 5), version)
            assert isinstance(response, DescribeQuorumResponse)
            assert response.topics[0].partitions[0].leader_id == version + 5
    assert [r.header.request_api_version for r, _ in seen] == [0, 1, 2]
    assert {ctx.listener_name for _, ctx in seen} == {"CONTROLLER"}
    assert seen[0][0].header.client_id == "rt-client"
    assert seen[0][1].peer[0] == "127.0.0.1"


async def test_pipelined_requests_answered_in_order(nursery: trio.Nursery) -> None:
    running = await start(nursery)
    stream = await trio.open_tcp_stream("127.0.0.1", running.port())
    n = 200
    batch = bytearray()
    kinds = []
    for corr in range(n):
        if corr % 3 == 0:
            batch += frame(encode_request(av_request(MAX_AV), MAX_AV, corr, "p"))
            kinds.append(18)
        else:
            batch += frame(encode_request(dq_request(corr), 2, corr, "p"))
            kinds.append(55)
    await stream.send_all(bytes(batch))
    for corr in range(n):
        payload = await read_frame(stream)
        version = MAX_AV if kinds[corr] == 18 else 2
        header, body = decode_response(payload, kinds[corr], version)
        assert header.correlation_id == corr
        if kinds[corr] == 55:
            assert body.topics[0].partitions[0].leader_id == corr


async def test_malformed_frame_closes_only_that_connection(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="server.net")
    running = await start(nursery)
    healthy = await open_connection("127.0.0.1", running.port())
    bad = await trio.open_tcp_stream("127.0.0.1", running.port())
    bad_port = bad.socket.getsockname()[1]
    # A DescribeQuorum v2 header followed by junk that is not a valid body.
    await bad.send_all(frame(encode_request(dq_request(1), 2, 5, "x")[:14] + b"\xff\xff\xff\xff\xff\xff"))
    await assert_closed(bad)
    response = await healthy.request(dq_request(3))
    assert response.topics[0].partitions[0].leader_id == 3
    assert running.connections_closed_on_error == 1
    messages = [r.getMessage() for r in caplog.records if r.name == "server.net"]
    assert any(f"127.0.0.1:{bad_port}" in m and "closing connection" in m for m in messages), messages
    await healthy.aclose()


@pytest.mark.parametrize(
    ("label", "data"),
    [
        ("negative size", struct.pack(">i", -1)),
        ("size over the limit, no body sent", struct.pack(">i", 4097)),
        ("unknown api key", frame(struct.pack(">hhih", 999, 0, 1, -1))),
        ("codec but no handler (Produce)", frame(struct.pack(">hhih", 0, 9, 1, -1))),
        ("codec but no handler (Vote)", frame(encode_request(VoteRequest(), 0, 1, "x"))),
        ("version not enabled", frame(struct.pack(">hhih", 55, 3, 1, -1) + b"\x00")),
        ("header too short", frame(b"\x00\x12")),
        ("trailing bytes after ApiVersions v0", frame(struct.pack(">hhih", 18, 0, 1, -1) + b"x")),
        ("bad tagged-field varint", frame(struct.pack(">hhih", 18, 3, 1, -1) + b"\xff\xff\xff\xff\xff\xff")),
    ],
)
async def test_bad_requests_close_the_connection(nursery: trio.Nursery, label: str, data: bytes) -> None:
    running = await start(nursery, max_request_bytes=4096)
    stream = await trio.open_tcp_stream("127.0.0.1", running.port())
    await stream.send_all(data)
    await assert_closed(stream)
    assert running.connections_closed_on_error == 1, label


async def test_handler_failure_closes_connection_not_server(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request: Request, ctx: RequestContext) -> Message:
        raise RuntimeError("handler bug")

    table = make_table()
    table.register(ApiKey.DESCRIBE_CLUSTER, (0, 2), broken)
    running = await start(nursery, table)
    conn = await open_connection("127.0.0.1", running.port())
    with pytest.raises(ConnectionError):
        await conn.request(DescribeClusterRequest())
    assert any(r.exc_info and "handler bug" in str(r.exc_info[1]) for r in caplog.records)
    async with await open_connection("127.0.0.1", running.port()) as again:
        assert (await again.request(dq_request(4))).topics[0].partitions[0].leader_id == 4


async def test_idle_connections_are_closed(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    running = await start(nursery, idle_timeout_ms=60_000)
    stream = await trio.open_tcp_stream("127.0.0.1", running.port())
    start_time = trio.current_time()
    await assert_closed(stream, timeout_s=120)
    assert 60 <= trio.current_time() - start_time < 120
    # A connection that keeps talking is not idle.
    async with await open_connection("127.0.0.1", running.port()) as conn:
        for _ in range(5):
            await trio.sleep(40)
            await conn.request(dq_request(1))


async def test_dispatcher_versions_are_checked() -> None:
    async def h(request: Request, ctx: RequestContext) -> Message:
        raise AssertionError

    table = HandlerTable()
    table.register(ApiKey.DESCRIBE_QUORUM, (0, 99), h)
    with pytest.raises(ValueError, match="outside the codec"):
        await serve(LOCAL, table)
    table = HandlerTable()
    table.register(ApiKey.API_VERSIONS, (0, 3), h)
    with pytest.raises(ValueError, match="answered by the network layer"):
        await serve(LOCAL, table)


async def test_port_zero_reports_bound_ports(nursery: trio.Nursery) -> None:
    running: RunningServer = await nursery.start(
        lambda task_status: serve(
            [Listener("A", "127.0.0.1", 0), Listener("B", "localhost", 0)],
            make_table(),
            task_status=task_status,
        )
    )
    a, b = running.port("A"), running.port("b")
    assert a != 0 and b != 0 and a != b
    assert {bound.port for bound in running.listeners if bound.name == "B"} == {b}
    for port in (a, b):
        async with await open_connection("127.0.0.1", port) as conn:
            assert conn.api_versions.get(55) is not None


async def test_channel_dispatcher_answers_out_of_order_across_connections(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    send, receive = trio.open_memory_channel[PendingRequest](0)
    dispatcher = ChannelDispatcher({int(ApiKey.DESCRIBE_QUORUM): (0, 2)}, send, SUPPORTED, FINALIZED)
    running: RunningServer = await nursery.start(
        lambda task_status: serve(LOCAL, dispatcher, task_status=task_status)
    )
    a = await open_connection("127.0.0.1", running.port(), "a")
    b = await open_connection("127.0.0.1", running.port(), "b")
    results: dict[str, int] = {}

    async def ask(name: str, conn: KafkaConnection, partition: int) -> None:
        response = await conn.request(dq_request(partition))
        results[name] = response.topics[0].partitions[0].leader_id

    async with trio.open_nursery() as clients:
        clients.start_soon(ask, "a", a, 1)
        first = await receive.receive()
        clients.start_soon(ask, "b", b, 2)
        second = await receive.receive()
        assert (first.context.connection_id, second.context.connection_id) == (1, 2)
        for pending in (second, first):  # the node answers b before a
            part = pending.request.body.topics[0].partitions[0].partition_index
            pending.respond(
                DescribeQuorumResponse(topics=[DQTopic("__cluster_metadata", [DQPartition(part, leader_id=part * 10)])])
            )
        with pytest.raises(RuntimeError):
            first.respond(DescribeQuorumResponse())
    assert results == {"a": 10, "b": 20}

    # Features are read on every ApiVersions request, so the node can change them.
    dispatcher.finalized = FinalizedFeatures(8, [FinalizedFeatureKey("metadata.version", 22, 22)])
    async with await open_connection("127.0.0.1", running.port()) as c:
        assert c.api_versions_response is not None
        assert c.api_versions_response.finalized_features_epoch == 8

    # A failed request closes its connection only.
    async with trio.open_nursery() as clients:
        async def failing() -> None:
            with pytest.raises(ConnectionError):
                await a.request(dq_request(3))

        clients.start_soon(failing)
        (await receive.receive()).fail(ValueError("state machine refused"))
    assert any("state machine refused" in (r.exc_text or str(r.exc_info)) for r in caplog.records)

    # With the node gone, requests close their connections instead of hanging.
    await receive.aclose()
    with pytest.raises(ConnectionError):
        await b.request(dq_request(4))
    assert running.connections_closed_on_error == 2


async def test_ipv6_listener(nursery: trio.Nursery) -> None:
    try:
        probe = trio.socket.socket(trio.socket.AF_INET6)
        with probe:
            await probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    running: RunningServer = await nursery.start(
        lambda task_status: serve([Listener("V6", "::1", 0)], make_table(), task_status=task_status)
    )
    assert running.listeners[0].host == "::1"
    async with await open_connection("::1", running.port()) as conn:
        assert conn.peer == f"[::1]:{running.port()}"
        assert (await conn.request(dq_request(6))).topics[0].partitions[0].leader_id == 6


async def test_serve_from_config_uses_its_limits(nursery: trio.Nursery) -> None:
    config = KRaftConfig.from_properties(
        {
            "process.roles": "controller",
            "node.id": "1",
            "listeners": "CONTROLLER://127.0.0.1:0",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.bootstrap.servers": "localhost:9093",
            "socket.request.max.bytes": "200",
        }
    )
    running: RunningServer = await nursery.start(
        lambda task_status: serve(config, make_table(), task_status=task_status)
    )
    assert [b.name for b in running.listeners] == ["CONTROLLER"]
    async with await open_connection("127.0.0.1", running.port()) as conn:
        assert (await conn.request(dq_request(2))).topics[0].partitions[0].leader_id == 2
    stream = await trio.open_tcp_stream("127.0.0.1", running.port())
    await stream.send_all(struct.pack(">i", 201))
    await assert_closed(stream)
    assert running.connections_closed_on_error == 1


async def test_large_records_are_sent_from_their_own_buffer_intact_and_in_order(
    nursery: trio.Nursery,
) -> None:
    """A response's records of 16 KiB or more are held by reference and sent as a part of their
    own (kwire.wire.ScatterBuffer); the frames on the wire must be whole and in order."""
    from kwire.uuid import METADATA_TOPIC_ID
    from messages.generated.fetch_request import FetchPartition, FetchRequest, FetchTopic
    from messages.generated.fetch_response import FetchableTopicResponse, FetchResponse
    from messages.generated.fetch_response import PartitionData as FetchPartitionData

    def records_for(offset: int) -> bytes:
        return bytes((offset + i) & 0xFF for i in range(256)) * 4096  # 1 MiB

    async def fetch(request: Request, ctx: RequestContext) -> Message:
        body = request.body
        assert isinstance(body, FetchRequest)
        offset = body.topics[0].partitions[0].fetch_offset
        return FetchResponse(responses=[FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[
            FetchPartitionData(high_watermark=offset, records=records_for(offset))])])

    table = make_table()
    table.register(ApiKey.FETCH, (13, 17), fetch)
    running = await start(nursery, table)
    async with await open_connection("127.0.0.1", running.port(), "fetch-client") as conn:
        async def ask(offset: int) -> None:
            request = FetchRequest(topics=[FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[
                FetchPartition(fetch_offset=offset)])])
            response = await conn.request(request, 17)
            assert isinstance(response, FetchResponse)
            partition = response.responses[0].partitions[0]
            assert partition.high_watermark == offset
            assert partition.records == records_for(offset)

        async with trio.open_nursery() as asks:
            for offset in range(6):
                asks.start_soon(ask, offset)
        described = await conn.request(dq_request(3), 2)
        assert isinstance(described, DescribeQuorumResponse)


async def test_send_parts_writes_every_part_in_order_through_partial_sends() -> None:
    """server.net.send_parts on a plain socket: more parts than one sendmsg takes, empty ones,
    and a send buffer far smaller than the whole, so most sendmsg calls stop inside a part; the
    peer reads the parts joined, and a gone peer raises BrokenResourceError."""
    import socket as stdlib_socket

    from server.net.server import IOV_MAX, send_parts

    left, right = trio.socket.socketpair()
    left.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_SNDBUF, 4096)
    stream, peer = trio.SocketStream(left), trio.SocketStream(right)
    parts: list[bytes | bytearray | memoryview] = []
    for i in range(IOV_MAX + 300):
        size = (i * 7919) % 3001  # 0 (an empty part) to 3,000 bytes
        data = bytes((i + j) & 0xFF for j in range(size))
        parts.append(data if i % 3 == 0 else bytearray(data) if i % 3 == 1 else memoryview(data))
    expected = b"".join(parts)
    received = bytearray()

    async def read_all() -> None:
        while len(received) < len(expected):
            chunk = await peer.receive_some(65536)
            assert chunk
            received.extend(chunk)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all)
            await send_parts(stream, parts)
    assert bytes(received) == expected
    await peer.aclose()
    with pytest.raises(trio.BrokenResourceError), trio.fail_after(10):
        while True:  # the first sends may still land in the buffer before the reset shows
            await send_parts(stream, [b"header", b"x" * 65536, b"tail"])
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await send_parts(stream, [b"a", b"b"])


async def test_send_parts_sends_a_file_region_from_its_file(tmp_path: Path) -> None:
    """A FileRegion among a response's parts goes out by sendfile between the buffers around
    it, over a TCP connection whose small send buffer makes sendfile stop and wait many times;
    on a stream that is not a socket (TLS) it is read into the joined buffer. Either way the
    region is closed once sent; a region whose file was truncated under it is not sent: the
    connection fails and the region is closed too."""
    import socket as stdlib_socket

    from server.net.server import send_parts
    from storage.fileio import FileRegion

    data = bytes((i * 31 + i // 977) & 0xFF for i in range(600_000))
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        listener = stdlib_socket.create_server(("127.0.0.1", 0))
        client = stdlib_socket.create_connection(listener.getsockname())
        server_side, _ = listener.accept()
        listener.close()
        client.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_SNDBUF, 8192)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(client))
        peer = trio.SocketStream(trio.socket.from_stdlib_socket(server_side))

        async def received(n: int) -> bytes:
            out = bytearray()
            while len(out) < n:
                chunk = await peer.receive_some(65536)
                assert chunk
                out += chunk
            return bytes(out)

        region = FileRegion(fd, 1000, 500_000, path)
        parts = [b"head", bytearray(b"er"), region, memoryview(b"tail")]
        expected = b"header" + data[1000:501_000] + b"tail"
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_parts, stream, parts)
                assert await received(len(expected)) == expected
        assert region.fd == -1

        send, receive = trio.testing.memory_stream_pair()
        region = FileRegion(fd, 7, 70_000, path)
        with trio.fail_after(10):
            await send_parts(send, [b"<", region, b">"])
            got = b""
            while len(got) < 70_002:
                got += await receive.receive_some()
        assert got == b"<" + data[7:70_007] + b">" and region.fd == -1

        region = FileRegion(fd, 0, len(data), path)
        os.truncate(path, 100_000)
        with pytest.raises(trio.BrokenResourceError, match="truncated"), trio.fail_after(10):
            await send_parts(stream, [b"header", region, b"tail"])
        assert region.fd == -1
        await stream.aclose()
        await peer.aclose()
    finally:
        os.close(fd)
