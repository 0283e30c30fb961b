"""IncrementalAlterConfigs and AlterConfigs at the controller (``server.controller.configs``).
The answers and records are compared with a stock controller's in ``compat/test_topic_rpcs.py``;
these pin the records of the common cases."""

from __future__ import annotations

import pytest

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
from server.controller.image import ReplicationControlManager


def _context(elr: bool = False) -> ConfigContext:
    image = ReplicationControlManager()
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


# ---------------------------------------------------------------- helpers of the rule tests

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _ctx(*configs: tuple[int, str, str, str], elr: bool = False, topics: tuple[str, ...] = ("t", "u")) -> ConfigContext:
    """Topics ``topics`` (only "t" with cleanup.policy=delete), nodes 1 and 5, and ``configs``
    as (resource type, resource name, name, value)."""
    image = ReplicationControlManager()
    for index, name in enumerate(topics):
        image.replay(TopicRecord(name=name, topic_id=Uuid.from_longs(1, index + 1)))
    image.replay(ConfigRecord(resource_type=TOPIC, resource_name="t", name="cleanup.policy", value="delete"))
    for kind, resource, name, value in configs:
        image.replay(ConfigRecord(resource_type=kind, resource_name=resource, name=name, value=value))
    return ConfigContext(image, frozenset({1, 5}), {}, elr)


def _written(records: list[tuple[object, int]]) -> list[tuple[object, ...]]:
    """Each record as (type, name, key, value) for a ConfigRecord, ("clear-elr", topic) else."""
    out: list[tuple[object, ...]] = []
    for record, version in records:
        assert version == 0
        if isinstance(record, ClearElrRecord):
            out.append(("clear-elr", record.topic_name))
        else:
            assert isinstance(record, ConfigRecord)
            out.append((record.resource_type, record.resource_name, record.name, record.value))
    return out


def _answers(results: list[object]) -> list[tuple[int, str, int, str | None]]:
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in results]  # type: ignore[attr-defined]


def _run(*configs: tuple[int, str, str, int, str | None], context: ConfigContext | None = None,
         validate_only: bool = False) -> tuple[list[tuple[object, ...]], list[tuple[int, str, int, str | None]]]:
    records, results = incremental_alter_configs(_incremental(*configs, validate_only=validate_only), context or _ctx())
    return _written(records), _answers(results)


def _legacy(*configs: tuple[int, str, str, str | None], context: ConfigContext | None = None,
            validate_only: bool = False) -> tuple[list[tuple[object, ...]], list[tuple[int, str, int, str | None]]]:
    resources: dict[tuple[int, str], list[LegacyConfig]] = {}
    for kind, name, key, value in configs:
        entries = resources.setdefault((kind, name), [])
        if key:
            entries.append(LegacyConfig(name=key, value=value))
    request = AlterConfigsRequest(
        resources=[LegacyResource(resource_type=k, resource_name=n, configs=c) for (k, n), c in resources.items()],
        validate_only=validate_only,
    )
    records, results = legacy_alter_configs(request, context or _ctx())
    return _written(records), _answers(results)


OK = Errors.NONE


# ---------------------------------------------------------------- SET and DELETE


def test_set_writes_a_new_topic_value() -> None:
    assert _run((TOPIC, "t", "retention.ms", SET, "5")) == (
        [(TOPIC, "t", "retention.ms", "5")], [(TOPIC, "t", OK, None)])


def test_set_keeps_the_value_as_sent() -> None:
    written, _ = _run((TOPIC, "t", "retention.ms", SET, " +5 "))
    assert written == [(TOPIC, "t", "retention.ms", " +5 ")]


def test_delete_writes_a_null_value_only_for_a_topic_config_that_is_set() -> None:
    assert _run((TOPIC, "t", "cleanup.policy", DELETE, None))[0] == [(TOPIC, "t", "cleanup.policy", None)]
    assert _run((TOPIC, "t", "retention.ms", DELETE, None)) == ([], [(TOPIC, "t", OK, None)])


def test_delete_of_a_broker_config_is_written_even_when_it_is_not_set() -> None:
    assert _run((BROKER, "1", "log.retention.ms", DELETE, None))[0] == [(BROKER, "1", "log.retention.ms", None)]


def test_configs_of_one_resource_are_written_in_java_hash_map_order() -> None:
    written, _ = _run(
        (TOPIC, "t", "segment.bytes", SET, "2000000"), (TOPIC, "t", "retention.ms", SET, "5"),
        (TOPIC, "t", "cleanup.policy", SET, "compact"), (TOPIC, "t", "min.insync.replicas", SET, "2"),
    )
    assert [key for _, _, key, _ in written] == ["cleanup.policy", "min.insync.replicas", "segment.bytes", "retention.ms"]


def test_one_bad_config_fails_its_whole_resource_only() -> None:
    written, answers = _run(
        (TOPIC, "t", "retention.ms", SET, "5"), (TOPIC, "t", "segment.bytes", SET, "1"),
        (BROKER, "", "log.retention.ms", SET, "7"),
    )
    assert written == [(BROKER, "", "log.retention.ms", "7")]
    assert answers == [
        (TOPIC, "t", Errors.INVALID_CONFIG, "Invalid value 1 for configuration segment.bytes: Value must be at least 1048576"),
        (BROKER, "", OK, None),
    ]


def test_the_topic_is_validated_with_its_existing_configs() -> None:
    context = _ctx((TOPIC, "t", "max.compaction.lag.ms", "5"))
    _, answers = _run((TOPIC, "t", "min.compaction.lag.ms", SET, "10"), context=context)
    assert answers == [(TOPIC, "t", Errors.INVALID_CONFIG,
                        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)")]
    written, answers = _run((TOPIC, "t", "min.compaction.lag.ms", SET, "10"), (TOPIC, "t", "max.compaction.lag.ms", DELETE, None),
                            context=context)
    assert answers == [(TOPIC, "t", OK, None)] and len(written) == 2


# ---------------------------------------------------------------- APPEND and SUBTRACT


def test_append_to_a_topic_list_that_is_not_set_starts_from_its_default() -> None:
    assert _run((TOPIC, "u", "cleanup.policy", APPEND, "compact"))[0] == [(TOPIC, "u", "cleanup.policy", "delete,compact")]


def test_append_adds_each_missing_item_once() -> None:
    assert _run((TOPIC, "t", "cleanup.policy", APPEND, "compact,delete,compact"))[0] == [
        (TOPIC, "t", "cleanup.policy", "delete,compact")]
    assert _run((TOPIC, "t", "cleanup.policy", APPEND, "delete")) == ([], [(TOPIC, "t", OK, None)])


def test_subtract_removes_items_and_may_leave_an_empty_list() -> None:
    assert _run((TOPIC, "t", "cleanup.policy", SUBTRACT, "delete"))[0] == [(TOPIC, "t", "cleanup.policy", "")]
    assert _run((TOPIC, "t", "cleanup.policy", SUBTRACT, "compact")) == ([], [(TOPIC, "t", OK, None)])
    assert _run((TOPIC, "u", "cleanup.policy", SUBTRACT, "delete"))[0] == [(TOPIC, "u", "cleanup.policy", "")]


def test_a_list_value_is_split_on_commas_without_empty_parts() -> None:
    context = _ctx((TOPIC, "u", "leader.replication.throttled.replicas", "0:1,,1:2"))
    written, _ = _run((TOPIC, "u", "leader.replication.throttled.replicas", APPEND, "2:3"), context=context)
    assert written == [(TOPIC, "u", "leader.replication.throttled.replicas", "0:1,1:2,2:3")]


@pytest.mark.parametrize(("op", "name"), [(APPEND, "APPEND"), (SUBTRACT, "SUBTRACT")])
def test_append_and_subtract_need_a_list_config(op: int, name: str) -> None:
    written, answers = _run((TOPIC, "t", "retention.ms", op, "5"), (TOPIC, "t", "segment.ms", SET, "5"))
    assert written == []
    assert answers == [(TOPIC, "t", Errors.INVALID_CONFIG, f"Can't {name} to key retention.ms because its type is not LIST.")]


def test_append_to_broker_list_configs() -> None:
    assert _run((BROKER, "", "log.cleanup.policy", APPEND, "compact"))[0] == [(BROKER, "", "log.cleanup.policy", "delete,compact")]
    # a broker list without a default starts empty
    assert _run((BROKER, "1", "log.dirs", APPEND, "/a,/b"))[0] == [(BROKER, "1", "log.dirs", "/a,/b")]
    context = _ctx((BROKER, "1", "sasl.enabled.mechanisms", "PLAIN"))
    assert _run((BROKER, "1", "sasl.enabled.mechanisms", SUBTRACT, "PLAIN"), context=context)[0] == [
        (BROKER, "1", "sasl.enabled.mechanisms", "")]
    assert _run((BROKER, "1", "log.retention.ms", APPEND, "5"))[1] == [
        (BROKER, "1", Errors.INVALID_CONFIG, "Can't APPEND to key log.retention.ms because its type is not LIST.")]


def test_append_ignores_a_trailing_comma_as_java_split_does() -> None:
    assert _run((TOPIC, "t", "cleanup.policy", APPEND, "compact,")) == (
        [(TOPIC, "t", "cleanup.policy", "delete,compact")], [(TOPIC, "t", OK, None)])


# ---------------------------------------------------------------- errors per resource


def test_a_value_longer_than_32767_characters() -> None:
    _, answers = _run((BROKER, "", "x", SET, "v" * 32768))
    assert answers == [(BROKER, "", Errors.INVALID_CONFIG,
                        "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.")]
    assert _run((BROKER, "", "x", SET, "v" * 32767))[1] == [(BROKER, "", OK, None)]


@pytest.mark.parametrize(
    ("kind", "name", "error", "message"),
    [
        (TOPIC, "", Errors.INVALID_REQUEST, "Default topic resources are not allowed."),
        (TOPIC, "a/b", Errors.INVALID_TOPIC_EXCEPTION,
         "Topic name is invalid: 'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        (TOPIC, "..", Errors.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '..' is not allowed"),
        (TOPIC, "missing", Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
        (BROKER, "abc", Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
        (BROKER, "2147483648", Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
        (BROKER, " 1", Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
        (BROKER, "-1", Errors.INVALID_REQUEST, "Invalid negative broker ID."),
        (BROKER, "7", Errors.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
        (BROKER, "007", Errors.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
        (BROKER, "\u0667", Errors.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
        (BROKER, "\U0001d7d5", Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
        (BROKER_LOGGER, "1", Errors.INVALID_REQUEST, "Unexpected resource type BROKER_LOGGER."),
        (CLIENT_METRICS, "m", Errors.INVALID_REQUEST, "Unexpected resource type CLIENT_METRICS."),
        (GROUP, "g", Errors.INVALID_REQUEST, "Unexpected resource type GROUP."),
        (3, "x", Errors.UNSUPPORTED_VERSION, "Unknown resource type 3."),
    ],
)
def test_the_error_of_each_resource(kind: int, name: str, error: Errors, message: str) -> None:
    key = "retention.ms" if kind == TOPIC else "log.retention.ms"
    for run in (_run, _legacy):
        written, answers = run((kind, name, key, SET, "5") if run is _run else (kind, name, key, "5"))  # type: ignore[operator]
        assert (written, answers) == ([], [(kind, name, error, message)])


def test_a_signed_broker_id_names_that_node() -> None:
    assert _run((BROKER, "+5", "log.retention.ms", SET, "1")) == (
        [(BROKER, "+5", "log.retention.ms", "1")], [(BROKER, "+5", OK, None)])


def test_the_name_is_checked_before_the_values_and_existence_last() -> None:
    assert _run((TOPIC, "a/b", "retention.ms", SET, "x"))[1][0][2] == Errors.INVALID_TOPIC_EXCEPTION
    assert _run((TOPIC, "missing", "retention.ms", SET, "x"))[1][0][2] == Errors.INVALID_CONFIG
    assert _run((TOPIC, "", "retention.ms", SET, "v" * 32768))[1][0][3] == (
        "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.")


def test_a_resource_named_twice_is_refused_once_and_answered_first() -> None:
    written, answers = _run(
        (BROKER, "", "log.retention.ms", SET, "1"), (TOPIC, "t", "retention.ms", SET, "5"),
        (99, "x", "a", SET, "b"),
    )
    assert written == [(BROKER, "", "log.retention.ms", "1"), (TOPIC, "t", "retention.ms", "5")]
    request = _incremental((TOPIC, "t", "retention.ms", SET, "5"))
    request.resources = [request.resources[0]] * 3 + _incremental((BROKER, "", "log.retention.ms", SET, "1")).resources
    records, results = incremental_alter_configs(request, _ctx())
    assert _answers(results) == [(TOPIC, "t", Errors.INVALID_REQUEST, "Duplicate resource."), (BROKER, "", OK, None)]
    assert _written(records) == [(BROKER, "", "log.retention.ms", "1")]
    assert answers[0] == (99, "x", Errors.UNSUPPORTED_VERSION, "Unknown resource type 99.")


def test_validate_only_answers_errors_as_a_real_change_would() -> None:
    written, answers = _run((TOPIC, "t", "retention.ms", SET, "x"), (BROKER, "7", "a", SET, "b"), validate_only=True)
    assert written == []
    assert [(kind, error) for kind, _, error, _ in answers] == [
        (TOPIC, Errors.INVALID_CONFIG), (BROKER, Errors.BROKER_ID_NOT_REGISTERED)]


# ---------------------------------------------------------------- min.insync.replicas and ELR


def test_a_min_isr_change_is_followed_by_clearing_the_elr_of_its_scope() -> None:
    written, _ = _run((TOPIC, "t", "min.insync.replicas", SET, "2"), (BROKER, "", "min.insync.replicas", SET, "2"),
                      context=_ctx(elr=True))
    assert written == [
        (TOPIC, "t", "min.insync.replicas", "2"), (BROKER, "", "min.insync.replicas", "2"),
        ("clear-elr", "t"), ("clear-elr", ""),
    ]


def test_a_topic_min_isr_removal_also_clears_the_elr() -> None:
    context = _ctx((TOPIC, "t", "min.insync.replicas", "2"), elr=True)
    assert _run((TOPIC, "t", "min.insync.replicas", DELETE, None), context=context)[0] == [
        (TOPIC, "t", "min.insync.replicas", None), ("clear-elr", "t")]


def test_without_elr_min_isr_changes_anywhere_and_clears_nothing() -> None:
    written, answers = _run((BROKER, "1", "min.insync.replicas", SET, "2"), (BROKER, "", "min.insync.replicas", DELETE, None))
    assert written == [(BROKER, "1", "min.insync.replicas", "2"), (BROKER, "", "min.insync.replicas", None)]
    assert [error for _, _, error, _ in answers] == [OK, OK]


def test_with_elr_node_level_min_isr_may_not_change_nor_the_cluster_level_one_go() -> None:
    context = _ctx((BROKER, "", "min.insync.replicas", "2"), (BROKER, "1", "min.insync.replicas", "2"), elr=True)
    written, answers = _run(
        (BROKER, "1", "min.insync.replicas", DELETE, None), (BROKER, "", "min.insync.replicas", DELETE, None),
        (BROKER, "5", "min.insync.replicas", SET, "2"), context=context,
    )
    assert written == []
    assert answers == [
        (BROKER, "1", Errors.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled."),
        (BROKER, "", Errors.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."),
        (BROKER, "5", Errors.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled."),
    ]


def test_the_elr_checks_come_before_the_node_checks() -> None:
    _, answers = _run((BROKER, "7", "min.insync.replicas", SET, "2"), context=_ctx(elr=True))
    assert answers == [(BROKER, "7", Errors.INVALID_CONFIG,
                        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")]


def test_a_refused_resource_clears_no_elr_and_validate_only_writes_none() -> None:
    written, _ = _run((TOPIC, "t", "min.insync.replicas", SET, "2"), (TOPIC, "t", "retention.ms", SET, "x"),
                      context=_ctx(elr=True))
    assert written == []
    written, answers = _run((TOPIC, "t", "min.insync.replicas", SET, "2"), context=_ctx(elr=True), validate_only=True)
    assert written == [] and answers == [(TOPIC, "t", OK, None)]


# ---------------------------------------------------------------- legacy AlterConfigs


def test_legacy_leaves_unchanged_topic_configs_unwritten() -> None:
    context = _ctx((TOPIC, "t", "retention.ms", "9"))
    written, answers = _legacy((TOPIC, "t", "retention.ms", "9"), (TOPIC, "t", "cleanup.policy", "delete"), context=context)
    assert (written, answers) == ([], [(TOPIC, "t", OK, None)])


def test_legacy_deletes_every_config_left_out_in_the_config_store_order() -> None:
    context = _ctx(
        (TOPIC, "t", "retention.ms", "1"), (TOPIC, "t", "segment.ms", "2"), (TOPIC, "t", "min.insync.replicas", "1"),
    )
    written, _ = _legacy((TOPIC, "t", "", None), context=context)
    # Kafka's TimelineHashMap of the topic's configs iterates them in this order
    assert written == [
        (TOPIC, "t", "cleanup.policy", None), (TOPIC, "t", "min.insync.replicas", None), (TOPIC, "t", "segment.ms", None),
        (TOPIC, "t", "retention.ms", None),
    ]


def test_legacy_writes_set_configs_before_deleted_ones() -> None:
    context = _ctx((TOPIC, "t", "retention.ms", "1"))
    written, _ = _legacy((TOPIC, "t", "segment.ms", "5"), (TOPIC, "t", "min.insync.replicas", "1"), context=context)
    assert written == [
        (TOPIC, "t", "min.insync.replicas", "1"), (TOPIC, "t", "segment.ms", "5"),
        (TOPIC, "t", "cleanup.policy", None), (TOPIC, "t", "retention.ms", None),
    ]


def test_legacy_broker_configs_are_all_written() -> None:
    context = _ctx((BROKER, "1", "log.retention.ms", "1"), (BROKER, "1", "log.roll.ms", "2"))
    written, answers = _legacy((BROKER, "1", "log.retention.ms", "1"), context=context)
    assert written == [(BROKER, "1", "log.retention.ms", "1"), (BROKER, "1", "log.roll.ms", None)]
    assert answers == [(BROKER, "1", OK, None)]


def test_legacy_validates_the_configs_left_after_the_replacement() -> None:
    context = _ctx((TOPIC, "t", "max.compaction.lag.ms", "5"))
    _, answers = _legacy((TOPIC, "t", "min.compaction.lag.ms", "10"), context=context)
    assert answers == [(TOPIC, "t", OK, None)]  # the old max.compaction.lag.ms goes
    _, answers = _legacy((TOPIC, "t", "min.compaction.lag.ms", "10"), (TOPIC, "t", "max.compaction.lag.ms", "5"),
                         context=context)
    assert answers[0][2] == Errors.INVALID_CONFIG


def test_legacy_with_elr_may_not_drop_the_cluster_min_isr_and_clears_on_a_topic_one() -> None:
    context = _ctx((BROKER, "", "min.insync.replicas", "2"), elr=True)
    written, answers = _legacy((BROKER, "", "log.retention.ms", "5"), context=context)
    assert written == [] and answers == [
        (BROKER, "", Errors.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")]
    written, _ = _legacy((TOPIC, "t", "min.insync.replicas", "2"), context=context)
    assert written == [(TOPIC, "t", "min.insync.replicas", "2"), (TOPIC, "t", "cleanup.policy", None), ("clear-elr", "t")]


def test_legacy_validate_only_and_duplicates() -> None:
    written, answers = _legacy((TOPIC, "t", "retention.ms", "5"), validate_only=True)
    assert written == [] and answers == [(TOPIC, "t", OK, None)]
    request = AlterConfigsRequest(resources=[
        LegacyResource(resource_type=TOPIC, resource_name="t", configs=[LegacyConfig(name="retention.ms", value="5")]),
    ] * 2)
    records, results = legacy_alter_configs(request, _ctx())
    assert records == [] and _answers(results) == [(TOPIC, "t", Errors.INVALID_REQUEST, "Duplicate resource.")]
