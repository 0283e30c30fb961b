"""DescribeConfigs at the controller (``server.controller.describe_configs``). Whole answers are
compared with a stock controller's in ``compat/test_topic_rpcs.py`` (topics, the cluster
defaults, the controller's own 350 configs, errors) and through the stock config tool; these
pin the rules one at a time."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.config_record import ConfigRecord
from messages.generated.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from messages.generated.describe_configs_response import DescribeConfigsResourceResult
from messages.generated.topic_record import TopicRecord
from server.controller.describe_configs import (
    INVALID_REQUEST_MESSAGE,
    NodeConfigView,
    broker_config_synonyms,
    describe_configs,
    scala_hash_map_order,
)
from server.controller.image import ReplicationControlManager
from server.controller.topic_configs import canonical_value

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, TOPIC_SOURCE = 2, 3, 4, 5, 1


def _view(*configs: tuple[int, str, str, str], static: dict[str, str] | None = None) -> NodeConfigView:
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="t", topic_id=Uuid.from_longs(1, 1)))
    for kind, name, key, value in configs:
        image.replay(ConfigRecord(resource_type=kind, resource_name=name, name=key, value=value))
    return NodeConfigView(1, image, static if static is not None else {"node.id": "1"}, loggers=lambda: {"root": "INFO"})


def _describe(view: NodeConfigView, *resources: tuple[int, str], keys: list[str] | None = None) -> list[object]:
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=k, resource_name=n, configuration_keys=keys) for k, n in resources],
        include_synonyms=True,
    )
    return list(describe_configs(request, view).results)


def _entries(view: NodeConfigView, kind: int, name: str, keys: list[str] | None = None) -> dict[str, DescribeConfigsResourceResult]:
    (result,) = _describe(view, (kind, name), keys=keys)
    assert result.error_code == Errors.NONE, result  # type: ignore[attr-defined]
    return {entry.name: entry for entry in result.configs}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("type_name", "raw", "shown"),
    [
        ("INT", " 42 ", "42"), ("LONG", "+7", "7"), ("DOUBLE", "0.50", "0.5"), ("DOUBLE", "1e7", "1.0E7"),
        ("BOOLEAN", "TRUE", "true"), ("LIST", " a , b,c ", "a,b,c"), ("LIST", "  ", ""), ("STRING", " x ", "x"),
    ],
)
def test_values_are_written_as_kafka_writes_parsed_values(type_name: str, raw: str, shown: str) -> None:
    assert canonical_value(type_name, raw) == shown


@pytest.mark.parametrize(("type_name", "raw"), [("INT", "2147483648"), ("SHORT", "40000"), ("LONG", "1_000"), ("BOOLEAN", "yes"), ("DOUBLE", "one")])
def test_values_a_type_refuses_raise(type_name: str, raw: str) -> None:
    with pytest.raises(ValueError):
        canonical_value(type_name, raw)


def test_scala_hash_map_order_matches_a_jvm() -> None:
    # a Scala 2.13 mutable.HashMap filled with these keys in this order, as a JVM iterated it
    keys = ["log.cleaner.threads", "min.insync.replicas", "log.retention.ms", "background.threads", "num.io.threads",
            "message.max.bytes", "log.segment.bytes", "compression.type", "unclean.leader.election.enable",
            "log.cleaner.dedupe.buffer.size", "log.flush.interval.ms", "max.connections", "num.replica.fetchers",
            "log.cleaner.io.buffer.size"]
    assert scala_hash_map_order(keys) == [
        "compression.type", "log.retention.ms", "message.max.bytes", "num.io.threads", "log.flush.interval.ms",
        "log.cleaner.io.buffer.size", "min.insync.replicas", "log.cleaner.threads", "unclean.leader.election.enable",
        "log.segment.bytes", "num.replica.fetchers", "max.connections", "log.cleaner.dedupe.buffer.size",
        "background.threads",
    ]
    assert scala_hash_map_order(["log.cleaner.threads", "min.insync.replicas"]) == ["min.insync.replicas", "log.cleaner.threads"]


def test_broker_synonyms() -> None:
    assert broker_config_synonyms("log.retention.hours") == ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert broker_config_synonyms("log.flush.interval.ms") == ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    assert broker_config_synonyms("listener.name.internal.sasl.jaas.config") == [
        "listener.name.internal.sasl.jaas.config", "sasl.jaas.config"]
    assert broker_config_synonyms("listener.name.internal.ssl.keystore.type", listener_overrides=False) == [
        "listener.name.internal.ssl.keystore.type"]


def test_a_topic_value_comes_from_the_topic_then_the_brokers_layers() -> None:
    view = _view((TOPIC, "t", "segment.ms", "5000"), (BROKER, "1", "log.retention.ms", "1000"),
                 static={"node.id": "1", "log.retention.hours": "100", "log.segment.bytes": "2000000"})
    entries = _entries(view, TOPIC, "t")
    assert len(entries) == 37
    segment_ms = entries["segment.ms"]
    assert (segment_ms.value, segment_ms.config_source) == ("5000", TOPIC_SOURCE)
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source) == ("1000", DYNAMIC_BROKER)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "1000", DYNAMIC_BROKER), ("log.retention.hours", "100", STATIC),
        ("log.retention.hours", "168", DEFAULT)]
    segment_bytes = entries["segment.bytes"]
    assert (segment_bytes.value, segment_bytes.config_source) == ("2000000", STATIC)
    assert [(s.value, s.source) for s in segment_bytes.synonyms] == [("2000000", STATIC), ("1073741824", DEFAULT)]


def test_a_static_hours_value_without_the_ms_name_reports_the_default_source() -> None:
    # Kafka keeps only synonyms from the first one named like the topic config's broker name
    entries = _entries(_view(static={"node.id": "1", "log.retention.hours": "1"}), TOPIC, "t")
    assert (entries["retention.ms"].value, entries["retention.ms"].config_source) == ("3600000", DEFAULT)
    assert entries["retention.ms"].synonyms == []


def test_configuration_keys_filter_the_entries() -> None:
    entries = _entries(_view(), TOPIC, "t", keys=["retention.ms", "no.such"])
    assert list(entries) == ["retention.ms"]


def test_topic_errors() -> None:
    results = _describe(_view(), (TOPIC, ""), (TOPIC, "nope"))
    assert [(r.error_code, r.error_message) for r in results] == [  # type: ignore[attr-defined]
        (Errors.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed"),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, ""),
    ]


def test_cluster_defaults_leave_out_what_a_controller_would_not_apply() -> None:
    view = _view(
        (BROKER, "", "log.cleaner.threads", "2"),  # dynamic
        (BROKER, "", "node.id", "3"),  # not dynamic
        (BROKER, "", "num.io.threads", "many"),  # not an int
        (BROKER, "", "ssl.keystore.type", "JKS"),  # security without a listener prefix
        (BROKER, "", "ssl.cipher.suites", "A"),  # per broker only
        (BROKER, "", "custom.key", "x"),  # unknown: kept, its type unknown, so hidden
    )
    entries = _entries(view, BROKER, "")
    assert sorted(entries) == ["custom.key", "log.cleaner.threads"]
    threads = entries["log.cleaner.threads"]
    assert (threads.value, threads.config_source, threads.read_only, threads.config_type) == ("2", DYNAMIC_DEFAULT, False, 3)
    custom = entries["custom.key"]
    assert (custom.value, custom.is_sensitive, custom.read_only, custom.config_type) == (None, True, True, 0)


def test_the_nodes_own_configs_list_every_kafka_config_with_dynamic_values() -> None:
    view = _view((BROKER, "1", "log.retention.ms", "1000"), static={"node.id": "1", "log.retention.hours": "100"})
    entries = _entries(view, BROKER, "1")
    assert len(entries) == 350
    assert (entries["broker.id"].value, entries["broker.id"].config_source) == ("1", STATIC)
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].config_source) == ("1000", DYNAMIC_BROKER)
    # a dynamic config replaces its synonyms' static values in the node's KafkaConfig
    assert (entries["log.retention.hours"].value, entries["log.retention.hours"].config_source) == ("168", STATIC)
    assert entries["ssl.keystore.password"].is_sensitive and entries["ssl.keystore.password"].value is None


def test_other_resources() -> None:
    view = _view((CLIENT_METRICS, "sub", "interval.ms", "60000"))
    results = _describe(view, (BROKER, "2"), (BROKER, "x"), (BROKER_LOGGER, "1"), (BROKER_LOGGER, ""),
                        (CLIENT_METRICS, "sub"), (CLIENT_METRICS, ""), (GROUP, ""))
    errors = [(r.error_code, r.error_message) for r in results]  # type: ignore[attr-defined]
    assert errors == [
        (Errors.INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2"),
        (Errors.INVALID_REQUEST, "Broker id must be an integer, but it is: x"),
        (Errors.NONE, ""),
        (Errors.INVALID_REQUEST, "Broker id must not be empty"),
        (Errors.NONE, ""),
        (Errors.INVALID_REQUEST, "Client metrics subscription name must not be empty"),
        (Errors.INVALID_REQUEST, "Group name must not be empty"),
    ]
    assert [(c.name, c.value, c.config_source) for c in results[2].configs] == [("root", "INFO", 6)]  # type: ignore[attr-defined]
    metrics = {c.name: (c.value, c.config_source) for c in results[4].configs}  # type: ignore[attr-defined]
    assert metrics == {"metrics": ("", DEFAULT), "interval.ms": ("60000", 7), "match": ("", DEFAULT)}


def test_a_broker_id_is_read_as_integer_parse_int_reads_it() -> None:
    # ConfigHelper.resourceNameToBrokerId: Integer.parseInt takes digits of any script in the
    # Basic Multilingual Plane ('\u0661' is 1), none beyond it
    results = _describe(_view(), (BROKER, "\u0661"), (BROKER, "\U0001d7cf"))
    errors = [(r.error_code, r.error_message) for r in results]  # type: ignore[attr-defined]
    assert errors == [
        (Errors.NONE, ""),
        (Errors.INVALID_REQUEST, "Broker id must be an integer, but it is: \U0001d7cf"),
    ]


def test_an_unknown_resource_type_fails_the_whole_request() -> None:
    results = _describe(_view(), (TOPIC, "t"), (99, "x"))
    assert [(r.error_code, r.error_message, r.configs) for r in results] == [  # type: ignore[attr-defined]
        (Errors.INVALID_REQUEST, INVALID_REQUEST_MESSAGE, []), (Errors.INVALID_REQUEST, INVALID_REQUEST_MESSAGE, [])]
