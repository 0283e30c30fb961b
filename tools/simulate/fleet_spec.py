"""What a ``kwire simulate`` run is (:class:`FleetSpec`), what it samples (:class:`Sample`), and
the server.properties of its controllers (``tools.simulate.fleet``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["FIRST_BROKER_ID", "VOTERS", "FleetSpec", "PlacementFailed", "Sample", "node_properties", "rack_name"]

FIRST_BROKER_ID = 1000
VOTERS = 3
"""Controllers of the simulated quorum (node ids 1-3)."""


def rack_name(index: int) -> str:
    """``rack-a``, ``rack-b``, ... (``rack-26``, ... past the alphabet)."""
    return f"rack-{chr(ord('a') + index)}" if index < 26 else f"rack-{index}"


class PlacementFailed(Exception):
    """The controller refused a CreateTopics of the run (its error name and message): the
    placer raised, answered an invalid assignment, or there were too few brokers."""


@dataclass(frozen=True)
class FleetSpec:
    """One run: ``brokers`` brokers over ``racks`` racks, ``partitions`` partitions of
    ``replication_factor`` replicas, ``duration_s`` simulated seconds from ``seed``, the
    node's ``properties`` (server.properties keys, the placer among them) over the defaults,
    a sample every ``sample_ms``, the scenario's fault at ``fault_at_s``."""

    brokers: int
    partitions: int
    scenario: str
    seed: int
    racks: int = 1
    duration_s: int = 360
    replication_factor: int = 3
    properties: Mapping[str, str] = field(default_factory=dict)
    sample_ms: int = 1000
    fault_at_s: int = 60
    """When the scenario's fault starts (the partitions are created by then at 100,000)."""


@dataclass
class Sample:
    """The fleet at one moment of simulated time (module docstring)."""

    time_s: float
    leaders: list[int]
    """Partitions led by each broker, in broker id order."""
    offline: int
    led_by_dead: int
    under_replicated: int
    leader_moves: int
    records: int
    fenced: int
    alive: int
    partitions: int
    controller_s: float
    """CPU seconds the controllers' steps took since the last sample (measured, so not
    deterministic)."""
    process_cpu_s: float
    """Process CPU seconds since the last sample: the controllers and the simulated brokers."""


def node_properties(node_id: int, overrides: Mapping[str, str]) -> dict[str, str]:
    """server.properties of controller ``node_id`` of the simulated quorum, ``overrides`` on top."""
    voters = ",".join(f"{i}@node{i}:{9000 + i}" for i in range(1, VOTERS + 1))
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.listener.names": "CONTROLLER",
        "listeners": f"CONTROLLER://node{node_id}:{9000 + node_id}",
        "controller.quorum.voters": voters,
    }
    props.update(overrides)
    return props
