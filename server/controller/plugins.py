"""The controller's plug-ins: Kafka's two policies (``org.apache.kafka.server.policy``) and
kwire's replica placer, written in Python and loaded by the node (``server.node.plugins``) from
``create.topic.policy.class.name``, ``alter.config.policy.class.name`` and
``kwire.replica.placer.class``, each named as ``module:Class``.

A policy has Kafka's methods: ``configure(configs)`` (the node's properties, as strings) once at
start-up, ``validate(request)`` for each checked change, ``close()`` when the node stops.
``validate`` refuses by raising an exception whose class (or a base class) is named
``PolicyViolationException``: a plug-in need not import kwire (this module's
:class:`PolicyViolationException` also fits). Where Kafka calls them:

* the create-topic policy (``CreateTopicPolicy``), from ``ReplicationControlManager.createTopic``
  for each topic of a CreateTopics that passed every other check (validateOnly too), with
  :class:`CreateTopicRequestMetadata`: ``num_partitions`` and ``replication_factor`` (after the
  defaults are applied) and ``replicas_assignments`` None when the controller placed the
  replicas, or ``replicas_assignments`` (partition -> broker ids) and the other two None for a
  manual assignment; ``configs`` the topic configs given;
* the alter-config policy (``AlterConfigPolicy``), from
  ``ConfigurationControlManager.validateAlterConfig`` for each TOPIC or BROKER resource of an
  AlterConfigs or IncrementalAlterConfigs that passed every other check (ValidateOnly too), and
  for a CreateTopics topic that sets configs (Kafka writes those configs as an incremental
  alteration of a new resource: this runs before the create-topic policy), with
  :class:`AlterConfigRequestMetadata`: ``resource`` (``type`` "TOPIC" or "BROKER", ``name``,
  "" for the cluster default) and ``configs``, the configs the request alters, each to its new
  value (None: deleted). For IncrementalAlterConfigs that is the resulting value of each SET,
  DELETE, APPEND and SUBTRACT that changes it (every named config of a broker resource); for
  AlterConfigs the configs given, without the implicit deletions of those left out (KAFKA-14195).

Answers: a violation is POLICY_VIOLATION with the exception's message (None for an exception
without one); kwire's own ``ApiError`` passes through (Kafka's ``ApiException``); any other
exception is logged with its traceback and answered UNKNOWN_SERVER_ERROR without a message, as
``ApiError.fromThrowable`` answers it, in that resource's or topic's result alone (as Kafka 4.4
answers it: compat/test_policies.py). ``validate`` returns None: Java's is ``void``, and a
Python policy that returns something else (``return False`` meant as a refusal, ``return True``
as a yes) is answered POLICY_VIOLATION "... returned False from validate(): ..." saying how a
policy refuses -- kwire's own answer, failing closed where Kafka has no such case.

Time: the controller waits for each call (Kafka calls its policies on the controller's one
thread). A node runs each call on a worker thread under ``kwire.plugin.timeout.ms``
(``server.node.plugin_guard``): past it, the request is refused with the plug-in's refusal code
and a message naming the plug-in and the limit, and the controller serves on. A call over
:data:`SLOW_CALL_MS` is logged at ERROR with its duration.

No I/O here: the plug-ins come in loaded and configured.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kwire.errors import Errors
from server.controller.errors import ApiError
from server.controller.placement import StripedReplicaPlacer

if TYPE_CHECKING:
    from server.controller.placement import ClusterDescriber, PlacementSpec

__all__ = [
    "NO_PLUGINS",
    "AlterConfigPolicy",
    "AlterConfigRequestMetadata",
    "ConfigResource",
    "ControllerPlugins",
    "CreateTopicPolicy",
    "CreateTopicRequestMetadata",
    "PluginFailure",
    "PolicyViolationException",
    "ReplicaPlacer",
    "is_named",
]

POLICY_VIOLATION = "PolicyViolationException"
SLOW_CALL_MS = 250
"""A plug-in call longer than this (a quarter of ``kwire.plugin.timeout.ms``'s default) is
logged at ERROR (module docstring)."""


class PolicyViolationException(Exception):
    """A policy's refusal (``org.apache.kafka.common.errors.PolicyViolationException``): the
    client gets POLICY_VIOLATION and this exception's message."""


@dataclass(frozen=True, slots=True)
class CreateTopicRequestMetadata:
    """``CreateTopicPolicy.RequestMetadata`` (module docstring)."""

    topic: str
    num_partitions: int | None
    replication_factor: int | None
    replicas_assignments: Mapping[int, list[int]] | None
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """``ConfigResource``: ``type`` the name of Kafka's ``ConfigResource.Type`` ("TOPIC",
    "BROKER"), ``name`` the topic, or the broker id ("" for the cluster default)."""

    type: str
    name: str


@dataclass(frozen=True, slots=True)
class AlterConfigRequestMetadata:
    """``AlterConfigPolicy.RequestMetadata`` (module docstring)."""

    resource: ConfigResource
    configs: Mapping[str, str | None]


class CreateTopicPolicy(Protocol):
    """Kafka's ``CreateTopicPolicy`` (``configure`` and ``close`` are optional here)."""

    def validate(self, request: CreateTopicRequestMetadata) -> None:
        """Raise an exception named ``PolicyViolationException`` to refuse."""


class AlterConfigPolicy(Protocol):
    """Kafka's ``AlterConfigPolicy`` (``configure`` and ``close`` are optional here)."""

    def validate(self, request: AlterConfigRequestMetadata) -> None:
        """Raise an exception named ``PolicyViolationException`` to refuse."""


class ReplicaPlacer(Protocol):
    """Kafka's ``ReplicaPlacer`` (``server.controller.placement``)."""

    def place(self, spec: PlacementSpec, cluster: ClusterDescriber) -> Any:
        """A ``TopicAssignment``, or one list of broker ids per partition."""


class PluginFailure(ApiError):
    """A plug-in raised something other than a refusal: UNKNOWN_SERVER_ERROR, no message."""

    def __init__(self) -> None:
        super().__init__(Errors.UNKNOWN_SERVER_ERROR, None)


def is_named(exc: BaseException, name: str) -> bool:
    """Whether ``exc``'s class or one of its bases is named ``name`` (duck-typed exceptions)."""
    return any(klass.__name__ == name for klass in type(exc).__mro__)


def _message(exc: BaseException) -> str | None:
    """Java's ``getMessage()`` of ``exc``: its text, None when raised without one."""
    return str(exc) if exc.args else None


class _Log(Protocol):
    def info(self, msg: str, *args: Any) -> None: ...
    def error(self, msg: str, *args: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class ControllerPlugins:
    """The loaded plug-ins (None: not configured; the placer defaults to Kafka's striped one),
    the ``module:Class`` names they were given as (for log lines and messages), and where a
    plug-in's unexpected exception is logged."""

    create_topic_policy: CreateTopicPolicy | None = None
    alter_config_policy: AlterConfigPolicy | None = None
    replica_placer: ReplicaPlacer = field(default_factory=StripedReplicaPlacer)
    names: Mapping[str, str] = field(default_factory=dict)
    """Config key -> the ``module:Class`` it named."""
    log: _Log | None = None
    clock: Callable[[], float] | None = None
    """Seconds from a monotonic clock (the node injects ``time.perf_counter``): a call that
    takes over :data:`SLOW_CALL_MS` is logged, as it held the controller's thread."""

    @property
    def default_placer(self) -> bool:
        """The placer is kwire's own :class:`StripedReplicaPlacer` (its answers need no check)."""
        return type(self.replica_placer) is StripedReplicaPlacer

    def failed(self, key: str, exc: BaseException) -> None:
        """Log a plug-in's unexpected exception, with its traceback."""
        if self.log is not None:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
            self.log.error("%s %s failed: %s", key, self.names.get(key, "?"), text)

    def timed(self, key: str, started: float | None) -> None:
        """Log the call of ``key``'s plug-in begun at ``started`` (the clock's reading) when it
        took over :data:`SLOW_CALL_MS`."""
        if started is None or self.clock is None or self.log is None:
            return
        took_ms = (self.clock() - started) * 1000
        if took_ms > SLOW_CALL_MS:
            self.log.error("%s %s took %d ms: the controller (and its quorum's fetches and heartbeats) waited for it",
                           key, self.names.get(key, "?"), took_ms)

    def start(self) -> float | None:
        """The clock's reading, for :meth:`timed`."""
        return self.clock() if self.clock is not None else None

    def _validate(self, key: str, policy: Any, request: object) -> None:
        started = self.start()
        try:
            answer = policy.validate(request)
        except ApiError:
            raise
        except Exception as exc:
            if is_named(exc, POLICY_VIOLATION):
                raise ApiError(Errors.POLICY_VIOLATION, _message(exc)) from None
            self.failed(key, exc)
            raise PluginFailure() from None
        finally:
            self.timed(key, started)
        if answer is not None:
            name = self.names.get(key, "?")
            if self.log is not None:
                self.log.error("%s %s returned %r from validate(), not None: the change is refused", key, name, answer)
            raise ApiError(Errors.POLICY_VIOLATION, (
                f"{key} {name} returned {answer!r} from validate(): a policy returns None to accept and raises "
                "PolicyViolationException to refuse"))

    def validate_create_topic(self, request: CreateTopicRequestMetadata) -> None:
        """Run the create-topic policy, if any. Raises ApiError POLICY_VIOLATION (or the
        policy's own ApiError), or :class:`PluginFailure`."""
        if self.create_topic_policy is not None:
            self._validate("create.topic.policy.class.name", self.create_topic_policy, request)

    def validate_alter_config(self, resource_type: str, name: str, configs: Mapping[str, str | None]) -> None:
        """Run the alter-config policy, if any, on ``configs`` of the resource. Raises ApiError
        POLICY_VIOLATION (or the policy's own ApiError), or :class:`PluginFailure`."""
        if self.alter_config_policy is not None:
            metadata = AlterConfigRequestMetadata(ConfigResource(resource_type, name), dict(configs))
            self._validate("alter.config.policy.class.name", self.alter_config_policy, metadata)

    def all(self) -> Sequence[tuple[str, object]]:
        """(config key, plug-in) of each configured plug-in."""
        keys = ("create.topic.policy.class.name", "alter.config.policy.class.name", "kwire.replica.placer.class")
        plugins = (self.create_topic_policy, self.alter_config_policy, self.replica_placer)
        return [(key, plugin) for key, plugin in zip(keys, plugins, strict=True) if key in self.names]

    def close(self) -> None:
        """Call each configured plug-in's ``close()`` (the node is stopping); an exception is
        logged and the others are still closed (``Utils.closeQuietly``)."""
        for key, plugin in self.all():
            close = getattr(plugin, "close", None)
            if callable(close):
                try:
                    close()
                except Exception as exc:
                    self.failed(key, exc)


NO_PLUGINS = ControllerPlugins()
"""No policy, the striped placer: a controller without plug-ins."""
