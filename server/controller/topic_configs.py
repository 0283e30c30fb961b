"""Topic configs as the controller checks and reports them: Kafka 4.4's topic config schema
(``LogConfig``'s definitions, ``ServerTopicConfigSynonyms``), parsed and validated as
``ConfigDef.parse`` and ``LogConfig.validate`` do, and resolved to effective values with their
source as ``KafkaConfigSchema.resolveEffectiveTopicConfigs`` does.

A value is resolved, in order, from the topic's own configs (source TOPIC_CONFIG), the node's
dynamic broker configs (DYNAMIC_BROKER_CONFIG), the cluster's dynamic default broker configs
(DYNAMIC_DEFAULT_BROKER_CONFIG), the node's ``server.properties`` as written
(STATIC_BROKER_CONFIG), and the schema's default (DEFAULT_CONFIG), looking at each broker-level
synonym of the topic config in turn (``log.retention.hours`` in ms for ``retention.ms``). Errors
are ApiError INVALID_CONFIG with Kafka's messages. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any

from kwire.errors import Errors
from server.controller.errors import ApiError
from server.controller.java_numbers import (
    java_double_string,
    java_parse_double,
    java_parse_integer,
    java_trim,
)

__all__ = [
    "TOPIC_CONFIGS",
    "ConfigSource",
    "ConfigType",
    "EffectiveConfig",
    "TopicConfigKey",
    "canonical_value",
    "effective_topic_config",
    "effective_topic_configs",
    "java_double_string",
    "parse_value",
    "validate_topic_configs",
    "value_string",
]


class ConfigType(Enum):
    """``ConfigDef.Type`` of a topic config."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"


class ConfigSource(IntEnum):
    """Where an effective value comes from (``DescribeConfigsResponse.ConfigSource`` ids)."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7


class _Invalid(Exception):
    """A value a validator refuses: ``shown`` is the value as Kafka prints it, None when
    ``reason`` is the whole message."""

    def __init__(self, shown: str | None, reason: str) -> None:
        super().__init__(reason)
        self.shown = shown
        self.reason = reason


Check = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    """One topic config: its type, its default as Kafka prints it (None: no default), the
    validator of its parsed value, and its broker-level synonyms as ``(key, factor)`` where the
    broker key's value times ``factor`` is the topic value (hours to ms: 3,600,000)."""

    name: str
    type: ConfigType
    default: str | None
    check: Check | None = None
    synonyms: tuple[tuple[str, int], ...] = ()
    internal: bool = False


def _number_text(value: Any) -> str:
    return java_double_string(value) if isinstance(value, float) else str(value)


def _range(low: float | None = None, high: float | None = None) -> Check:
    """``ConfigDef.Range``: at least ``low``, no more than ``high``."""

    def check(value: Any) -> None:
        if low is not None and value < low:
            raise _Invalid(_number_text(value), f"Value must be at least {_number_text(low)}")
        if high is not None and value > high:
            raise _Invalid(_number_text(value), f"Value must be no more than {_number_text(high)}")

    return check


def _one_of(*allowed: str) -> Check:
    """``ConfigDef.ValidString``."""

    def check(value: Any) -> None:
        if value not in allowed:
            raise _Invalid(value, f"String must be one of: {', '.join(allowed)}")

    return check


def _list_of(name: str, *allowed: str) -> Check:
    """``ConfigDef.ValidList``: no empty element, each one of ``allowed`` (an empty list is
    allowed, as in Kafka 4.x)."""

    def check(value: Any) -> None:
        if any(not item for item in value):
            raise _Invalid(None, f"Configuration '{name}' values must not be empty.")
        for item in value:
            if item not in allowed:
                raise _Invalid(item, f"String must be one of: {', '.join(allowed)}")

    return check


def _gzip_level(value: Any) -> None:
    if not (1 <= value <= 9 or value == -1):
        raise _Invalid(str(value), "Value must be between 1 and 9 or equal to -1")


_REPLICA = re.compile(r"\d+:\d+")


def _throttled_replicas(name: str) -> Check:
    """``ThrottledReplicaListValidator``: ``*`` alone, or ``partition:broker`` pairs."""

    def check(value: Any) -> None:
        if value == ["*"] or all(_REPLICA.fullmatch(item) for item in value):
            return
        raise _Invalid(
            "[" + ", ".join(value) + "]",
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )

    return check


_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_HOUR_MS = 3_600_000
_B, _S, _I, _L, _D, _LS = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

TOPIC_CONFIGS: tuple[TopicConfigKey, ...] = (
    TopicConfigKey("segment.bytes", _I, "1073741824", _range(1048576), (("log.segment.bytes", 1),)),
    TopicConfigKey(
        "segment.ms", _L, "604800000", _range(1), (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS))
    ),
    TopicConfigKey(
        "segment.jitter.ms",
        _L,
        "0",
        _range(0),
        (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)),
    ),
    TopicConfigKey(
        "segment.index.bytes", _I, "10485760", _range(4), (("log.index.size.max.bytes", 1),)
    ),
    TopicConfigKey(
        "flush.messages", _L, str(_LONG_MAX), _range(1), (("log.flush.interval.messages", 1),)
    ),
    TopicConfigKey(
        "flush.ms",
        _L,
        str(_LONG_MAX),
        _range(0),
        (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    ),
    TopicConfigKey("retention.bytes", _L, "-1", None, (("log.retention.bytes", 1),)),
    TopicConfigKey(
        "retention.ms",
        _L,
        "604800000",
        _range(-1),
        (
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", _HOUR_MS),
        ),
    ),
    TopicConfigKey("max.message.bytes", _I, "1048588", _range(0), (("message.max.bytes", 1),)),
    TopicConfigKey(
        "max.decompressed.message.bytes",
        _I,
        "2147483639",
        _range(1, 2147483639),
        (("max.decompressed.message.bytes", 1),),
    ),
    TopicConfigKey(
        "index.interval.bytes", _I, "4096", _range(0), (("log.index.interval.bytes", 1),)
    ),
    TopicConfigKey(
        "delete.retention.ms", _L, "86400000", _range(0), (("log.cleaner.delete.retention.ms", 1),)
    ),
    TopicConfigKey(
        "min.compaction.lag.ms", _L, "0", _range(0), (("log.cleaner.min.compaction.lag.ms", 1),)
    ),
    TopicConfigKey(
        "max.compaction.lag.ms",
        _L,
        str(_LONG_MAX),
        _range(1),
        (("log.cleaner.max.compaction.lag.ms", 1),),
    ),
    TopicConfigKey(
        "file.delete.delay.ms", _L, "60000", _range(0), (("log.segment.delete.delay.ms", 1),)
    ),
    TopicConfigKey(
        "min.cleanable.dirty.ratio",
        _D,
        "0.5",
        _range(0, 1),
        (("log.cleaner.min.cleanable.ratio", 1),),
    ),
    TopicConfigKey(
        "cleanup.policy",
        _LS,
        "delete",
        _list_of("cleanup.policy", "compact", "delete"),
        (("log.cleanup.policy", 1),),
    ),
    TopicConfigKey(
        "unclean.leader.election.enable",
        _B,
        "false",
        None,
        (("unclean.leader.election.enable", 1),),
    ),
    TopicConfigKey("min.insync.replicas", _I, "1", _range(1), (("min.insync.replicas", 1),)),
    TopicConfigKey(
        "compression.type",
        _S,
        "producer",
        _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        (("compression.type", 1),),
    ),
    TopicConfigKey(
        "compression.gzip.level", _I, "-1", _gzip_level, (("compression.gzip.level", 1),)
    ),
    TopicConfigKey(
        "compression.lz4.level", _I, "9", _range(1, 17), (("compression.lz4.level", 1),)
    ),
    TopicConfigKey(
        "compression.zstd.level", _I, "3", _range(-131072, 22), (("compression.zstd.level", 1),)
    ),
    TopicConfigKey("preallocate", _B, "false", None, (("log.preallocate", 1),)),
    TopicConfigKey(
        "message.timestamp.type",
        _S,
        "CreateTime",
        _one_of("CreateTime", "LogAppendTime"),
        (("log.message.timestamp.type", 1),),
    ),
    TopicConfigKey(
        "message.timestamp.before.max.ms",
        _L,
        str(_LONG_MAX),
        _range(0),
        (("log.message.timestamp.before.max.ms", 1),),
    ),
    TopicConfigKey(
        "message.timestamp.after.max.ms",
        _L,
        "3600000",
        _range(0),
        (("log.message.timestamp.after.max.ms", 1),),
    ),
    TopicConfigKey(
        "leader.replication.throttled.replicas",
        _LS,
        "",
        _throttled_replicas("leader.replication.throttled.replicas"),
    ),
    TopicConfigKey(
        "follower.replication.throttled.replicas",
        _LS,
        "",
        _throttled_replicas("follower.replication.throttled.replicas"),
    ),
    TopicConfigKey("remote.storage.enable", _B, "false"),
    TopicConfigKey("local.retention.ms", _L, "-2", _range(-2), (("log.local.retention.ms", 1),)),
    TopicConfigKey(
        "local.retention.bytes", _L, "-2", _range(-2), (("log.local.retention.bytes", 1),)
    ),
    TopicConfigKey("remote.log.copy.disable", _B, "false"),
    TopicConfigKey("remote.copy.lag.ms", _L, "0", _range(-1), (("log.remote.copy.lag.ms", 1),)),
    TopicConfigKey(
        "remote.copy.lag.bytes", _L, "-1", _range(-1), (("log.remote.copy.lag.bytes", 1),)
    ),
    TopicConfigKey("remote.log.delete.on.disable", _B, "false"),
    TopicConfigKey("errors.deadletterqueue.group.enable", _B, "false"),
    TopicConfigKey("internal.segment.bytes", _I, None, internal=True),
)
"""Kafka 4.4's topic configs in ``LogConfig``'s definition order (the order it checks them)."""

_BY_NAME = {key.name: key for key in TOPIC_CONFIGS}


def _not_a(name: str, raw: str, kind: str) -> ApiError:
    return ApiError(
        Errors.INVALID_CONFIG,
        f"Invalid value {raw} for configuration {name}: Not a number of type {kind}",
    )


_BITS = {"SHORT": 16, "INT": 32, "LONG": 64}

_COMMA_WITH_WHITESPACE = re.compile(r"\s*,\s*", re.ASCII)
"""``ConfigDef.COMMA_WITH_WHITESPACE``: a Java regex's whitespace class is ASCII only (space,
tab, line feed, vertical tab, form feed, carriage return), not U+00A0 or the other Unicode
spaces a Python one takes without ``re.ASCII``."""


def _simple_case(char: str, mapped: str) -> str:
    """A one-character case mapping as Java's ``Character.toUpperCase(char)`` /
    ``toLowerCase(char)`` does it: ``char`` itself where Python's mapping gives several."""
    return mapped if len(mapped) == 1 else char


def _java_equals_ignore_case(text: str, other: str) -> bool:
    """``String.equalsIgnoreCase``: the same length, and each pair of characters equal, equal
    in upper case, or equal in the lower case of their upper case (so "falſe", with U+017F, is
    "false")."""
    if len(text) != len(other):
        return False
    for a, b in zip(text, other, strict=True):
        if a == b:
            continue
        upper_a, upper_b = _simple_case(a, a.upper()), _simple_case(b, b.upper())
        if upper_a != upper_b and _simple_case(upper_a, upper_a.lower()) != _simple_case(upper_b, upper_b.lower()):
            return False
    return True


def parse_value(type_name: str, raw: str) -> Any:
    """``ConfigDef.parseType`` of the string ``raw`` as the ``ConfigDef.Type`` named
    ``type_name`` (BOOLEAN, STRING, SHORT, INT, LONG, DOUBLE, LIST, CLASS, PASSWORD): trimmed
    as ``String.trim`` does, then a bool, an int (``Integer.parseInt`` and its kin), a float
    (``Double.parseDouble``: hexadecimal literals and an f/d suffix too, ASCII digits only), a
    list of strings or the text. Raises ValueError for a value the type refuses."""
    text = java_trim(raw)
    if type_name == "BOOLEAN":
        if _java_equals_ignore_case(text, "true"):
            return True
        if _java_equals_ignore_case(text, "false"):
            return False
        raise ValueError(f"not a boolean: {raw!r}")
    if type_name in _BITS:
        return java_parse_integer(text, _BITS[type_name])
    if type_name == "DOUBLE":
        return java_parse_double(text)
    if type_name == "LIST":
        return [] if not text else _COMMA_WITH_WHITESPACE.split(text)
    return text


def value_string(value: Any) -> str:
    """``ConfigDef.convertToString`` of a parsed value: booleans in lower case, doubles as
    Java writes them, lists joined by ','."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return _number_text(value)


def canonical_value(type_name: str, raw: str) -> str:
    """``raw`` parsed as ``type_name`` and written back as Kafka writes the parsed value.
    Raises ValueError as :func:`parse_value`."""
    return value_string(parse_value(type_name, raw))


def _parse(key: TopicConfigKey, raw: str) -> Any:
    """``ConfigDef.parseType`` for topic config ``key``, refusals as Kafka words them
    (INVALID_CONFIG)."""
    try:
        return parse_value(key.type.value, raw)
    except ValueError:
        if key.type is ConfigType.BOOLEAN:
            raise ApiError(
                Errors.INVALID_CONFIG,
                f"Invalid value {raw} for configuration {key.name}: Expected value to be either true or false",
            ) from None
        raise _not_a(key.name, raw, key.type.value) from None


def _validate_value(key: TopicConfigKey, raw: str) -> Any:
    value = _parse(key, raw)
    if key.check is not None:
        try:
            key.check(value)
        except _Invalid as invalid:
            if invalid.shown is None:
                raise ApiError(Errors.INVALID_CONFIG, invalid.reason) from None
            raise ApiError(
                Errors.INVALID_CONFIG,
                f"Invalid value {invalid.shown} for configuration {key.name}: {invalid.reason}",
            ) from None
    return value


def validate_topic_configs(configs: Mapping[str, str], static_config: Mapping[str, str]) -> None:
    """Check a topic's configs as a controller's ``LogConfig.validate`` does: every name known,
    every value of its type and within its validator, ``min.compaction.lag.ms`` no more than
    ``max.compaction.lag.ms`` (either from the topic or from ``static_config``, the node's
    properties), and no remote storage (this controller has no tiered storage system). Raises
    ApiError INVALID_CONFIG."""
    for name in configs:
        if name not in _BY_NAME:
            raise ApiError(Errors.INVALID_CONFIG, f"Unknown topic config name: {name}")
    values = {
        key.name: _validate_value(key, configs[key.name])
        for key in TOPIC_CONFIGS
        if key.name in configs
    }

    def effective(name: str) -> Any:
        if name in values:
            return values[name]
        key = _BY_NAME[name]
        value, _ = _resolve(key, {}, {}, {}, static_config)
        return None if value is None else _parse(key, value)

    low, high = effective("min.compaction.lag.ms"), effective("max.compaction.lag.ms")
    if low > high:
        raise ApiError(
            Errors.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})",
        )
    if values.get("remote.storage.enable"):
        raise ApiError(
            Errors.INVALID_CONFIG,
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        )


@dataclass(frozen=True, slots=True)
class EffectiveConfig:
    """A topic config's effective value (None: no value) and where it comes from."""

    name: str
    value: str | None
    source: ConfigSource


def _convert(value: str, factor: int) -> str:
    """A broker synonym's value in the topic config's unit: ``ConfigSynonym.HOURS_TO_MILLISECONDS``
    and ``MINUTES_TO_MILLISECONDS`` read it with ``valueToInt`` (``String.trim``, then
    ``Integer.parseInt``; 0 for an empty value or one that is not an int, such as one beyond
    2^31 - 1 or with '_' between digits)."""
    if factor == 1:
        return value
    try:
        number = java_parse_integer(java_trim(value))
    except ValueError:
        number = 0
    return str(number * factor)


def _resolve(
    key: TopicConfigKey,
    topic: Mapping[str, str],
    node_dynamic: Mapping[str, str],
    cluster_dynamic: Mapping[str, str],
    static_config: Mapping[str, str],
) -> tuple[str | None, ConfigSource]:
    if key.name in topic:
        return topic[key.name], ConfigSource.TOPIC_CONFIG
    for layer, source in (
        (node_dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (cluster_dynamic, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (static_config, ConfigSource.STATIC_BROKER_CONFIG),
    ):
        for synonym, factor in key.synonyms:
            if synonym in layer:
                return _convert(layer[synonym], factor), source
    return key.default, ConfigSource.DEFAULT_CONFIG


def effective_topic_configs(
    topic: Mapping[str, str],
    *,
    node_dynamic: Mapping[str, str],
    cluster_dynamic: Mapping[str, str],
    static_config: Mapping[str, str],
) -> list[EffectiveConfig]:
    """Every non-internal topic config (an internal one only when the topic sets it) with its
    effective value and source, sorted by name: ``topic`` the topic's configs,
    ``node_dynamic`` the node's dynamic broker configs, ``cluster_dynamic`` the cluster's
    default broker configs, ``static_config`` the node's properties as written."""
    entries = []
    for key in TOPIC_CONFIGS:
        if key.internal and key.name not in topic:
            continue
        value, source = _resolve(key, topic, node_dynamic, cluster_dynamic, static_config)
        entries.append(EffectiveConfig(key.name, value, source))
    return sorted(entries, key=lambda entry: entry.name)


def effective_topic_config(
    name: str,
    topic: Mapping[str, str],
    *,
    node_dynamic: Mapping[str, str],
    cluster_dynamic: Mapping[str, str],
    static_config: Mapping[str, str],
) -> EffectiveConfig:
    """One topic config's effective value and source (``ConfigurationControlManager
    .getTopicConfig``), from the same layers as :func:`effective_topic_configs`. Raises
    KeyError for a name that is not a topic config."""
    value, source = _resolve(_BY_NAME[name], topic, node_dynamic, cluster_dynamic, static_config)
    return EffectiveConfig(name, value, source)
