"""IncrementalAlterConfigs and AlterConfigs at the active controller, as Kafka 4.4's
``ControllerApis`` and ``ConfigurationControlManager`` handle them (KIP-339 for the incremental
form).

A request names resources by (type, name). A type Kafka does not know answers UNSUPPORTED_VERSION
"Unknown resource type N."; a resource named twice answers INVALID_REQUEST "Duplicate resource."
Every other resource is changed on its own, and all the changes of one request are one batch:

* incremental: each config is SET, DELETEd, APPENDed to or SUBTRACTed from (list configs only,
  else INVALID_CONFIG "Can't APPEND to key X because its type is not LIST."); a ConfigRecord is
  written for each config whose value changes, and for every config of a broker resource;
* legacy: the given configs replace the resource's configs; the ones left out are deleted.

Checks, in Kafka's order: broker-level ``min.insync.replicas`` while eligible leader replicas
are enabled; removing the cluster-level one then; values over 32,767 characters; the topic name
(the default topic resource is refused) and every topic config (``server.controller
.topic_configs``); the broker name (a base-10 id, not negative); and that the topic exists
(UNKNOWN_TOPIC_OR_PARTITION) or the node is a registered broker, a registered controller or a
voter (BROKER_ID_NOT_REGISTERED); last, ``alter.config.policy.class.name``'s policy
(``server.controller.plugins``: POLICY_VIOLATION, or UNKNOWN_SERVER_ERROR when it fails). A ``min.insync.replicas`` ConfigRecord is followed by a
ClearElrRecord while eligible leader replicas are enabled.

Not here: BROKER_LOGGER resources (the controller's own Log4j loggers), CLIENT_METRICS and GROUP
resources: they answer INVALID_REQUEST "Unexpected resource type X." (Kafka's answer for a
broker logger in AlterConfigs; compat/DEVIATIONS.md); and the ``cordoned.log.dirs`` checks
(KIP-1066). No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from kwire.errors import Errors
from messages.generated.alter_configs_request import AlterConfigsRequest
from messages.generated.alter_configs_response import AlterConfigsResourceResponse as LegacyResult
from messages.generated.clear_elr_record import ClearElrRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from messages.generated.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResult,
)
from server.controller.acls import CLUSTER, CLUSTER_NAME, GROUP, TOPIC
from server.controller.authorizer import ALTER_CONFIGS, CLUSTER_ACTION, DESCRIBE_CONFIGS, Authorize
from server.controller.errors import ApiError
from server.controller.image import ReplicationControlManager, invalid_topic_name
from server.controller.java_numbers import java_parse_integer
from server.controller.java_order import (
    java_hash_map_order,
    timeline_hash_map_order,
)
from server.controller.plugins import NO_PLUGINS, ControllerPlugins
from server.controller.result import Record
from server.controller.topic_configs import (
    TOPIC_CONFIGS,
    ConfigType,
    validate_topic_configs,
)
from server.controller.topics import MIN_INSYNC_REPLICAS

__all__ = [
    "BROKER_LIST_CONFIGS",
    "ConfigContext",
    "OpType",
    "ResourceType",
    "incremental_alter_configs",
    "legacy_alter_configs",
]

MAX_VALUE_LENGTH = 32767


class ResourceType(IntEnum):
    """``ConfigResource.Type`` ids."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class OpType(IntEnum):
    """``AlterConfigOp.OpType`` ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


BROKER_LIST_CONFIGS: Mapping[str, str | None] = {
    "advertised.listeners": None,
    "config.providers": "",
    "controller.listener.names": None,
    "controller.quorum.bootstrap.servers": "",
    "controller.quorum.voters": "",
    "cordoned.log.dirs": "",
    "early.start.listeners": None,
    "group.consumer.assignors": "uniform,range",
    "group.coordinator.rebalance.protocols": "classic,consumer,streams",
    "group.share.assignors": "simple",
    "group.streams.assignors": "sticky",
    "group.streams.rack.aware.assignment.tags": "",
    "kafka.metrics.reporters": "",
    "listeners": "PLAINTEXT://:9092",
    "log.cleanup.policy": "delete",
    "log.dir": "/tmp/kafka-logs",
    "log.dirs": None,
    "metric.reporters": "org.apache.kafka.common.metrics.JmxReporter",
    "process.roles": None,
    "sasl.enabled.mechanisms": "GSSAPI",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT",
    "sasl.oauthbearer.expected.audience": "",
    "ssl.cipher.suites": "",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
}
"""Kafka 4.4's broker configs of type LIST and their defaults (None: no default), the broker
configs APPEND and SUBTRACT apply to."""

_TOPIC_LISTS = {key.name: key.default for key in TOPIC_CONFIGS if key.type is ConfigType.LIST}


@dataclass(frozen=True, slots=True)
class ConfigContext:
    """What the checks read: the image (topics and current configs), the ids a broker
    resource may name (registered brokers, registered controllers, voters), this node's
    properties as written, whether eligible leader replicas are enabled, and the plug-ins."""

    image: ReplicationControlManager
    known_node_ids: frozenset[int]
    static_config: Mapping[str, str]
    elr_enabled: bool
    plugins: ControllerPlugins = NO_PLUGINS
    """The alter-config policy (``server.controller.plugins``) comes from here."""


def _split_default(resource_type: int, key: str) -> str | None:
    if resource_type == ResourceType.TOPIC:
        return _TOPIC_LISTS.get(key)
    return BROKER_LIST_CONFIGS.get(key)


def _splittable(resource_type: int, key: str) -> bool:
    if resource_type == ResourceType.TOPIC:
        return key in _TOPIC_LISTS
    return resource_type == ResourceType.BROKER and key in BROKER_LIST_CONFIGS


def _java_split(value: str) -> list[str]:
    """Java's ``String.split(",")``: the text between commas, trailing empty strings dropped
    (``"a,,b,,"`` gives a, "", b; ``",,"`` gives nothing), but a text without a comma, the
    empty one included, is its own single part."""
    if "," not in value:
        return [value]
    parts = value.split(",")
    while parts and not parts[-1]:
        parts.pop()
    return parts


def _parts(value: str | None, resource_type: int, key: str) -> list[str]:
    """``getParts``: the value (or the config's default) split on ',' without empty parts."""
    if value is None:
        value = _split_default(resource_type, key)
    return [] if value is None else [part for part in _java_split(value) if part]


def _check_name(resource_type: int, name: str) -> None:
    """``ControllerConfigurationValidator.validate``'s name checks."""
    if resource_type == ResourceType.TOPIC:
        if not name:
            raise ApiError(Errors.INVALID_REQUEST, "Default topic resources are not allowed.")
        reason = invalid_topic_name(name)
        if reason is not None:
            raise ApiError(Errors.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")
    elif resource_type == ResourceType.BROKER and name:
        try:
            broker_id = java_parse_integer(name)  # Integer.valueOf
        except ValueError:
            raise ApiError(Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.") from None
        if broker_id < 0:
            raise ApiError(Errors.INVALID_REQUEST, "Invalid negative broker ID.")


def _validate(
    context: ConfigContext,
    resource_type: int,
    name: str,
    altered: list[ConfigRecord],
    deleted: list[ConfigRecord],
    newly_created: bool = False,
) -> None:
    """``validateAlterConfig``: raises ApiError."""
    existing = dict(context.image.configs.get((resource_type, name), {}))
    all_configs = dict(existing)
    for record in altered:
        _check_min_isr(context, record)
        if record.value is None:
            all_configs.pop(record.name, None)
        else:
            if len(record.value) > MAX_VALUE_LENGTH:
                raise ApiError(
                    Errors.INVALID_CONFIG,
                    "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.",
                )
            all_configs[record.name] = record.value
    for record in deleted:
        _check_min_isr(context, record)
        all_configs.pop(record.name, None)
    _check_name(resource_type, name)
    if resource_type == ResourceType.TOPIC:
        validate_topic_configs(all_configs, context.static_config)
    elif resource_type != ResourceType.BROKER:
        raise ApiError(Errors.INVALID_REQUEST, f"Unexpected resource type {ResourceType(resource_type).name}.")
    if not newly_created:
        if resource_type == ResourceType.TOPIC and name not in context.image.topic_ids:
            raise ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if resource_type == ResourceType.BROKER and name and int(name) not in context.known_node_ids:
            raise ApiError(Errors.BROKER_ID_NOT_REGISTERED, f"No node with id {int(name)} found.")
    # the policy sees the configs explicitly altered, not the implicit deletions (KAFKA-14195)
    context.plugins.validate_alter_config(
        ResourceType(resource_type).name, name, {record.name: record.value for record in altered}
    )


def _check_min_isr(context: ConfigContext, record: ConfigRecord) -> None:
    if record.name != MIN_INSYNC_REPLICAS or record.resource_type != ResourceType.BROKER or not context.elr_enabled:
        return
    if record.resource_name:
        raise ApiError(Errors.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    if record.value is None:
        raise ApiError(Errors.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")


def _clear_elr(context: ConfigContext, records: list[Record]) -> list[Record]:
    """``createClearElrRecordsAsNeeded``."""
    if not context.elr_enabled:
        return []
    out: list[Record] = []
    for record, _ in records:
        if isinstance(record, ConfigRecord) and record.name == MIN_INSYNC_REPLICAS:
            topic = record.resource_name if record.resource_type == ResourceType.TOPIC else ""
            out.append((ClearElrRecord(topic_name=topic), 0))
    return out


def config_access(resource_type: int, name: str, *, alter: bool) -> tuple[int, int, str, Errors, str] | None:
    """What authorization a config resource needs (``ControllerApis.authorizeAlterResource``,
    ``ConfigHelper``): (operation, ACL resource type, ACL resource name, the error and its
    message on a refusal), or None for a type that is not checked. Alterations need
    ALTER_CONFIGS (a broker logger CLUSTER_ACTION), descriptions DESCRIBE_CONFIGS; broker,
    broker logger and client-metrics resources are checked on the cluster, a topic or a group
    on itself."""
    operation = ALTER_CONFIGS if alter else DESCRIBE_CONFIGS
    if resource_type in (ResourceType.BROKER, ResourceType.CLIENT_METRICS, ResourceType.BROKER_LOGGER):
        if resource_type == ResourceType.BROKER_LOGGER and alter:
            operation = CLUSTER_ACTION
        return operation, CLUSTER, CLUSTER_NAME, Errors.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    if resource_type == ResourceType.TOPIC:
        return operation, TOPIC, name, Errors.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    if resource_type == ResourceType.GROUP:
        return operation, GROUP, name, Errors.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    return None


def _resources(
    request: IncrementalAlterConfigsRequest | AlterConfigsRequest,
    result: Callable[[int, str, Errors, str | None], None],
    authorize: Authorize | None = None,
    *,
    legacy: bool = False,
) -> dict[tuple[int, str], list[object]]:
    """The request's resources of known types named once and allowed by ``authorize``, by
    (type, name), in request order; the others are answered through ``result`` (unknown types
    and duplicates first, then the refusals)."""
    known = {int(t) for t in ResourceType}
    seen: dict[tuple[int, str], list[object]] = {}
    duplicates: set[tuple[int, str]] = set()
    for resource in request.resources:
        key = (resource.resource_type, resource.resource_name)
        if resource.resource_type not in known:
            result(*key, Errors.UNSUPPORTED_VERSION, f"Unknown resource type {resource.resource_type}.")
        elif key in duplicates:
            continue
        elif key in seen:
            del seen[key]
            duplicates.add(key)
            result(*key, Errors.INVALID_REQUEST, "Duplicate resource.")
        else:
            seen[key] = list(resource.configs)
    if authorize is not None:
        for key in list(seen):
            if legacy and key[0] == ResourceType.BROKER_LOGGER:
                continue
            access = config_access(*key, alter=True)
            if access is not None and not authorize(*access[:3], True):
                del seen[key]
                result(*key, access[3], access[4])
    return seen


def incremental_alter_configs(
    request: IncrementalAlterConfigsRequest, context: ConfigContext, authorize: Authorize | None = None
) -> tuple[list[Record], list[IncrementalResult]]:
    """IncrementalAlterConfigs (module docstring): the records of every resource that passed
    its checks (none when ValidateOnly) and one result per resource."""
    results: list[IncrementalResult] = []

    def result(resource_type: int, name: str, error: Errors, message: str | None) -> None:
        results.append(
            IncrementalResult(error_code=error, error_message=message, resource_type=resource_type, resource_name=name)
        )

    records: list[Record] = []
    for (resource_type, name), configs in _resources(request, result, authorize).items():
        if resource_type in (ResourceType.BROKER_LOGGER, ResourceType.CLIENT_METRICS, ResourceType.GROUP):
            result(
                resource_type, name, Errors.INVALID_REQUEST, f"Unexpected resource type {ResourceType(resource_type).name}."
            )
            continue
        ops: dict[str, tuple[int, str | None]] = {}
        for config in configs:
            ops[config.name] = (config.config_operation, config.value)  # type: ignore[attr-defined]
        current = context.image.configs.get((resource_type, name), {})
        altered: list[ConfigRecord] = []
        try:
            for key in java_hash_map_order(list(ops)):
                op, value = ops[key]
                old = current.get(key)
                new: str | None
                if op == OpType.SET:
                    new = value
                elif op == OpType.DELETE:
                    new = None
                elif op in (OpType.APPEND, OpType.SUBTRACT):
                    if not _splittable(resource_type, key):
                        raise ApiError(
                            Errors.INVALID_CONFIG, f"Can't {OpType(op).name} to key {key} because its type is not LIST."
                        )
                    parts = _parts(old, resource_type, key)
                    # incrementalAlterConfigResource splits the operand with String.split(",")
                    for item in _java_split(value or ""):
                        if op == OpType.APPEND and item not in parts:
                            parts.append(item)
                        elif op == OpType.SUBTRACT and item in parts:
                            parts.remove(item)
                    new = ",".join(parts)
                else:
                    new = old
                if new != old or resource_type == ResourceType.BROKER:
                    altered.append(
                        ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=new)
                    )
            _validate(context, resource_type, name, altered, [])
        except ApiError as exc:
            result(resource_type, name, exc.error, exc.message)
            continue
        records.extend((record, 0) for record in altered)
        result(resource_type, name, Errors.NONE, None)
    records.extend(_clear_elr(context, records))
    return ([] if request.validate_only else records), results


def legacy_alter_configs(
    request: AlterConfigsRequest, context: ConfigContext, authorize: Authorize | None = None
) -> tuple[list[Record], list[LegacyResult]]:
    """AlterConfigs (module docstring): the given configs replace each resource's configs."""
    results: list[LegacyResult] = []

    def result(resource_type: int, name: str, error: Errors, message: str | None) -> None:
        results.append(LegacyResult(error_code=error, error_message=message, resource_type=resource_type, resource_name=name))

    records: list[Record] = []
    for (resource_type, name), configs in _resources(request, result, authorize, legacy=True).items():
        wanted: dict[str, str | None] = {}
        for config in configs:
            wanted[config.name] = config.value  # type: ignore[attr-defined]
        current = context.image.configs.get((resource_type, name), {})
        altered = [
            ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=wanted[key])
            for key in java_hash_map_order(list(wanted))
            if wanted[key] != current.get(key) or resource_type == ResourceType.BROKER
        ]
        deleted = [
            ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=None)
            for key in timeline_hash_map_order(list(current))
            if key not in wanted
        ]
        try:
            _validate(context, resource_type, name, altered, deleted)
        except ApiError as exc:
            result(resource_type, name, exc.error, exc.message)
            continue
        records.extend((record, 0) for record in [*altered, *deleted])
        result(resource_type, name, Errors.NONE, None)
    records.extend(_clear_elr(context, records))
    return ([] if request.validate_only else records), results
