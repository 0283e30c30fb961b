"""kafka-python 3.x (an independent client) negotiates ApiVersions with server.net.

The server runs in the test's Trio loop; kafka-python's blocking network layer runs in a worker
thread. kafka-python bootstraps through a Metadata request that a controller does not serve, so
the test drives its connection manager directly: connect to the bootstrap node and wait for the
connection's ApiVersions step, which is exactly what its KafkaClient does first.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from kwire.api_keys import ApiKey
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.describe_cluster_response import DescribeClusterResponse
from messages.generated.describe_quorum_response import DescribeQuorumResponse
from messages.protocol import Request
from messages.runtime import Message
from server.config import Listener
from server.net import HandlerTable, RequestContext, RunningServer, serve

kafka = pytest.importorskip("kafka")
from kafka.net.manager import KafkaConnectionManager  # noqa: E402
from kafka.net.selector import NetworkSelector  # noqa: E402


async def start(nursery: trio.Nursery) -> RunningServer:
    async def dq(request: Request, ctx: RequestContext) -> Message:
        return DescribeQuorumResponse()

    async def dc(request: Request, ctx: RequestContext) -> Message:
        return DescribeClusterResponse()

    table = HandlerTable()
    table.register(ApiKey.DESCRIBE_QUORUM, (0, 2), dq)
    table.register(ApiKey.DESCRIBE_CLUSTER, (0, 1), dc)
    running: RunningServer = await nursery.start(
        lambda task_status: serve([Listener("CONTROLLER", "127.0.0.1", 0)], table, task_status=task_status)
    )
    return running


def negotiate(port: int, **config: Any) -> tuple[dict[int, tuple[int, int]], Any]:
    """Connect with kafka-python and return (the api versions it recorded, the failure if any)."""
    net = NetworkSelector()
    manager = KafkaConnectionManager(net, bootstrap_servers=f"127.0.0.1:{port}", **config)
    node = manager.cluster.bootstrap_brokers()[0]

    async def connect() -> Any:
        conn = manager.get_connection(node.node_id, timeout_ms=10_000)
        await conn.init_future
        return conn

    try:
        try:
            conn = net.run(connect)
        except Exception as exc:  # the failure is the result under test
            return {}, exc
        return dict(conn.broker_version_data.api_versions), None
    finally:
        manager.close()
        net.close()


async def test_kafka_python_negotiates_api_versions(nursery: trio.Nursery) -> None:
    running = await start(nursery)
    versions, failure = await trio.to_thread.run_sync(negotiate, running.port())
    assert failure is None
    assert versions == {
        18: (0, ApiVersionsRequest.HIGHEST_VERSION),
        55: (0, 2),
        60: (0, 1),
    }
    # kafka-python sent ApiVersions at its own maximum (v4, flexible, with software name and
    # version) and the server answered with header v0, which it parsed.
    assert running.connections_accepted == 1
    assert running.connections_closed_on_error == 0


async def test_kafka_python_with_an_invalid_software_name(nursery: trio.Nursery) -> None:
    running = await start(nursery)
    _, failure = await trio.to_thread.run_sync(
        lambda: negotiate(running.port(), client_software_name="not valid!")
    )
    # The server answers INVALID_REQUEST with a body at the request version (v4), as Kafka's
    # ApiVersionsRequest.getErrorResponse does; kafka-python re-reads any ApiVersions error body
    # as v0 and so reports a decoding failure rather than InvalidRequestError. Either way the
    # connection is refused, and the server answered rather than dropping the connection.
    assert isinstance(
        failure, (kafka.errors.InvalidRequestError, kafka.errors.KafkaProtocolError)
    ), repr(failure)
    assert running.connections_closed_on_error == 0
