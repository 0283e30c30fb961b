"""``server/controller/broker_config_schema.py`` holds what the newest pinned release's jars
define: every ``KafkaConfig`` key (name, type, default, internal flag), the broker quotas, the
client metrics keys and the dynamic-config sets a controller's DescribeConfigs answers from."""

from __future__ import annotations

import pytest

from compat.config_schema import SOURCE_VERSION, TARGET, render
from compat.kafka import require_kafka
from server.controller import broker_config_schema as schema

pytestmark = pytest.mark.compat


def test_the_committed_schema_is_the_jars() -> None:
    require_kafka(SOURCE_VERSION)
    assert TARGET.read_text(encoding="utf-8") == render(), "run `python -m compat.config_schema`"
    # what the controller relies on, present and typed
    keys = {key.name: key for key in schema.BROKER_CONFIGS}
    assert len(keys) > 300
    assert keys["log.retention.hours"].type == "INT" and keys["log.retention.hours"].default == "168"
    assert keys["log.retention.ms"].default is None
    assert keys["ssl.keystore.password"].type == "PASSWORD"
    assert {"log.retention.ms", "log.cleaner.threads"} <= schema.DYNAMIC_BROKER_CONFIGS
    assert "node.id" not in schema.DYNAMIC_BROKER_CONFIGS
