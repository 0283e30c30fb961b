"""The time limit on the controller's plug-ins (``server.node.plugin_guard``), and the other ways
a plug-in can be broken: a policy or a placer that does not answer within
``kwire.plugin.timeout.ms`` is answered with its refusal code and a message naming it and the
limit, a plug-in still in that call is refused at once until it returns, and the controller
serves the next request as before; a policy that returns a value instead of raising is refused
with a message saying how a policy refuses. Loaded as a node loads them (``guard=True``) and
run by the controller host of tests/controller/test_host.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kwire.errors import Errors
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.generated.topic_record import TopicRecord
from server.config import ConfigError
from server.controller.placement import StripedReplicaPlacer
from server.node.plugin_guard import DEFAULT_TIMEOUT_MS, GuardedPolicy, timeout_ms
from server.node.plugins import load_plugins
from tests.controller.test_plugins import _ask, _create, _harness, _topic

LIMIT_MS = 200
GATE = threading.Event()
"""Held shut, a plug-in's call of :class:`Stuck` waits on it (a plug-in that hangs)."""
CALLS: list[str] = []


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


class Stuck:
    """A policy and a placer in one: each call waits for :data:`GATE`."""

    def validate(self, request: Any) -> None:
        CALLS.append("validate")
        GATE.wait(30)

    def place(self, spec: Any, cluster: Any) -> Any:
        CALLS.append("place")
        GATE.wait(30)
        return StripedReplicaPlacer().place(spec, cluster)

    def close(self) -> None:
        CALLS.append("close")


class SaysFalse:
    """A policy that answers instead of raising: ``return False`` meant as "no"."""

    def validate(self, request: Any) -> bool:
        return request.topic == "yes"


@pytest.fixture(autouse=True)
def _gate() -> Any:
    GATE.clear()
    CALLS.clear()
    yield
    GATE.set()  # never leave a worker thread waiting


def _load(key: str, **extra: str) -> Any:
    return load_plugins({key: f"{__name__}:Stuck", "kwire.plugin.timeout.ms": str(LIMIT_MS), **extra}, guard=True)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    answer = fn()
    return answer, time.monotonic() - started


def _created(harness: Any) -> set[str]:
    return {r.name for r in harness.records() if isinstance(r, TopicRecord)}


def test_a_hung_create_topic_policy_is_refused_at_its_limit_and_the_controller_serves_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plugins = _load("create.topic.policy.class.name")
    harness = _harness(plugins)
    name = f"create.topic.policy.class.name {__name__}:Stuck"
    with caplog.at_level(logging.INFO, logger="kwire.controller"):
        answer, took = _timed(lambda: _create(harness, _topic("t1")))
        assert answer == [("t1", Errors.POLICY_VIOLATION,
                           f"{name} did not answer within {LIMIT_MS} ms (kwire.plugin.timeout.ms); refused")]
        assert LIMIT_MS / 1000 <= took < LIMIT_MS / 1000 + 5
        # still in that call: refused at once, without a second wait and without a second call
        answer, took = _timed(lambda: _create(harness, _topic("t2")))
        assert answer == [("t2", Errors.POLICY_VIOLATION, f"{name} is still in a call that passed its limit of "
                                                           f"{LIMIT_MS} ms (kwire.plugin.timeout.ms); refused until it returns")]
        assert took < LIMIT_MS / 1000 and CALLS == ["validate"]
        # requests that do not reach the policy are served meanwhile
        assert _create(harness, _topic("t3", 1, 9))[0][1] == Errors.INVALID_REPLICATION_FACTOR
        GATE.set()
        _wait_for(lambda: any("returned after" in r.getMessage() for r in caplog.records))
        assert _create(harness, _topic("t4")) == [("t4", 0, None)]
    assert _created(harness) == {"t4"} and CALLS == ["validate", "validate"]
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert messages[0].startswith(f"{name} did not answer within {LIMIT_MS} ms")
    assert "its answer was dropped" in messages[-1]
    plugins.close()
    assert CALLS[-1] == "close"


def test_a_hung_alter_config_policy_refuses_its_resource_only() -> None:
    harness = _harness(_load("alter.config.policy.class.name"))
    request = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=4, resource_name="", configs=[AlterableConfig(name="log.retention.ms", config_operation=0, value="9")])],
        validate_only=False)
    [result] = _ask(harness, request, 1).responses
    assert result.error_code == Errors.POLICY_VIOLATION
    assert result.error_message.startswith(f"alter.config.policy.class.name {__name__}:Stuck did not answer within")
    GATE.set()
    _wait_for(lambda: not harness.config.plugins.alter_config_policy.worker.stuck)
    [result] = _ask(harness, request, 1).responses
    assert result.error_code == 0


def test_a_hung_placer_is_invalid_replication_factor_and_the_controller_serves_on() -> None:
    plugins = _load("kwire.replica.placer.class")
    harness = _harness(plugins)
    name = f"kwire.replica.placer.class {__name__}:Stuck"
    assert _create(harness, _topic("t1", 2, 2)) == [("t1", Errors.INVALID_REPLICATION_FACTOR, (
        f"Unable to replicate the partition 2 time(s): {name} did not answer within {LIMIT_MS} ms "
        "(kwire.plugin.timeout.ms); refused"))]
    [(_, code, message)] = _create(harness, _topic("t2", 2, 2))
    assert code == Errors.INVALID_REPLICATION_FACTOR and "is still in a call" in message
    # a manual assignment needs no placer
    assert _create(harness, _topic("manual", -1, -1, assignments={0: [5, 6]})) == [("manual", 0, None)]
    GATE.set()
    _wait_for(lambda: not plugins.replica_placer.worker.stuck)
    assert _create(harness, _topic("t3", 2, 2)) == [("t3", 0, None)]
    assert _created(harness) == {"manual", "t3"}


def test_a_plugin_still_in_a_call_is_not_closed_and_closing_does_not_wait() -> None:
    plugins = _load("create.topic.policy.class.name")
    harness = _harness(plugins)
    assert _create(harness, _topic("t"))[0][1] == Errors.POLICY_VIOLATION
    _, took = _timed(plugins.close)
    assert took < LIMIT_MS / 1000 and "close" not in CALLS


def test_a_policy_that_returns_a_value_is_refused_with_how_a_policy_refuses() -> None:
    plugins = load_plugins({"create.topic.policy.class.name": f"{__name__}:SaysFalse"}, guard=True)
    assert isinstance(plugins.create_topic_policy, GuardedPolicy)
    harness = _harness(plugins)
    assert _create(harness, _topic("no"), _topic("yes")) == [
        ("no", Errors.POLICY_VIOLATION, f"create.topic.policy.class.name {__name__}:SaysFalse returned False from "
                                         "validate(): a policy returns None to accept and raises "
                                         "PolicyViolationException to refuse"),
        ("yes", Errors.POLICY_VIOLATION, f"create.topic.policy.class.name {__name__}:SaysFalse returned True from "
                                          "validate(): a policy returns None to accept and raises "
                                          "PolicyViolationException to refuse")]
    assert _created(harness) == set()


def test_unguarded_plugins_run_on_the_callers_thread_and_the_striped_placer_is_never_wrapped() -> None:
    plain = load_plugins({"create.topic.policy.class.name": f"{__name__}:SaysFalse"})
    assert isinstance(plain.create_topic_policy, SaysFalse)
    striped = load_plugins({"kwire.replica.placer.class": "server.controller.placement:StripedReplicaPlacer"}, guard=True)
    assert striped.default_placer


@pytest.mark.parametrize(("value", "expected"), [("", DEFAULT_TIMEOUT_MS), (" 250 ", 250), ("x", None), ("0", None)])
def test_the_limit_is_a_positive_number_of_ms(value: str, expected: int | None) -> None:
    configs = {"kwire.plugin.timeout.ms": value}
    if expected is None:
        with pytest.raises(ConfigError, match=r"^kwire\.plugin\.timeout\.ms: "):
            timeout_ms(configs)
    else:
        assert timeout_ms(configs) == expected


class Exits:
    """A policy that calls ``sys.exit()`` on a topic named "exit"."""

    def validate(self, request: Any) -> None:
        if request.topic == "exit":
            raise SystemExit(3)


def test_a_policy_calling_sys_exit_fails_its_topic_not_the_node(caplog: pytest.LogCaptureFixture) -> None:
    harness = _harness(load_plugins({"create.topic.policy.class.name": f"{__name__}:Exits"}, guard=True))
    with caplog.at_level(logging.ERROR, logger="kwire.controller"):
        assert _create(harness, _topic("exit"), _topic("fine")) == [
            ("exit", Errors.UNKNOWN_SERVER_ERROR, None), ("fine", 0, None)]
    assert any(f"RuntimeError: SystemExit in {__name__}:Exits: 3" in r.getMessage() for r in caplog.records)
