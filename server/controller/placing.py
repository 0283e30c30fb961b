"""Placement against the controller's cluster: the brokers a placer may use, the directory a new
replica goes to, and the call of the configured placer (``server.controller.placement``, the
``kwire.replica.placer.class`` plug point) with its answer checked.

The default placer's answer is taken as it is (byte-identical to Kafka's ``StripedReplicaPlacer``
path). A plug-in placer's answer must hold ``num_partitions`` lists of ``num_replicas`` distinct
usable broker ids, else INVALID_REPLICA_ASSIGNMENT "The replica placer NAME returned an invalid
assignment: ..."; a refusal (an exception named ``InvalidReplicationFactorException``, or kwire's
ApiError) and any other exception (logged with its traceback) answer INVALID_REPLICATION_FACTOR
with the exception's message. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kwire.errors import Errors
from server.controller.errors import ApiError
from server.controller.image import MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY
from server.controller.placement import PlacementSpec, UsableBroker
from server.controller.plugins import ControllerPlugins, is_named

if TYPE_CHECKING:
    import random

    from kwire.uuid import Uuid
    from server.controller.cluster import BrokerRegistration, ClusterControlManager

__all__ = ["ControllerClusterDescriber", "default_directory", "has_uncordoned_dirs", "place", "usable_brokers"]

KEY = "kwire.replica.placer.class"


def has_uncordoned_dirs(registration: BrokerRegistration) -> bool:
    """The broker has a log directory that is not cordoned (KIP-1066)."""
    cordoned = registration.cordoned_log_dirs
    if not cordoned:
        return True
    return any(directory not in cordoned for directory in registration.log_dirs)


def default_directory(cluster: ClusterControlManager, broker_id: int) -> Uuid:
    """``ClusterControlManager.defaultDir``: the broker's one log directory; MIGRATING when it
    registered none, UNASSIGNED when it has several (it assigns them itself)."""
    registration = cluster.registrations.get(broker_id)
    if registration is None:
        return UNASSIGNED_DIRECTORY
    if not registration.log_dirs:
        return MIGRATING_DIRECTORY
    return registration.log_dirs[0] if len(registration.log_dirs) == 1 else UNASSIGNED_DIRECTORY


def usable_brokers(cluster: ClusterControlManager) -> list[UsableBroker]:
    """The brokers placement may use (``BrokerHeartbeatManager.usableBrokers``): tracked by the
    active controller, not shutting down, with a log directory that is not cordoned; by id."""
    heartbeats = cluster.heartbeats
    if heartbeats is None:
        raise RuntimeError("ClusterControlManager is not active.")
    usable = []
    for broker_id, state in sorted(heartbeats.states.items()):
        registration = cluster.registrations.get(broker_id)
        if registration is None or state.shutting_down or not has_uncordoned_dirs(registration):
            continue
        usable.append(UsableBroker(broker_id, registration.rack, state.fenced))
    return usable


@dataclass(frozen=True, slots=True)
class ControllerClusterDescriber:
    """The active controller's cluster as a placer sees it (``ClusterDescriber``)."""

    cluster: ClusterControlManager
    random: random.Random

    def usable_brokers(self) -> Iterator[UsableBroker]:
        """The usable brokers, by id."""
        return iter(usable_brokers(self.cluster))

    def default_dir(self, broker_id: int) -> Uuid:
        """The directory a new replica on ``broker_id`` goes to."""
        return default_directory(self.cluster, broker_id)


def _invalid(plugins: ControllerPlugins, detail: str) -> ApiError:
    name = plugins.names.get(KEY, "?")
    return ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, f"The replica placer {name} returned an invalid assignment: {detail}")


def _checked(plugins: ControllerPlugins, answer: Any, spec: PlacementSpec, usable: set[int]) -> list[list[int]]:
    """A plug-in's answer as lists of broker ids. Raises ApiError INVALID_REPLICA_ASSIGNMENT."""
    parts = getattr(answer, "assignments", answer)
    try:
        parts = list(parts)
    except TypeError:
        raise _invalid(plugins, f"expected a TopicAssignment or a list of replica lists, got {type(answer).__name__}") from None
    if len(parts) != spec.num_partitions:
        raise _invalid(plugins, f"{len(parts)} partition(s) for the {spec.num_partitions} asked for")
    placed = []
    for index, part in enumerate(parts, spec.start_partition):
        replicas = getattr(part, "replicas", part)
        try:
            replicas = list(replicas)
        except TypeError:
            raise _invalid(plugins, f"partition {index}: expected a list of broker ids, got {type(part).__name__}") from None
        if any(type(broker) is not int for broker in replicas):
            raise _invalid(plugins, f"partition {index}: {replicas!r} is not a list of broker ids")
        if len(replicas) != spec.num_replicas:
            raise _invalid(plugins, f"partition {index} has {len(replicas)} replica(s), not {spec.num_replicas}")
        if len(set(replicas)) != len(replicas):
            raise _invalid(plugins, f"partition {index} names a broker more than once: {replicas}")
        unusable = [broker for broker in replicas if broker not in usable]
        if unusable:
            raise _invalid(plugins, f"partition {index} names broker(s) {unusable} that are not usable")
        placed.append(replicas)
    return placed


def place(
    plugins: ControllerPlugins, spec: PlacementSpec, cluster: ClusterControlManager, rng: random.Random
) -> list[list[int]]:
    """The replicas of each partition of ``spec``, by the configured placer (module
    docstring). Raises ApiError INVALID_REPLICATION_FACTOR or INVALID_REPLICA_ASSIGNMENT."""
    describer = ControllerClusterDescriber(cluster, rng)
    if plugins.default_placer:
        answer = plugins.replica_placer.place(spec, describer)
        return [list(part.replicas) for part in answer.assignments]
    started = plugins.start()
    try:
        answer = plugins.replica_placer.place(spec, describer)
    except ApiError:
        raise
    except Exception as exc:
        if not is_named(exc, "InvalidReplicationFactorException"):
            plugins.failed(KEY, exc)
        message = str(exc) if exc.args else type(exc).__name__
        raise ApiError(Errors.INVALID_REPLICATION_FACTOR, message) from None
    finally:
        plugins.timed(KEY, started)
    return _checked(plugins, answer, spec, {broker.broker_id for broker in usable_brokers(cluster)})
