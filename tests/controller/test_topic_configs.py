"""Topic configs as the controller checks and resolves them (``server.controller.topic_configs``):
Kafka 4.4's ``LogConfig.validate`` errors word for word, values written back as
``ConfigDef.convertToString`` writes them, effective values with their source as
``KafkaConfigSchema.resolveEffectiveTopicConfigs`` gives them, and ``Double.toString``.
``test_topics.py`` covers a few errors through CreateTopics; these cover each type and
validator."""

from __future__ import annotations

import math

import pytest

from kwire.errors import Errors
from server.controller.errors import ApiError
from server.controller.topic_configs import (
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
    canonical_value,
    effective_topic_config,
    effective_topic_configs,
    java_double_string,
    parse_value,
    validate_topic_configs,
    value_string,
)

THROTTLED = (
    "must be the literal '*' or a list of replicas in the following format: "
    "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
)
COMPRESSION = "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"


def _refusal(configs: dict[str, str], static: dict[str, str] | None = None) -> str | None:
    with pytest.raises(ApiError) as raised:
        validate_topic_configs(configs, static or {})
    assert raised.value.error == Errors.INVALID_CONFIG
    return raised.value.message


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("segment.bytes", "1048575", "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"),
        ("segment.bytes", "2147483648", "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
        ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
        ("segment.jitter.ms", "-1", "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0"),
        ("segment.index.bytes", "3", "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"),
        ("flush.messages", "0", "Invalid value 0 for configuration flush.messages: Value must be at least 1"),
        ("retention.bytes", "9223372036854775808",
         "Invalid value 9223372036854775808 for configuration retention.bytes: Not a number of type LONG"),
        ("max.message.bytes", "-1", "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"),
        ("max.decompressed.message.bytes", "2147483640",
         "Invalid value 2147483640 for configuration max.decompressed.message.bytes: Value must be no more than 2147483639"),
        ("index.interval.bytes", " 12x", "Invalid value  12x for configuration index.interval.bytes: Not a number of type INT"),
        ("delete.retention.ms", "-1", "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0"),
        ("file.delete.delay.ms", "-1", "Invalid value -1 for configuration file.delete.delay.ms: Value must be at least 0"),
        ("min.cleanable.dirty.ratio", "1.5",
         "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "-1e-4",
         "Invalid value -1.0E-4 for configuration min.cleanable.dirty.ratio: Value must be at least 0"),
        ("min.cleanable.dirty.ratio", "abc", "Invalid value abc for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
        ("cleanup.policy", "compact,remove", "Invalid value remove for configuration cleanup.policy: String must be one of: compact, delete"),
        ("cleanup.policy", "compact,,delete", "Configuration 'cleanup.policy' values must not be empty."),
        ("unclean.leader.election.enable", "1",
         "Invalid value 1 for configuration unclean.leader.election.enable: Expected value to be either true or false"),
        ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        ("compression.type", "lz5", f"Invalid value lz5 for configuration compression.type: {COMPRESSION}"),
        ("compression.type", " GZIP ", f"Invalid value GZIP for configuration compression.type: {COMPRESSION}"),
        ("compression.gzip.level", "0",
         "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
        ("compression.gzip.level", "10",
         "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "18", "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"),
        ("compression.zstd.level", "-131073",
         "Invalid value -131073 for configuration compression.zstd.level: Value must be at least -131072"),
        ("compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
        ("message.timestamp.type", "createtime",
         "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"),
        ("message.timestamp.before.max.ms", "-1",
         "Invalid value -1 for configuration message.timestamp.before.max.ms: Value must be at least 0"),
        ("message.timestamp.after.max.ms", "-1",
         "Invalid value -1 for configuration message.timestamp.after.max.ms: Value must be at least 0"),
        ("leader.replication.throttled.replicas", "0:1,x",
         f"Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: "
         f"leader.replication.throttled.replicas {THROTTLED}"),
        ("follower.replication.throttled.replicas", "*,0:1",
         f"Invalid value [*, 0:1] for configuration follower.replication.throttled.replicas: "
         f"follower.replication.throttled.replicas {THROTTLED}"),
        ("local.retention.ms", "-3", "Invalid value -3 for configuration local.retention.ms: Value must be at least -2"),
        ("remote.copy.lag.ms", "-2", "Invalid value -2 for configuration remote.copy.lag.ms: Value must be at least -1"),
        ("remote.copy.lag.bytes", "-2", "Invalid value -2 for configuration remote.copy.lag.bytes: Value must be at least -1"),
        ("internal.segment.bytes", "x", "Invalid value x for configuration internal.segment.bytes: Not a number of type INT"),
    ],
)
def test_each_validator_refuses_as_kafka_words_it(name: str, value: str, message: str) -> None:
    assert _refusal({name: value}) == message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("compression.gzip.level", "-1"), ("compression.gzip.level", "9"), ("compression.zstd.level", "-131072"),
        ("compression.lz4.level", "17"), ("cleanup.policy", ""), ("cleanup.policy", " compact , delete "),
        ("leader.replication.throttled.replicas", "*"), ("leader.replication.throttled.replicas", " 0:1 , 1:2 "),
        ("follower.replication.throttled.replicas", ""), ("min.cleanable.dirty.ratio", "1.0d"),
        ("min.cleanable.dirty.ratio", ".5"), ("min.cleanable.dirty.ratio", "5e-1"), ("min.cleanable.dirty.ratio", "1"),
        ("unclean.leader.election.enable", " TRUE "), ("local.retention.ms", "-2"), ("retention.ms", "-1"),
        ("retention.bytes", "-5"), ("segment.ms", "1"), ("max.compaction.lag.ms", "1"), ("remote.storage.enable", "false"),
        ("internal.segment.bytes", "1"), ("compression.type", "producer"), ("message.timestamp.type", "LogAppendTime"),
        ("segment.bytes", "+1048576"), ("max.decompressed.message.bytes", "2147483639"),
    ],
)
def test_values_kafka_accepts(name: str, value: str) -> None:
    validate_topic_configs({name: value}, {})


def test_an_unknown_name_is_refused_before_any_value() -> None:
    assert _refusal({"retention.ms": "x", "no.such": "1"}) == "Unknown topic config name: no.such"


def test_values_are_checked_in_the_definition_order_not_the_request_order() -> None:
    assert _refusal({"retention.ms": "x", "segment.bytes": "1"}) == (
        "Invalid value 1 for configuration segment.bytes: Value must be at least 1048576")
    assert _refusal({"max.message.bytes": "-1", "retention.ms": "x"}) == (
        "Invalid value x for configuration retention.ms: Not a number of type LONG")
    order = [key.name for key in TOPIC_CONFIGS]
    assert order.index("segment.bytes") < order.index("retention.ms") < order.index("max.message.bytes")


def test_min_compaction_lag_may_not_pass_max_compaction_lag() -> None:
    assert _refusal({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)")
    validate_topic_configs({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"}, {})


def test_the_compaction_lags_not_set_on_the_topic_come_from_the_nodes_properties() -> None:
    static = {"log.cleaner.max.compaction.lag.ms": "5"}
    assert _refusal({"min.compaction.lag.ms": "10"}, static) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)")
    validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"}, static)
    validate_topic_configs({"min.compaction.lag.ms": "10"}, {})


def test_remote_storage_is_refused_without_a_remote_storage_system() -> None:
    assert _refusal({"remote.storage.enable": "true"}) == (
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")


def test_no_configs_are_valid() -> None:
    validate_topic_configs({}, {"log.retention.hours": "1"})


def test_doubles_are_parsed_as_java_parses_them() -> None:
    validate_topic_configs({"min.cleanable.dirty.ratio": "0x1p-1"}, {})
    assert _refusal({"min.cleanable.dirty.ratio": "\u0661"}) == (
        "Invalid value \u0661 for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("0x1.8p1", "3.0"), ("-0X.8P-1F", "-0.25"), ("0x1p-1022d", "2.2250738585072014E-308"), ("0x1p1024", "Infinity"),
     ("+NaN", "NaN"), ("1.e2D", "100.0"), ("\x017\x1f", "7.0"), ("\t-.5f\n", "-0.5")],
)
def test_a_double_java_reads(raw: str, shown: str) -> None:
    assert canonical_value("DOUBLE", raw) == shown


@pytest.mark.parametrize(
    "raw", ["0x1", "0x1.8", "00x1p1", "0x1p1 f", "NaNd", "Infinityf", "nan", "inf", "1e", "1e+", ".", "1_0",
            "\u00a07", "7\u2003", "\uff17", "1e\u0661"],
)
def test_a_double_java_refuses(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_value("DOUBLE", raw)


# ---------------------------------------------------------------- parsing and writing values back


@pytest.mark.parametrize(
    ("type_name", "raw", "shown"),
    [
        ("SHORT", "32767", "32767"), ("SHORT", "-32768", "-32768"), ("INT", " -0 ", "0"), ("INT", "+0", "0"),
        ("LONG", "-9223372036854775808", "-9223372036854775808"), ("LONG", "9223372036854775807", "9223372036854775807"),
        ("DOUBLE", "1.5f", "1.5"), ("DOUBLE", "2D", "2.0"), ("DOUBLE", ".5", "0.5"), ("DOUBLE", "1E3", "1000.0"),
        ("DOUBLE", "  7 ", "7.0"), ("DOUBLE", "NaN", "NaN"), ("DOUBLE", "-Infinity", "-Infinity"),
        ("DOUBLE", "1e400", "Infinity"), ("LIST", "a,,b", "a,,b"), ("LIST", "a , b ,c", "a,b,c"), ("LIST", "a,", "a,"),
        ("LIST", ",", ","), ("BOOLEAN", " FaLsE ", "false"), ("STRING", " a b ", "a b"),
        ("CLASS", " java.lang.String ", "java.lang.String"),
    ],
)
def test_a_value_is_written_back_as_kafka_writes_the_parsed_value(type_name: str, raw: str, shown: str) -> None:
    assert canonical_value(type_name, raw) == shown


@pytest.mark.parametrize(
    ("type_name", "raw"),
    [("SHORT", "32768"), ("SHORT", "-32769"), ("INT", ""), ("INT", "1.0"), ("LONG", "9223372036854775808"),
     ("LONG", "0x10"), ("DOUBLE", ""), ("DOUBLE", "1.5e"), ("BOOLEAN", "1"), ("BOOLEAN", "")],
)
def test_a_value_its_type_refuses(type_name: str, raw: str) -> None:
    with pytest.raises(ValueError):
        parse_value(type_name, raw)


def test_parsed_values_have_python_types() -> None:
    assert parse_value("BOOLEAN", " True ") is True
    assert parse_value("INT", "+7") == 7 and isinstance(parse_value("LONG", "7"), int)
    assert parse_value("DOUBLE", "1") == 1.0 and isinstance(parse_value("DOUBLE", "1"), float)
    assert parse_value("LIST", " a, b ") == ["a", "b"]
    assert parse_value("LIST", "   ") == []
    assert parse_value("PASSWORD", " secret ") == "secret"


def test_value_string_of_each_python_type() -> None:
    assert [value_string(v) for v in (True, False, ["a", "b"], [], 5, -1, 0.5, 1e7)] == [
        "true", "false", "a,b", "", "5", "-1", "0.5", "1.0E7"]


# ---------------------------------------------------------------- effective values


def _effective(topic: dict[str, str] | None = None, node: dict[str, str] | None = None,
               cluster: dict[str, str] | None = None, static: dict[str, str] | None = None) -> dict[str, tuple[str | None, int]]:
    return {
        e.name: (e.value, e.source)
        for e in effective_topic_configs(topic or {}, node_dynamic=node or {}, cluster_dynamic=cluster or {},
                                         static_config=static or {})
    }


def test_every_public_topic_config_is_listed_sorted_by_name_with_its_default() -> None:
    entries = effective_topic_configs({}, node_dynamic={}, cluster_dynamic={}, static_config={})
    names = [e.name for e in entries]
    assert names == sorted(names) and len(names) == 37 and "internal.segment.bytes" not in names
    assert all(e.source == ConfigSource.DEFAULT_CONFIG for e in entries)
    values = {e.name: e.value for e in entries}
    assert values["segment.bytes"] == "1073741824"
    assert values["flush.ms"] == str(2**63 - 1)
    assert values["leader.replication.throttled.replicas"] == ""
    assert values["message.timestamp.after.max.ms"] == "3600000"
    assert values["local.retention.bytes"] == "-2"


def test_an_internal_config_is_listed_when_the_topic_sets_it() -> None:
    assert _effective({"internal.segment.bytes": "5"})["internal.segment.bytes"] == ("5", ConfigSource.TOPIC_CONFIG)


def test_a_topic_value_is_reported_as_stored() -> None:
    assert _effective({"retention.ms": " +5 "})["retention.ms"] == (" +5 ", ConfigSource.TOPIC_CONFIG)


@pytest.mark.parametrize(
    ("layer", "source"),
    [("node", ConfigSource.DYNAMIC_BROKER_CONFIG), ("cluster", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
     ("static", ConfigSource.STATIC_BROKER_CONFIG)],
)
def test_each_broker_layer_reports_its_source(layer: str, source: ConfigSource) -> None:
    entries = _effective(**{layer: {"log.segment.bytes": "2000000", "message.max.bytes": "7"}})  # type: ignore[arg-type]
    assert entries["segment.bytes"] == ("2000000", source)
    assert entries["max.message.bytes"] == ("7", source)


@pytest.mark.parametrize(
    ("synonyms", "value"),
    [
        ({"log.retention.hours": "2"}, "7200000"),
        ({"log.retention.minutes": "3"}, "180000"),
        ({"log.retention.ms": "5", "log.retention.minutes": "3", "log.retention.hours": "2"}, "5"),
        ({"log.retention.minutes": "3", "log.retention.hours": "2"}, "180000"),
        ({"log.retention.hours": " 2 "}, "7200000"),
        ({"log.retention.hours": "-1"}, "-3600000"),
        ({"log.retention.hours": "two"}, "0"),
        ({"log.retention.hours": ""}, "0"),
        ({"log.retention.ms": " 5 "}, " 5 "),
    ],
)
def test_synonyms_of_one_layer_in_order_converted_to_milliseconds(synonyms: dict[str, str], value: str) -> None:
    assert _effective(cluster=synonyms)["retention.ms"] == (value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_the_layer_decides_before_the_synonym() -> None:
    entries = _effective(node={"log.retention.hours": "1"}, cluster={"log.retention.ms": "5"},
                         static={"log.retention.ms": "6"})
    assert entries["retention.ms"] == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG)


def test_other_synonym_pairs() -> None:
    entries = _effective(static={
        "log.flush.scheduler.interval.ms": "3000", "log.roll.hours": "1", "log.roll.jitter.hours": "2",
        "log.cleaner.min.cleanable.ratio": "0.7", "log.cleanup.policy": "compact", "log.preallocate": "true",
        "log.message.timestamp.type": "LogAppendTime", "compression.type": "zstd", "min.insync.replicas": "2",
    })
    assert {name: entries[name][0] for name in (
        "flush.ms", "segment.ms", "segment.jitter.ms", "min.cleanable.dirty.ratio", "cleanup.policy", "preallocate",
        "message.timestamp.type", "compression.type", "min.insync.replicas",
    )} == {
        "flush.ms": "3000", "segment.ms": "3600000", "segment.jitter.ms": "7200000", "min.cleanable.dirty.ratio": "0.7",
        "cleanup.policy": "compact", "preallocate": "true", "message.timestamp.type": "LogAppendTime",
        "compression.type": "zstd", "min.insync.replicas": "2",
    }
    assert entries["flush.ms"][1] == ConfigSource.STATIC_BROKER_CONFIG


def test_a_config_without_broker_synonyms_ignores_the_broker_layers() -> None:
    entries = _effective(node={"remote.storage.enable": "true", "retention.ms": "1"},
                         static={"remote.log.copy.disable": "true"})
    assert entries["remote.storage.enable"] == ("false", ConfigSource.DEFAULT_CONFIG)
    assert entries["remote.log.copy.disable"] == ("false", ConfigSource.DEFAULT_CONFIG)
    # the broker layers hold broker names: a topic name there is not a synonym
    assert entries["retention.ms"] == ("604800000", ConfigSource.DEFAULT_CONFIG)


def test_one_effective_config() -> None:
    entry = effective_topic_config("retention.ms", {}, node_dynamic={}, cluster_dynamic={},
                                   static_config={"log.retention.minutes": "1"})
    assert (entry.name, entry.value, entry.source) == ("retention.ms", "60000", ConfigSource.STATIC_BROKER_CONFIG)
    entry = effective_topic_config("internal.segment.bytes", {}, node_dynamic={}, cluster_dynamic={}, static_config={})
    assert (entry.value, entry.source) == (None, ConfigSource.DEFAULT_CONFIG)
    with pytest.raises(KeyError):
        effective_topic_config("log.retention.ms", {}, node_dynamic={}, cluster_dynamic={}, static_config={})


@pytest.mark.parametrize("hours", ["2147483648", "1_000"])
def test_an_hours_synonym_java_cannot_parse_as_an_int_is_zero(hours: str) -> None:
    assert _effective(static={"log.retention.hours": hours})["retention.ms"] == ("0", ConfigSource.STATIC_BROKER_CONFIG)


@pytest.mark.parametrize(("minutes", "ms"), [(" 2\t", "120000"), ("\x012", "120000"), ("\u00a02", "0"), ("+\u0662", "120000"), ("", "0")])
def test_a_minutes_synonym_is_trimmed_and_parsed_as_java_does(minutes: str, ms: str) -> None:
    # valueToInt: String.trim (up to U+0020, not U+00A0), then Integer.parseInt (digits of any script)
    assert _effective(static={"log.retention.minutes": minutes})["retention.ms"] == (ms, ConfigSource.STATIC_BROKER_CONFIG)


def test_the_schema_types() -> None:
    types = {key.name: key.type for key in TOPIC_CONFIGS}
    assert types["segment.bytes"] is ConfigType.INT and types["retention.ms"] is ConfigType.LONG
    assert types["min.cleanable.dirty.ratio"] is ConfigType.DOUBLE and types["cleanup.policy"] is ConfigType.LIST
    assert types["preallocate"] is ConfigType.BOOLEAN and types["compression.type"] is ConfigType.STRING
    assert types["leader.replication.throttled.replicas"] is ConfigType.LIST


# ---------------------------------------------------------------- Double.toString


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.001, "0.001"), (9.99e-4, "9.99E-4"), (1e-4, "1.0E-4"), (5e-5, "5.0E-5"), (1e-10, "1.0E-10"),
        (0.1, "0.1"), (0.5, "0.5"), (1 / 3, "0.3333333333333333"), (3.14159, "3.14159"), (100.0, "100.0"),
        (123456.789, "123456.789"), (9999999.0, "9999999.0"), (1e7, "1.0E7"), (12345678.9, "1.23456789E7"),
        (1e21, "1.0E21"), (1.7976931348623157e308, "1.7976931348623157E308"), (-2.5, "-2.5"), (-1e7, "-1.0E7"),
        (0.0, "0.0"), (-0.0, "-0.0"), (math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"),
    ],
)
def test_java_double_string(value: float, text: str) -> None:
    assert java_double_string(value) == text


def test_java_double_string_of_the_smallest_double() -> None:
    assert java_double_string(5e-324) == "4.9E-324"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # JDK 17's Double.toString, where it is not the shortest text that reads back (JDK 19+)
        (1e23, "9.999999999999999E22"), (2.82879384806159e17, "2.82879384806159008E17"),
        (2.0**62 + 2.0**10, "4.6116860184273889E18"), (2.0**63, "9.223372036854776E18"),
        (2.2250738585072014e-308, "2.2250738585072014E-308"), (1e-323, "1.0E-323"), (-5e-324, "-4.9E-324"),
    ],
)
def test_java_double_string_as_jdk_17_writes_it(value: float, text: str) -> None:
    assert java_double_string(value) == text


@pytest.mark.parametrize(
    ("type_name", "raw", "shown"),
    [("BOOLEAN", "fal\u017fe", "false"), ("BOOLEAN", "TRUE", "true"), ("LIST", "a\u00a0, b", "a\u00a0,b"),
     ("LIST", "a\x1c,b\u2003,c", "a\x1c,b\u2003,c"), ("LIST", "a \t\x0b\x0c,\r\nb", "a,b")],
)
def test_booleans_compare_and_lists_split_as_java_does(type_name: str, raw: str, shown: str) -> None:
    # String.equalsIgnoreCase maps U+017F (long s) to 'S'; ConfigDef's "\\s*,\\s*" takes ASCII spaces only
    assert canonical_value(type_name, raw) == shown


@pytest.mark.parametrize("raw", ["tru\u0435", "\u0131rue", "true\u00a0"])
def test_a_boolean_java_refuses(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_value("BOOLEAN", raw)
