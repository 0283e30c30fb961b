"""Failpoints on a whole node (``server.failpoints``, ``server.node.metrics``): armed through
``kwire failpoint`` on the node's ``/failpoints`` endpoint beside ``/metrics``, a heartbeat is
answered with the armed error, held for the armed delay, or not answered, and clearing the
point restores the normal answer. Without ``kwire.unsafe.test.failpoints`` the endpoint is 404.
Real clock (the HTTP server is a thread)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from server.config import KRaftConfig
from server.failpoints import Failpoints
from server.net.client import open_connection
from server.node import Node
from server.node.metrics import MetricsServer
from tests.server.test_node import _config, _free_port, _until
from tests.server.test_node_brokers import _registration
from tools import failpoint_cmd
from tools.cli import main
from tools.storage_format import format_standalone


async def _cli(*argv: str) -> int:
    return await trio.to_thread.run_sync(main, list(argv))


async def test_an_armed_heartbeat_error_is_answered_and_clearing_restores_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _free_port()
    config = _config(tmp_path / "data", 1, port, extra={
        "kwire.prometheus.port": "0", "kwire.prometheus.host": "127.0.0.1", "kwire.unsafe.test.failpoints": "true"})
    format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(3))
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.controller is not None and node.controller.metadata_version is not None
                     and node.metrics_port is not None, timeout_s=30)
        endpoint = f"127.0.0.1:{node.metrics_port}"
        async with await open_connection("127.0.0.1", port) as conn:
            registered = await conn.request(_registration(node, 7, Uuid.from_longs(7, 7)), 4)
            assert registered.error_code == Errors.NONE

            async def beat() -> tuple[int, float]:
                started = trio.current_time()
                answer = await conn.request(BrokerHeartbeatRequest(
                    broker_id=7, broker_epoch=registered.broker_epoch, current_metadata_offset=registered.broker_epoch,
                    want_fence=False, want_shut_down=False), 2)
                return answer.error_code, trio.current_time() - started

            assert await _cli("failpoint", "set", "controller.heartbeat", "error(41)", "--endpoint", endpoint) == 0
            assert (await beat())[0] == Errors.NOT_CONTROLLER
            listed = await trio.to_thread.run_sync(failpoint_cmd.call, endpoint, "GET")
            assert listed["controller.heartbeat"]["fired"] == 1
            assert await _cli("failpoint", "set", "controller.heartbeat", "delay(400)", "--endpoint", endpoint) == 0
            error, took_s = await beat()
            assert error == Errors.NONE and took_s >= 0.4, took_s
            capsys.readouterr()
            assert await _cli("failpoint", "list", "--endpoint", endpoint) == 0
            assert "delay(400)" in capsys.readouterr().out
            assert await _cli("failpoint", "clear", "--endpoint", endpoint) == 0
            error, took_s = await beat()
            assert error == Errors.NONE and took_s < 0.4, took_s
            assert await _cli("failpoint", "set", "no.such.point", "drop", "--endpoint", endpoint) == 1
        node.stop()


def test_the_endpoint_is_404_when_failpoints_are_off_and_refuses_bad_actions() -> None:
    off = MetricsServer("127.0.0.1", 0)
    on = MetricsServer("127.0.0.1", 0, Failpoints(random.Random(1).random))
    try:
        with pytest.raises(RuntimeError, match="HTTP 404"):
            failpoint_cmd.call(f"127.0.0.1:{off.port}", "GET")
        with pytest.raises(RuntimeError, match="HTTP 400"):
            failpoint_cmd.call(f"127.0.0.1:{on.port}", "PUT", "controller.request", {"action": "sleep(3)"})
        assert failpoint_cmd.call(f"127.0.0.1:{on.port}", "PUT", "controller.request",
                                  {"action": "drop", "probability": 0.5})["controller.request"]["probability"] == 0.5
        assert failpoint_cmd.call(f"127.0.0.1:{on.port}", "DELETE", "controller.request") == {"cleared": True}
    finally:
        off.close()
        on.close()


def test_the_off_switch_is_the_default(tmp_path: Path) -> None:
    config = _config(tmp_path, 1, 9093)
    assert not config.unsafe_test_failpoints
    assert KRaftConfig.from_properties({**config.raw, "kwire.unsafe.test.failpoints": "true"}).unsafe_test_failpoints
