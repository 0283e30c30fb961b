"""IncrementalAlterConfigs and AlterConfigs at the controller (``server.controller.configs``).
The answers and records are compared with a stock controller's in ``compat/test_topic_rpcs.py``;
these pin the records of the common cases."""

from __future__ import annotations

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.alter_configs_request import AlterableConfig as LegacyConfig
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_configs_request import AlterConfigsResource as LegacyResource
from messages.generated.clear_elr_record import ClearElrRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from messages.generated.topic_record import TopicRecord
from server.controller.configs import ConfigContext, incremental_alter_configs, legacy_alter_configs
from server.controller.image import ReplicationImage


def _context(elr: bool = False) -> ConfigContext:
    image = ReplicationImage()
    image.replay(TopicRecord(name="t", topic_id=Uuid.from_longs(1, 1)))
    image.replay(ConfigRecord(resource_type=2, resource_name="t", name="cleanup.policy", value="delete"))
    return ConfigContext(image, frozenset({1, 5}), {}, elr)


def _incremental(*configs: tuple[int, str, str, int, str | None], validate_only: bool = False) -> IncrementalAlterConfigsRequest:
    resources: dict[tuple[int, str], list[AlterableConfig]] = {}
    for kind, name, key, op, value in configs:
        resources.setdefault((kind, name), []).append(AlterableConfig(name=key, config_operation=op, value=value))
    return IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(resource_type=k, resource_name=n, configs=c) for (k, n), c in resources.items()],
        validate_only=validate_only,
    )


def test_append_and_subtract_edit_a_list_config() -> None:
    context = _context()
    records, results = incremental_alter_configs(_incremental((2, "t", "cleanup.policy", 2, "compact")), context)
    assert [(r.error_code, r.error_message) for r in results] == [(Errors.NONE, None)]
    assert [(r.name, r.value) for r, _ in records] == [("cleanup.policy", "delete,compact")]  # type: ignore[attr-defined]


def test_a_broker_config_is_written_even_when_unchanged() -> None:
    context = _context()
    context.image.replay(ConfigRecord(resource_type=4, resource_name="5", name="log.retention.ms", value="1"))
    records, _ = incremental_alter_configs(_incremental((4, "5", "log.retention.ms", 0, "1")), context)
    assert len(records) == 1
    records, _ = incremental_alter_configs(_incremental((2, "t", "cleanup.policy", 0, "delete")), context)
    assert records == []


def test_validate_only_writes_nothing() -> None:
    records, results = incremental_alter_configs(_incremental((2, "t", "retention.ms", 0, "5"), validate_only=True), _context())
    assert records == [] and results[0].error_code == Errors.NONE


def test_min_insync_replicas_clears_eligible_leader_replicas() -> None:
    records, _ = incremental_alter_configs(_incremental((4, "", "min.insync.replicas", 0, "2")), _context(elr=True))
    assert isinstance(records[-1][0], ClearElrRecord) and records[-1][0].topic_name == ""
    _, results = incremental_alter_configs(_incremental((4, "5", "min.insync.replicas", 0, "2")), _context(elr=True))
    assert results[0].error_code == Errors.INVALID_CONFIG


def test_legacy_alter_configs_deletes_what_it_leaves_out() -> None:
    request = AlterConfigsRequest(
        resources=[LegacyResource(resource_type=2, resource_name="t", configs=[LegacyConfig(name="retention.ms", value="9")])]
    )
    records, results = legacy_alter_configs(request, _context())
    assert results[0].error_code == Errors.NONE
    assert [(r.name, r.value) for r, _ in records] == [("retention.ms", "9"), ("cleanup.policy", None)]  # type: ignore[attr-defined]


def test_unknown_nodes_and_topics() -> None:
    request = _incremental((4, "7", "a", 0, "b"), (2, "u", "retention.ms", 0, "1"), (8, "1", "kafka", 0, "DEBUG"))
    _, results = incremental_alter_configs(request, _context())
    assert sorted((r.resource_name, r.error_code) for r in results) == [
        ("1", Errors.INVALID_REQUEST), ("7", Errors.BROKER_ID_NOT_REGISTERED), ("u", Errors.UNKNOWN_TOPIC_OR_PARTITION)
    ]
