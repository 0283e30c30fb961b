"""Replica placement for new partitions, as Kafka's ``StripedReplicaPlacer`` places them
(KIP-631; ``org.apache.kafka.metadata.placement``, whose class documentation states the
algorithm).

The usable brokers are the registered ones not in controlled shutdown. They are grouped by rack
(no rack is a rack of its own), each rack holding its unfenced and its fenced brokers as two
sorted lists, each list starting at a random position; the racks are sorted, starting at a random
one. For each partition:

* the first replica (the future leader) is the next unfenced broker of the first rack, from the
  current rack position on, that has one: a leader is never fenced;
* every other replica is the next broker (unfenced first, then fenced) of the following racks
  in turn, from the current rack position, wrapping around and skipping the leader's rack once,
  so replicas spread over racks before any rack holds two;
* the rack position then moves on by one, and every list moves on by one at the next partition.
  Once as many partitions were placed as there are unfenced brokers, racks and lists are
  shuffled, so that long runs do not repeat the same assignments.

Errors (``InvalidReplicationFactorException``, raised as ApiError INVALID_REPLICATION_FACTOR
with Kafka 4.4's words): a replication factor below 1; no unfenced broker; a replication factor
above the number of usable brokers. Randomness comes from the caller's ``random.Random``.

The placer is a plug point (``kwire.replica.placer.class``): Kafka's internal ``ReplicaPlacer``
interface in Python terms (KIP-660 proposed making it public; kwire does). A placer has
``place(spec, cluster)``: ``spec`` a :class:`PlacementSpec` (``start_partition``,
``num_partitions``, ``num_replicas``), ``cluster`` a :class:`ClusterDescriber`
(``usable_brokers()``, ``default_dir(broker_id)`` and kwire's ``random``, the controller's seeded
random source, so that a placement can be replayed); it returns a :class:`TopicAssignment` or
simply one list of broker ids per partition, the preferred leader first.
:class:`StripedReplicaPlacer` is the default.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kwire.errors import Errors
from server.controller.errors import ApiError

if TYPE_CHECKING:
    import random
    from random import Random

    from kwire.uuid import Uuid

__all__ = [
    "ClusterDescriber",
    "PartitionAssignment",
    "PlacementSpec",
    "StripedReplicaPlacer",
    "TopicAssignment",
    "UsableBroker",
    "place_replicas",
]


@dataclass(frozen=True, slots=True)
class UsableBroker:
    """A broker that may take replicas (``UsableBroker``): registered and not in controlled
    shutdown."""

    broker_id: int
    rack: str | None
    fenced: bool

    @property
    def id(self) -> int:
        """The broker id (``UsableBroker.id()``)."""
        return self.broker_id


@dataclass(frozen=True, slots=True)
class PlacementSpec:
    """What to place (``PlacementSpec``): ``num_partitions`` partitions from index
    ``start_partition`` on (0 for a new topic, the current count for CreatePartitions), each of
    ``num_replicas`` replicas."""

    start_partition: int
    num_partitions: int
    num_replicas: int


@dataclass(frozen=True, slots=True)
class PartitionAssignment:
    """One placed partition (``PartitionAssignment``): its replicas, the preferred leader first."""

    replicas: Sequence[int]


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """What a placer returns (``TopicAssignment``): one assignment per partition of the spec."""

    assignments: Sequence[PartitionAssignment]


class ClusterDescriber(Protocol):
    """The cluster as a placer sees it (``ClusterDescriber``), plus kwire's ``random``."""

    @property
    def random(self) -> Random:
        """The controller's random source (seeded in the simulation: placements replay)."""

    def usable_brokers(self) -> Iterator[UsableBroker]:
        """The brokers replicas may go to, by id (``usableBrokers``)."""

    def default_dir(self, broker_id: int) -> Uuid:
        """The log directory a new replica on ``broker_id`` goes to (``defaultDir``)."""


@dataclass(slots=True)
class _Rotation:
    """One sorted list of brokers handed out in turn from a moving start (``BrokerList``)."""

    brokers: list[int] = field(default_factory=list)
    start: int = 0
    taken: int = 0
    round: int = 0

    def begin(self, rng: random.Random) -> None:
        if self.brokers:
            self.brokers.sort()
            self.start = rng.randrange(len(self.brokers))

    def next(self, round_: int) -> int | None:
        """The next broker of this round; None when the list is empty or used up. A new round
        starts one position further on."""
        if not self.brokers:
            return None
        if self.round != round_:
            self.round, self.taken = round_, 0
            self.start = (self.start + 1) % len(self.brokers)
        if self.taken >= len(self.brokers):
            return None
        self.taken += 1
        return self.brokers[(self.start + self.taken - 1) % len(self.brokers)]


@dataclass(slots=True)
class _Rack:
    unfenced: _Rotation = field(default_factory=_Rotation)
    fenced: _Rotation = field(default_factory=_Rotation)

    def next(self, round_: int) -> int | None:
        found = self.unfenced.next(round_)
        return found if found is not None else self.fenced.next(round_)


def _refuse(message: str) -> ApiError:
    return ApiError(Errors.INVALID_REPLICATION_FACTOR, message)


class _Racks:
    def __init__(self, brokers: Iterable[UsableBroker], rng: random.Random) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.total = self.unfenced = 0
        for broker in brokers:
            rack = self.racks.setdefault(broker.rack, _Rack())
            (rack.fenced if broker.fenced else rack.unfenced).brokers.append(broker.broker_id)
            self.total += 1
            self.unfenced += 0 if broker.fenced else 1
        for rack in self.racks.values():
            rack.unfenced.begin(rng)
            rack.fenced.begin(rng)
        # no rack sorts first
        self.names: list[str | None] = sorted(self.racks, key=lambda name: (name is not None, name or ""))
        self.position = rng.randrange(len(self.names)) if self.names else 0
        self.round = 0

    def check(self, replication_factor: int) -> None:
        if replication_factor <= 0:
            raise _refuse(f"Invalid replication factor {replication_factor}: the replication factor must be positive.")
        if self.unfenced == 0:
            raise _refuse("All brokers are currently fenced, or have all their log directories cordoned.")
        if replication_factor > self.total:
            raise _refuse(
                f"The target replication factor of {replication_factor} cannot be reached because only {self.total} "
                "broker(s) are registered or some brokers have all their log directories cordoned."
            )

    def _shuffle(self) -> None:
        self.rng.shuffle(self.names)
        for rack in self.racks.values():
            self.rng.shuffle(rack.unfenced.brokers)
            self.rng.shuffle(rack.fenced.brokers)

    def place(self, replication_factor: int) -> list[int]:
        self.check(replication_factor)
        if self.round == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self.round = 0
        if self.position == len(self.names):
            self.position = 0
        leader_rack = self.position
        while True:
            leader = self.racks[self.names[leader_rack]].unfenced.next(self.round)
            if leader is not None:
                break
            leader_rack = (leader_rack + 1) % len(self.names)
        replicas = [leader]
        index = self.position
        skip: int | None = leader_rack
        for _ in range(1, replication_factor):
            found: int | None = None
            while found is None:
                if index == skip:
                    skip = None
                else:
                    found = self.racks[self.names[index]].next(self.round)
                index = (index + 1) % len(self.names)
            replicas.append(found)
        self.round += 1
        self.position += 1
        return replicas


def place_replicas(
    partitions: int, replication_factor: int, brokers: Iterable[UsableBroker], rng: random.Random
) -> list[list[int]]:
    """Broker ids for each of ``partitions`` new partitions, ``replication_factor`` each, the
    preferred leader first (module docstring). Raises ApiError INVALID_REPLICATION_FACTOR."""
    racks = _Racks(brokers, rng)
    racks.check(replication_factor)
    return [racks.place(replication_factor) for _ in range(partitions)]


class StripedReplicaPlacer:
    """Kafka's default placer (module docstring), drawing on the controller's random source."""

    def place(self, spec: PlacementSpec, cluster: ClusterDescriber) -> TopicAssignment:
        """Place ``spec`` on ``cluster``'s usable brokers. Raises ApiError
        INVALID_REPLICATION_FACTOR."""
        placed = place_replicas(spec.num_partitions, spec.num_replicas, cluster.usable_brokers(), cluster.random)
        return TopicAssignment([PartitionAssignment(replicas) for replicas in placed])
