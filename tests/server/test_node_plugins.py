"""A node loads its controller plug-ins at start-up, configures them with its properties and
closes them when it stops (Kafka's ``ControllerServer`` startup and shutdown), each call under
the node's time limit, in one Trio process as tests/server/test_node.py runs nodes."""

from __future__ import annotations

import random
from typing import Any

import trio

from server.node import Node
from server.node.plugin_guard import DEFAULT_TIMEOUT_MS, GuardedPolicy
from tests.server.test_node import _config, _free_port, _inline, _until
from tools.storage_format import format_standalone

JOURNAL: list[tuple[str, Any]] = []


class Journal:
    """A create-topic policy that notes its life in :data:`JOURNAL`."""

    def configure(self, configs: dict[str, str]) -> None:
        JOURNAL.append(("configure", configs.get("node.id")))

    def validate(self, request: Any) -> None:
        JOURNAL.append(("validate", request.topic))

    def close(self) -> None:
        JOURNAL.append(("close", None))


async def test_a_node_configures_its_plugins_at_start_and_closes_them_as_it_stops(
    tmp_path: Any, autojump_clock: trio.testing.MockClock
) -> None:
    config = _config(tmp_path / "data", 1, _free_port(),
                     extra={"create.topic.policy.class.name": f"{__name__}:Journal"})
    assert format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(1), run_blocking=_inline)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        await _until(lambda: node.leader_id == 1)
        assert JOURNAL == [("configure", "1")]
        # a running node calls it under kwire.plugin.timeout.ms (server.node.plugin_guard)
        policy = node.host.config.plugins.create_topic_policy
        assert isinstance(policy, GuardedPolicy) and isinstance(policy.policy, Journal)
        assert policy.worker.limit_ms == DEFAULT_TIMEOUT_MS
        node.stop()
    assert JOURNAL == [("configure", "1"), ("close", None)]
