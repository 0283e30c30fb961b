"""The brokers section's simulated brokers follow the leadership (``tools.bench.brokers._drive``).

Two stand-in controllers on loopback: the one the bench found active registers a few brokers
and then loses the leadership to the other (as a kwire leader can under a registration storm on
a loaded machine), answering NOT_CONTROLLER from then on and listing the other as the active
controller. Brokers that kept asking the first node, as the section's did, were never unfenced:
the run ended with "only N of M brokers were unfenced within 240 s"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.broker_heartbeat_response import BrokerHeartbeatResponse
from messages.generated.broker_registration_response import BrokerRegistrationResponse
from messages.generated.create_topics_request import CreateTopicsRequest
from messages.generated.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from messages.generated.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from messages.protocol import Request
from messages.runtime import Message
from server.config import Listener
from server.net import HandlerTable, RequestContext, RunningServer, serve
from tools.bench import brokers

CONTROLLER_ENDPOINT_TYPE = 2
TOPIC_ID = Uuid.from_longs(7, 7)


MOVE_AFTER_REGISTRATIONS = 2
"""Registrations node 1 answers before the leadership moves to node 2."""


def _controller(node_id: int, ports: list[int], state: dict[str, int]) -> HandlerTable:
    """Stand-in controller ``node_id`` (ids are 1-based indexes into ``ports``); ``state``
    holds the active controller's id ("active") and counts the requests each node answered
    while active ("registration@1" ...). Node 1 hands the leadership to node 2 once it has
    answered :data:`MOVE_AFTER_REGISTRATIONS` registrations."""

    def leads(what: str) -> bool:
        if state["active"] != node_id:
            return False
        key = f"{what}@{node_id}"
        state[key] = state.get(key, 0) + 1
        return True

    async def describe_cluster(request: Request, ctx: RequestContext) -> Message:
        return DescribeClusterResponse(
            endpoint_type=CONTROLLER_ENDPOINT_TYPE, cluster_id=brokers.CLUSTER_ID, controller_id=state["active"],
            brokers=[DescribeClusterBroker(broker_id=i + 1, host="127.0.0.1", port=p) for i, p in enumerate(ports)],
        )

    async def register(request: Request, ctx: RequestContext) -> Message:
        if not leads("registration"):
            return BrokerRegistrationResponse(error_code=Errors.NOT_CONTROLLER)
        if node_id == 1 and state["registration@1"] == MOVE_AFTER_REGISTRATIONS:
            state["active"] = 2
        return BrokerRegistrationResponse(broker_epoch=10)

    async def heartbeat(request: Request, ctx: RequestContext) -> Message:
        if not leads("heartbeat"):
            return BrokerHeartbeatResponse(error_code=Errors.NOT_CONTROLLER)
        return BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False)

    async def create_topics(request: Request, ctx: RequestContext) -> Message:
        assert isinstance(request.body, CreateTopicsRequest)
        name = request.body.topics[0].name
        if not leads("create"):
            return CreateTopicsResponse(topics=[CreatableTopicResult(name=name, error_code=Errors.NOT_CONTROLLER)])
        return CreateTopicsResponse(topics=[CreatableTopicResult(name=name, topic_id=TOPIC_ID)])

    table = HandlerTable()
    table.register(ApiKey.DESCRIBE_CLUSTER, (0, 2), describe_cluster)
    table.register(ApiKey.BROKER_REGISTRATION, (0, 4), register)
    table.register(ApiKey.BROKER_HEARTBEAT, (0, 1), heartbeat)
    table.register(ApiKey.CREATE_TOPICS, (2, 7), create_topics)
    return table


async def _no_wait(port: int) -> dict[str, int]:
    return {"metadata.version": 27}


def test_brokers_follow_the_leadership_that_moved_before_they_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(brokers, "START_TIMEOUT_S", 10.0)
    monkeypatch.setattr(brokers, "KILL_WAIT_S", 0.2)
    monkeypatch.setattr(brokers, "wait_finalized", _no_wait)
    load = brokers.Load(3, 0.2, 0.4, "test: 3 brokers", session_timeout_ms=200, heartbeat_interval_ms=100)
    state = {"active": 1}
    log_dirs: list[int] = []

    def log_dir_of(port: int) -> Path:
        log_dirs.append(port)
        return tmp_path

    async def main() -> Any:
        ports = [0, 0]
        async with trio.open_nursery() as nursery:
            # ports are known once both listen; the handlers read the list when asked
            for i in range(2):
                table = _controller(i + 1, ports, state)
                running: RunningServer = await nursery.start(
                    lambda task_status, table=table: serve([Listener("C", "127.0.0.1", 0)], table, task_status=task_status))
                ports[i] = running.port()
            with trio.fail_after(30):
                outcome = await brokers._drive(ports[0], ports, [], load, log_dir_of)
            nursery.cancel_scope.cancel()
        return outcome, ports

    outcome, ports = trio.run(main)
    assert isinstance(outcome, brokers.Row), outcome  # before: "only 0 of 3 brokers were unfenced within 10 s"
    assert outcome.all_unfenced_s is not None and outcome.heartbeats_per_s
    assert outcome.errors == 0
    assert state["active"] == 2 and state["registration@1"] == MOVE_AFTER_REGISTRATIONS
    assert outcome.redirects >= 1  # the last broker's registration at least found node 1 no longer active
    assert state["registration@2"] >= 1 and state["heartbeat@2"] >= 3
    assert state["create@2"] == 1 and "create@1" not in state  # the topic went to the active controller
    assert log_dirs == [ports[1]]  # and its log is the one read
    # the stand-ins write no log: no partition moves, which the row reports
    assert outcome.error == f"0 of {brokers.KILL_PARTITIONS} partitions got a new leader after the broker died"


def test_a_failed_side_keeps_the_controllers_output(tmp_path: Path) -> None:
    root = tmp_path / "run" / "kwire"
    (root / "logs-1").mkdir(parents=True)
    (root / "kwire-1.out").write_text("node 1: Leader in epoch 1\n", encoding="utf-8")
    (root / "logs-1" / "controller.log").write_text("elected\n", encoding="utf-8")
    (root / "kwire-1").mkdir()  # a metadata directory: not copied
    kept = brokers.keep_output(root, tmp_path / "kept")
    assert kept == tmp_path / "kept"
    assert (kept / "kwire-1.out").read_text(encoding="utf-8") == "node 1: Leader in epoch 1\n"
    assert (kept / "logs-1" / "controller.log").read_text(encoding="utf-8") == "elected\n"
    assert not (kept / "kwire-1").exists()
    assert brokers.keep_output(tmp_path / "empty", tmp_path / "none") is None
    assert not (tmp_path / "none").exists()
