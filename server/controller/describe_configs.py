"""DescribeConfigs on a controller (``ControllerApis.handleDescribeConfigsRequest``, which runs
``ConfigHelper.describeConfigs``): any controller answers, active or not, from its image, its
own properties and the dynamic broker configs it applied to itself.

Each resource is answered on its own, in request order, as Kafka 4.4 answers it:

* TOPIC: the name is checked (``Topic.validate``: INVALID_TOPIC_EXCEPTION), the topic must exist
  (UNKNOWN_TOPIC_OR_PARTITION), then every non-internal topic config (and any other key the
  topic sets) with its effective value: the topic's own value, else the value the controller's
  ``KafkaConfig`` gives it (dynamic per-node over dynamic cluster default over static
  properties over Kafka's default), else the topic config's default.
* BROKER, empty name: the dynamic cluster defaults the controller applied.
* BROKER, this node's id: every non-internal ``KafkaConfig`` key (Kafka 4.4's schema,
  ``server.controller.broker_config_schema``) and every other key the node was given, with
  values after its dynamic configs; another id is INVALID_REQUEST.
* BROKER_LOGGER, this node's id: the levels of the node's loggers.
* CLIENT_METRICS: a subscription's configs over ``ClientMetricsConfigs``' defaults.
* GROUP: refused (INVALID_REQUEST); see compat/DEVIATIONS.md.

Synonyms, sources, types, sensitivity and read-only flags follow ``ConfigHelper``: a config's
synonyms are the values its broker-level names have in each layer (dynamic per-node, dynamic
default, static, default) from the first one named like the config itself on, and its source
is the first synonym's. Documentation is never given (Kafka's texts are not carried).

The entries' order is the order Kafka's maps hold them in (``java.util.HashMap`` for configs
read from a ``ConfigDef``, Scala's ``mutable.HashMap`` for the dynamic defaults), so that the
answer is Kafka's byte for byte. A dynamic config that the controller would not apply (a
non-dynamic key, a value of the wrong type, an unprefixed security config, a per-node config as
a cluster default) is left out as Kafka leaves it out; Kafka's range validators of dynamic
broker configs are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kwire.errors import Errors
from messages.generated.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from messages.generated.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from server.controller.authorizer import Authorize
from server.controller.broker_config_schema import (
    BROKER_CONFIGS,
    BROKER_QUOTA_CONFIGS,
    CLIENT_METRICS_CONFIGS,
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_SECURITY_CONFIGS,
    LISTENER_MECHANISM_CONFIGS,
    PER_BROKER_CONFIGS,
    ConfigKey,
)
from server.controller.configs import ResourceType, config_access
from server.controller.errors import ApiError
from server.controller.image import ReplicationControlManager, invalid_topic_name
from server.controller.java_numbers import java_parse_integer
from server.controller.java_order import (
    java_hash_map_order,
    java_string_hash,
)
from server.controller.topic_configs import (
    TOPIC_CONFIGS,
    ConfigSource,
    canonical_value,
)

__all__ = [
    "NodeConfigView",
    "broker_config_synonyms",
    "describe_configs",
    "scala_hash_map_order",
]

_BROKER = {key.name: key for key in BROKER_CONFIGS}
_QUOTA = {key.name: key for key in BROKER_QUOTA_CONFIGS}
_METRICS = {key.name: key for key in CLIENT_METRICS_CONFIGS}
_TOPIC = {key.name: key for key in TOPIC_CONFIGS}
_DYNAMIC_TYPES = {**{n: k for n, k in _BROKER.items() if n in DYNAMIC_BROKER_CONFIGS}, **_QUOTA}
"""``DynamicConfig.Broker``'s definition: the dynamic ``KafkaConfig`` keys and the quotas."""
_STATIC_DEFAULTS = {key.name: key.default for key in BROKER_CONFIGS if isinstance(key.default, str)}
"""``DynamicBrokerConfig.staticDefaultConfigs``: the defaults that are not null."""

_TOPIC_LISTED = java_hash_map_order([key.name for key in TOPIC_CONFIGS if not key.internal])
"""The non-internal topic configs in the order ``LogConfig.nonInternalValues`` (a HashMap) holds them."""
_TOPIC_NON_INTERNAL = frozenset(_TOPIC_LISTED)
_BROKER_LISTED = java_hash_map_order([key.name for key in BROKER_CONFIGS if not key.internal])
"""The non-internal ``KafkaConfig`` keys in the order its ``nonInternalValues`` holds them."""
_BROKER_NON_INTERNAL = frozenset(_BROKER_LISTED)
_METRICS_LISTED = java_hash_map_order([key.name for key in CLIENT_METRICS_CONFIGS if not key.internal])
_METRICS_NON_INTERNAL = frozenset(_METRICS_LISTED)

_TYPE_IDS = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8, "PASSWORD": 9}
"""``DescribeConfigsResponse.ConfigType`` ids by ``ConfigDef.Type`` name; 0 for unknown."""
_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
_KNOWN_TYPES = frozenset(int(t) for t in ResourceType)
_LOG4J_LEVELS = {"CRITICAL": "FATAL", "WARNING": "WARN", "NOTSET": "OFF"}


def broker_config_synonyms(name: str, *, listener_overrides: bool = True) -> list[str]:
    """``DynamicBrokerConfig.brokerConfigSynonyms``: the broker config names that set the same
    thing, the most specific first; with ``listener_overrides``, a listener's override
    (``listener.name.<listener>.<config>``) and its base config too."""
    for group in (
        ["log.roll.ms", "log.roll.hours"],
        ["log.roll.jitter.ms", "log.roll.jitter.hours"],
        ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
    ):
        if name in group:
            return group
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    match = _LISTENER_CONFIG.fullmatch(name) if listener_overrides else None
    if match:
        base = match.group(1)
        mechanism = next((m for m in sorted(LISTENER_MECHANISM_CONFIGS) if base.endswith(m)), None)
        return [name, mechanism or base]
    return [name]


def _broker_type(name: str) -> str | None:
    """``AbstractKafkaConfig.configType``: the key's type, a quota's, or a synonym's."""
    for table in (_BROKER, _QUOTA):
        if name in table:
            return table[name].type
    for synonym in broker_config_synonyms(name):
        if synonym in _BROKER:
            return _BROKER[synonym].type
    return None


def _sensitive(type_name: str | None) -> bool:
    return type_name is None or type_name == "PASSWORD"


def scala_hash_map_order(keys: Iterable[str]) -> list[str]:
    """``keys`` (distinct) in the order a Scala 2.13 ``mutable.HashMap`` holding them iterates
    them: by bucket (the low bits of the spread ``String.hashCode``, for the table size that many
    keys grow it to from 16), then by spread hash within a bucket (signed), as it keeps each
    bucket sorted."""
    keys = list(keys)
    size = 16
    while len(keys) >= size * 3 // 4:
        size *= 2

    def spread(key: str) -> int:
        code = java_string_hash(key)
        code ^= code >> 16
        return code - (1 << 32) if code >= 1 << 31 else code

    return sorted(keys, key=lambda key: (spread(key) & (size - 1), spread(key)))


def _applied(props: Mapping[str, str], per_node: bool) -> dict[str, str]:
    """``DynamicBrokerConfig.fromPersistentProps``: the dynamic configs a node applies."""
    out = {}
    for name, value in props.items():
        base = _LISTENER_CONFIG.fullmatch(name)
        typed = _DYNAMIC_TYPES.get(base.group(1) if base else name)
        if typed is not None:
            try:
                canonical_value(typed.type, value)
            except ValueError:
                continue
        if name in _BROKER and name not in DYNAMIC_BROKER_CONFIGS:
            continue
        if name in DYNAMIC_SECURITY_CONFIGS:
            continue
        if not per_node and (
            name in PER_BROKER_CONFIGS or (base is not None and base.group(1) not in CLUSTER_LEVEL_LISTENER_CONFIGS)
        ):
            continue
        out[name] = value
    return out


@dataclass(frozen=True)
class NodeConfigView:
    """What a controller describes configs from: its node id, its image, its own properties as
    given (``static``) and its loggers' levels (logger name -> level)."""

    node_id: int
    image: ReplicationControlManager
    static: Mapping[str, str]
    loggers: Callable[[], Mapping[str, str]]
    """The node's loggers and their effective levels (Python's level names; the node reads
    them from its logging registry, ``server.node.logger_levels``), listed at each request."""

    @property
    def node_dynamic(self) -> dict[str, str]:
        """The dynamic configs of this node it applied (``currentDynamicBrokerConfigs``)."""
        return _applied(self.image.configs.get((ResourceType.BROKER, str(self.node_id)), {}), per_node=True)

    @property
    def cluster_dynamic(self) -> dict[str, str]:
        """The dynamic cluster defaults it applied (``currentDynamicDefaultConfigs``)."""
        return _applied(self.image.configs.get((ResourceType.BROKER, ""), {}), per_node=False)


class _Describer:
    """One request's answers, with the node's layers computed once."""

    def __init__(self, view: NodeConfigView, include_synonyms: bool) -> None:
        self.view = view
        self.include_synonyms = include_synonyms
        self.node_dynamic = view.node_dynamic
        self.cluster_dynamic = view.cluster_dynamic
        static = {**view.static}
        for one, other in (("node.id", "broker.id"), ("broker.id", "node.id")):  # KafkaConfig.populateSynonyms
            if one in static and other not in static:
                static[other] = static[one]
        self.static = static
        """The node's properties as its ``KafkaConfig`` holds them (``staticBrokerConfigs``)."""
        merged = dict(static)
        for layer in (self.cluster_dynamic, self.node_dynamic):
            for name, value in layer.items():  # DynamicBrokerConfig.overrideProps
                for synonym in broker_config_synonyms(name, listener_overrides=False):
                    merged.pop(synonym, None)
                merged[name] = value
        self.merged = merged
        """The properties of the node's current ``KafkaConfig``: static, then the dynamic
        defaults, then its own dynamic configs, each dropping the synonyms of what it sets."""

    # -- ConfigHelper.configSynonyms -------------------------------------------------------

    def _synonyms(self, name: str, names: list[str], sensitive: bool) -> list[DescribeConfigsSynonym]:
        found = []
        for layer, source in (
            (self.node_dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.cluster_dynamic, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG),
            (_STATIC_DEFAULTS, ConfigSource.DEFAULT_CONFIG),
        ):
            for synonym in names:
                if synonym in layer:
                    value = None if sensitive else layer[synonym]
                    found.append(DescribeConfigsSynonym(name=synonym, value=value, source=source))
        while found and found[0].name != name:
            found.pop(0)
        return found

    def _entry(
        self, name: str, value: str | None, type_name: str | None, synonyms: list[DescribeConfigsSynonym],
        *, sensitive: bool, read_only: bool, default_source: int = ConfigSource.DEFAULT_CONFIG,
    ) -> DescribeConfigsResourceResult:
        return DescribeConfigsResourceResult(
            name=name,
            value=value,
            read_only=read_only,
            config_source=synonyms[0].source if synonyms else default_source,
            is_sensitive=sensitive,
            synonyms=synonyms if self.include_synonyms else [],
            config_type=_TYPE_IDS.get(type_name or "", 0),
            documentation=None,
        )

    # -- resources --------------------------------------------------------------------------

    def topic(self, name: str) -> list[DescribeConfigsResourceResult]:
        reason = invalid_topic_name(name)
        if reason is not None:
            raise ApiError(Errors.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")
        if name not in self.view.image.topic_ids:
            raise _Unknown
        props = self.view.image.configs.get((ResourceType.TOPIC, name), {})
        extra = [key for key in props if key not in _TOPIC_NON_INTERNAL]
        entries = []
        for config in [*java_hash_map_order(extra), *_TOPIC_LISTED]:
            key = _TOPIC.get(config)
            type_name = None if key is None else key.type.value
            sensitive = _sensitive(type_name)
            value = self._topic_value(config, props)
            shown = None if sensitive else value
            synonyms = []
            if key is not None and key.synonyms:
                primary = key.synonyms[0][0]
                synonyms = self._synonyms(primary, broker_config_synonyms(primary), sensitive)
            if config in props:
                synonyms.insert(0, DescribeConfigsSynonym(name=config, value=shown, source=ConfigSource.TOPIC_CONFIG))
            entries.append(self._entry(config, shown, type_name, synonyms, sensitive=sensitive, read_only=False))
        return entries

    def _topic_value(self, config: str, props: Mapping[str, str]) -> str | None:
        """``LogConfig.fromProps(config.extractLogConfigMap, topicProps)``'s value of ``config``."""
        key = _TOPIC.get(config)
        if key is None:
            return props[config]
        if config in props:
            return _canonical_or_raw(key.type.value, props[config])
        for synonym, factor in key.synonyms:
            if synonym in self.merged:
                raw = self.merged[synonym]
                broker_type = _broker_type(synonym) or key.type.value
                try:
                    value = canonical_value(broker_type, raw)
                except ValueError:
                    return _canonical_or_raw(key.type.value, raw)
                if factor != 1:
                    value = str(int(value) * factor)
                return _canonical_or_raw(key.type.value, value)
        return None if key.default is None else _canonical_or_raw(key.type.value, key.default)

    def broker_defaults(self) -> list[DescribeConfigsResourceResult]:
        entries = []
        for name in scala_hash_map_order(self.cluster_dynamic):
            entries.append(self._broker_entry(name, self.cluster_dynamic[name], per_node=False))
        return entries

    def broker(self) -> list[DescribeConfigsResourceResult]:
        extra = [name for name in java_hash_map_order(list(self.merged)) if name not in _BROKER_NON_INTERNAL]
        entries = [self._broker_entry(name, self.merged[name], per_node=True) for name in extra]
        for name in _BROKER_LISTED:
            key = _BROKER[name]
            if name in self.merged:
                value: str | None = _canonical_or_raw(key.type, self.merged[name])
            else:  # the default as Kafka writes it; None for a null default or none at all
                value = key.default if isinstance(key.default, str) else None
            entries.append(self._broker_entry(name, value, per_node=True))
        return entries

    def _broker_entry(self, name: str, value: str | None, *, per_node: bool) -> DescribeConfigsResourceResult:
        """``ConfigHelper.createBrokerConfigEntry``."""
        type_name = _broker_type(name)
        sensitive = _sensitive(type_name)
        synonyms = self._synonyms(name, broker_config_synonyms(name), sensitive)
        if not per_node:
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        return self._entry(
            name, None if sensitive else value, type_name, synonyms,
            sensitive=sensitive, read_only=name not in DYNAMIC_BROKER_CONFIGS,
        )

    def loggers(self) -> list[DescribeConfigsResourceResult]:
        return [
            DescribeConfigsResourceResult(
                name=name, value=level, read_only=False, config_source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                is_sensitive=False, synonyms=[], config_type=0, documentation=None,
            )
            for name, level in sorted((name, _LOG4J_LEVELS.get(level, level)) for name, level in self.view.loggers().items())
        ]

    def client_metrics(self, name: str) -> list[DescribeConfigsResourceResult]:
        props = self.view.image.configs.get((ResourceType.CLIENT_METRICS, name), {})
        extra = [config for config in java_hash_map_order(list(props)) if config not in _METRICS_NON_INTERNAL]
        entries = []
        for config in [*extra, *_METRICS_LISTED]:
            key: ConfigKey | None = _METRICS.get(config)
            type_name = None if key is None else key.type
            if config in props:
                value: str | None = props[config] if type_name is None else _canonical_or_raw(type_name, props[config])
            else:
                assert key is not None
                value = key.default if isinstance(key.default, str) else None
            synonyms = (
                [DescribeConfigsSynonym(name=config, value=value, source=ConfigSource.CLIENT_METRICS_CONFIG)]
                if config in props else []
            )
            entries.append(self._entry(config, value, type_name, synonyms, sensitive=False, read_only=False))
        return entries


class _Unknown(Exception):
    """The topic does not exist: UNKNOWN_TOPIC_OR_PARTITION with no message."""


def _canonical_or_raw(type_name: str, raw: str) -> str:
    try:
        return canonical_value(type_name, raw)
    except ValueError:
        return raw


def _broker_id(name: str) -> int:
    """``ConfigHelper.resourceNameToBrokerId``: ``Integer.parseInt`` or INVALID_REQUEST."""
    try:
        return java_parse_integer(name)
    except ValueError:
        raise ApiError(Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None


def _describe_one(describer: _Describer, resource: DescribeConfigsResource) -> list[DescribeConfigsResourceResult]:
    node_id = describer.view.node_id
    kind, name = resource.resource_type, resource.resource_name
    if kind == ResourceType.TOPIC:
        return describer.topic(name)
    if kind == ResourceType.BROKER:
        if not name:
            return describer.broker_defaults()
        if _broker_id(name) != node_id:
            raise ApiError(
                Errors.INVALID_REQUEST, f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
            )
        return describer.broker()
    if kind == ResourceType.BROKER_LOGGER:
        if not name:
            raise ApiError(Errors.INVALID_REQUEST, "Broker id must not be empty")
        if _broker_id(name) != node_id:
            raise ApiError(Errors.INVALID_REQUEST, f"Unexpected broker id, expected {node_id} but received {name}")
        return describer.loggers()
    if kind == ResourceType.CLIENT_METRICS:
        if not name:
            raise ApiError(Errors.INVALID_REQUEST, "Client metrics subscription name must not be empty")
        return describer.client_metrics(name)
    if kind == ResourceType.GROUP:
        if not name:
            raise ApiError(Errors.INVALID_REQUEST, "Group name must not be empty")
        raise ApiError(Errors.INVALID_REQUEST, "This controller does not describe group configs")
    raise AssertionError(f"resource type {kind} passed the check of describe_configs")


INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the message was sent to "
    "an incompatible broker. See the broker logs for more details."
)
"""``InvalidRequestException``'s default message: what every resource of a request that names
an unknown resource type is answered with."""


def describe_configs(
    request: DescribeConfigsRequest, view: NodeConfigView, authorize: Authorize | None = None
) -> DescribeConfigsResponse:
    """The DescribeConfigs answer of the controller ``view`` describes: one result per
    resource, in request order; a resource's failure (INVALID_REQUEST, INVALID_TOPIC_EXCEPTION,
    UNKNOWN_TOPIC_OR_PARTITION) is its result's error and takes nothing from the others. A
    request naming a resource type Kafka does not know fails whole (each resource
    INVALID_REQUEST with :data:`INVALID_REQUEST_MESSAGE`), as the authorization step Kafka
    runs first throws for it. With ``authorize``, a resource the principal may not
    DESCRIBE_CONFIGS (``server.controller.configs.config_access``) gets its error and Kafka's
    default message, and no configs."""
    if any(r.resource_type not in _KNOWN_TYPES for r in request.resources):
        return DescribeConfigsResponse(
            results=[
                DescribeConfigsResult(
                    error_code=Errors.INVALID_REQUEST, error_message=INVALID_REQUEST_MESSAGE,
                    resource_type=r.resource_type, resource_name=r.resource_name,
                )
                for r in request.resources
            ]
        )
    describer = _Describer(view, request.include_synonyms)
    results = []
    for resource in request.resources:
        result = DescribeConfigsResult(resource_type=resource.resource_type, resource_name=resource.resource_name)
        access = config_access(resource.resource_type, resource.resource_name, alter=False)
        if authorize is not None and access is not None and not authorize(*access[:3], True):
            result.error_code, result.error_message = access[3], access[4]
            results.append(result)
            continue
        try:
            entries = _describe_one(describer, resource)
        except _Unknown:
            result.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
        except ApiError as exc:
            result.error_code = exc.error
            result.error_message = exc.message
        else:
            keys = resource.configuration_keys
            result.configs = [e for e in entries if not keys or e.name in keys]
        results.append(result)
    return DescribeConfigsResponse(results=results)
