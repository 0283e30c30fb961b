"""Loading the controller's plug-ins at start-up (``ControllerServer`` builds Kafka's policies
with ``KafkaConfig.getConfiguredInstance``): ``create.topic.policy.class.name``,
``alter.config.policy.class.name`` and ``kwire.replica.placer.class``, each ``module:Class``
(``module`` importable from the node's Python path). The class is built without arguments and
its ``configure(configs)``, when it has one, is called with the node's properties (strings, as
written); ``server.controller.plugins`` says how the controller calls them.

Every problem stops the node with a :class:`~server.config.ConfigError` that names the key: a
name not of the form ``module:Class`` (a Java class name says so), a module that does not
import, a missing class, a class without ``validate`` (a policy) or ``place`` (a placer), and an
exception from the constructor or from ``configure`` (the plug-ins built before it are closed).

A node loads them ``guard``-ed: each call then runs under ``kwire.plugin.timeout.ms``
(``server.node.plugin_guard``). Unguarded (the default, for tools and the deterministic
simulation), a call runs on the caller's thread, as Kafka runs its policies.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from server.config import ConfigError
from server.controller.placement import StripedReplicaPlacer
from server.controller.plugins import ControllerPlugins
from server.node.plugin_guard import GuardedPlacer, GuardedPolicy, PluginWorker, timeout_ms

__all__ = ["PLUGIN_KEYS", "check_plugins", "load_plugin", "load_plugins", "plugin_class"]

CREATE_TOPIC_POLICY = "create.topic.policy.class.name"
ALTER_CONFIG_POLICY = "alter.config.policy.class.name"
REPLICA_PLACER = "kwire.replica.placer.class"
PLUGIN_KEYS = {CREATE_TOPIC_POLICY: "validate", ALTER_CONFIG_POLICY: "validate", REPLICA_PLACER: "place"}
"""Each plug-in key and the method its class must have."""

_EXPECTED = "kwire runs controller plug-ins written in Python, named as module:Class (e.g. my_policies:NoTinyTopics)"


def plugin_class(key: str, name: str) -> Any:
    """The class ``name`` (``module:Class``) given for ``key``, imported and checked. Raises
    ConfigError."""
    module_name, colon, class_name = name.strip().partition(":")
    if not colon or not module_name or not class_name:
        java = " it looks like a Java class name, and kwire does not run Java plug-ins;" if "." in name else ""
        raise ConfigError(key, f"{name!r} is not a Python class:{java} {_EXPECTED}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(key, f"cannot import module {module_name!r} of {name!r}: {type(exc).__name__}: {exc}") from exc
    klass: Any = module
    for part in class_name.split("."):
        klass = getattr(klass, part, None)
        if klass is None:
            raise ConfigError(key, f"module {module_name!r} has no class {class_name!r}")
    method = PLUGIN_KEYS[key]
    if not callable(getattr(klass, method, None)):
        raise ConfigError(key, f"{name} has no method {method}(): {_EXPECTED}, with Kafka's methods")
    return klass


def check_plugins(configs: Mapping[str, str]) -> None:
    """Import and check the class each plug-in key of ``configs`` names, without building it
    (a node's start-up check, before it binds its listeners). Raises ConfigError."""
    for key in PLUGIN_KEYS:
        if configs.get(key, "").strip():
            plugin_class(key, configs[key].strip())


def load_plugin(key: str, name: str, configs: Mapping[str, str]) -> Any:
    """The configured instance of the class ``name`` (``module:Class``) given for ``key``.
    Raises ConfigError."""
    klass = plugin_class(key, name)
    try:
        instance = klass()
        configure = getattr(instance, "configure", None)
        if callable(configure):
            configure(dict(configs))
    except Exception as exc:
        raise ConfigError(key, f"{name} could not be built and configured: {type(exc).__name__}: {exc}") from exc
    return instance


def load_plugins(configs: Mapping[str, str], log: logging.Logger | None = None, *,
                 guard: bool = False) -> ControllerPlugins:
    """The plug-ins the node's properties ``configs`` name (none: no policy, the striped
    placer), their unexpected exceptions logged to ``log`` (default ``kwire.controller``);
    with ``guard``, each call under ``kwire.plugin.timeout.ms`` (module docstring). Raises
    ConfigError."""
    names = {key: configs[key].strip() for key in PLUGIN_KEYS if configs.get(key, "").strip()}
    limit_ms = timeout_ms(configs) if guard else None
    loaded: dict[str, Any] = {}
    for key, name in names.items():
        try:
            loaded[key] = load_plugin(key, name, configs)
        except ConfigError:
            ControllerPlugins(names={k: names[k] for k in loaded}, **_fields(loaded)).close()
            raise
    log = log or logging.getLogger("kwire.controller")
    for key, name in names.items():
        log.info("%s: loaded %s%s", key, name, "" if limit_ms is None else f", each call limited to {limit_ms} ms")
        if limit_ms is not None:
            loaded[key] = _guarded(key, name, loaded[key], PluginWorker(key, name, limit_ms, log))
    return ControllerPlugins(names=names, log=log, clock=time.perf_counter, **_fields(loaded))


def _guarded(key: str, name: str, plugin: Any, worker: PluginWorker) -> Any:
    """``plugin`` with its calls run by ``worker`` (kwire's own striped placer as it is)."""
    if key != REPLICA_PLACER:
        return GuardedPolicy(plugin, worker)
    return plugin if type(plugin) is StripedReplicaPlacer else GuardedPlacer(plugin, worker)


def _fields(loaded: Mapping[str, Any]) -> dict[str, Any]:
    """ControllerPlugins' fields for the plug-ins ``loaded`` by key."""
    fields = {"create_topic_policy": loaded.get(CREATE_TOPIC_POLICY), "alter_config_policy": loaded.get(ALTER_CONFIG_POLICY)}
    if REPLICA_PLACER in loaded:
        fields["replica_placer"] = loaded[REPLICA_PLACER]
    return fields
