"""The scenarios of ``kwire simulate`` (:data:`SCENARIOS`) on a fleet (``tools.simulate.fleet``),
and the figures of a run (:func:`figures`).

Every scenario starts the brokers (over the first second; all at the same moment for
``registration-storm``), creates the partitions once every broker is unfenced, and at
``fault_at_s`` (60 s by default) does its part:

* ``steady``: nothing;
* ``broker-kills``: every :data:`KILL_EVERY_MS` one live broker (picked by the seed) dies, and
  comes back as a new incarnation :data:`KILL_DOWN_MS` later, until a minute before the end;
* ``zonal-outage``: every broker of the first rack (``rack-a``) dies at once, and they all come
  back :data:`OUTAGE_MS` later (needs ``racks`` >= 2);
* ``rolling-restart``: the brokers, in batches of one rack at a time, each shut down in a
  controlled way (heartbeats asking to shut down until the controller lets them, Kafka's
  ``BrokerLifecycleManager``) and start again :data:`RESTART_MS` after; the next batch starts
  once the last is back in every ISR, as an operator waits for no under-replicated partitions.
  The batches are as large as the run needs for the whole fleet to restart by a minute before
  its end (one broker a batch if time allows);
* ``registration-storm``: every broker restarts at the same moment (new incarnations that all
  register at once), as after a power loss.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from kwire.uuid import Uuid
from tools.simulate.broker_clients import SimBroker
from tools.simulate.fleet import FleetCluster
from tools.simulate.fleet_spec import FleetSpec, rack_name

__all__ = ["SCENARIOS", "check_spec", "figures", "run_fleet"]

SCENARIOS = ("steady", "broker-kills", "zonal-outage", "rolling-restart", "registration-storm")
KILL_EVERY_MS = 10_000
KILL_DOWN_MS = 30_000
OUTAGE_MS = 60_000
RESTART_MS = 5_000
"""How long a broker of a rolling restart stays down after its controlled shutdown."""
RESTART_CYCLE_MS = 15_000
"""About how long one batch of a rolling restart takes: its controlled shutdown, its
:data:`RESTART_MS` down, its registration and its replicas' :data:`~tools.simulate.fleet.CATCH_UP_MS`."""
TAIL_MS = 60_000


class _RollingFleet(FleetCluster):
    """A fleet whose brokers start again :data:`RESTART_MS` after their controlled shutdown."""

    def on_shut_down(self, broker: SimBroker) -> None:
        """Start the broker again a little later."""
        self.schedule(self.now + RESTART_MS, "call", lambda: self.start_broker(broker))


def _rolling_batches(cluster: FleetCluster, window_ms: int) -> list[list[SimBroker]]:
    """The brokers of a rolling restart in batches, rack by rack (a batch never spans two racks,
    so a rack-spread partition loses one replica at a time), each as large as it must be for
    the whole fleet to restart in ``window_ms`` at about :data:`RESTART_CYCLE_MS` a batch."""
    cycles = max(1, window_ms // RESTART_CYCLE_MS)
    size = max(1, -(-len(cluster.brokers) // cycles))
    batches = []
    for rack in sorted({b.rack or "" for b in cluster.brokers}):
        members = [b for b in cluster.brokers if (b.rack or "") == rack]
        batches += [members[i:i + size] for i in range(0, len(members), size)]
    return batches


def check_spec(spec: FleetSpec) -> None:
    """Raise ValueError naming what is wrong with ``spec`` for its scenario."""
    if spec.scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {spec.scenario!r}; one of {', '.join(SCENARIOS)}")
    if spec.brokers < 1 or spec.partitions < 0 or spec.racks < 1 or spec.racks > spec.brokers:
        raise ValueError("need brokers >= 1, partitions >= 0 and 1 <= racks <= brokers")
    if spec.replication_factor > spec.brokers:
        raise ValueError(f"replication factor {spec.replication_factor} exceeds the {spec.brokers} brokers")
    if spec.scenario == "zonal-outage" and spec.racks < 2:
        raise ValueError("zonal-outage takes one rack down: give --racks 2 or more")
    least = spec.fault_at_s + ((OUTAGE_MS if spec.scenario == "zonal-outage" else 0) + TAIL_MS) // 1000
    if spec.scenario != "steady" and spec.duration_s < least:
        raise ValueError(f"{spec.scenario} needs --duration-s {least} or more (its fault starts at "
                         f"{spec.fault_at_s} s)")


def run_fleet(spec: FleetSpec, progress: Callable[[FleetCluster], None] | None = None) -> FleetCluster:
    """Run ``spec`` to its end; ``progress`` is called every simulated 10 s. Raises
    ValueError (:func:`check_spec`), PlacementFailed, ConfigError (a property or plug-in)."""
    check_spec(spec)
    cluster = (_RollingFleet if spec.scenario == "rolling-restart" else FleetCluster)(spec)
    cluster.start_fleet(storm=spec.scenario == "registration-storm")
    rng = cluster.fleet_rng
    at = cluster.now + spec.fault_at_s * 1000
    end = spec.duration_s * 1000

    def later(delay_ms: int, action: Callable[[], None]) -> None:
        cluster.schedule(at + delay_ms, "call", action)

    if spec.scenario == "zonal-outage":
        zone = [b for b in cluster.brokers if b.rack == rack_name(0)]

        def down() -> None:
            cluster.note(f"{rack_name(0)} down ({len(zone)} brokers)")
            for broker in zone:
                cluster.stop_broker(broker)

        def up() -> None:
            cluster.note(f"{rack_name(0)} back")
            for broker in zone:
                cluster.start_broker(broker)

        later(0, down)
        later(OUTAGE_MS, up)
    elif spec.scenario == "broker-kills":
        for kill_at in range(0, end - at - TAIL_MS, KILL_EVERY_MS):
            def kill() -> None:
                alive = [b for b in cluster.brokers if b.alive]
                if not alive:
                    return
                victim = rng.choice(alive)
                cluster.note(f"broker {victim.broker_id} killed")
                cluster.stop_broker(victim)
                cluster.schedule(cluster.now + KILL_DOWN_MS, "call", lambda: cluster.start_broker(victim))

            later(kill_at, kill)
    elif spec.scenario == "rolling-restart":
        batches = _rolling_batches(cluster, end - at - TAIL_MS)
        queue = list(batches)
        current: dict[int, Uuid] = {}
        """Broker id -> its incarnation when its batch began."""

        def back(broker: SimBroker) -> bool:
            return (broker.alive and broker.incarnation != current[broker.broker_id]
                    and broker.broker_id in cluster.unfenced_since and broker.broker_id not in cluster.rejoined)

        def roll() -> None:
            if not all(back(cluster.by_id[broker_id]) for broker_id in current):
                return  # the batch is not back in every ISR yet
            current.clear()
            if queue:
                for broker in queue.pop(0):
                    current[broker.broker_id] = broker.incarnation
                    broker.shutting_down = True

        later(0, lambda: cluster.note(f"rolling restart: {len(batches)} batches of up to {len(batches[0])} brokers"))
        later(0, lambda: cluster.every(500, roll, phase_ms=0))
    elif spec.scenario == "registration-storm":
        def storm() -> None:
            cluster.note(f"all {len(cluster.brokers)} brokers restart at once")
            for broker in cluster.brokers:
                cluster.start_broker(broker)

        later(0, storm)
    while cluster.now < end:
        cluster.run_until(min(end, cluster.now + 10_000))
        if cluster.failure is not None:
            raise cluster.failure
        if progress is not None:
            progress(cluster)
    return cluster


def _seconds(values: list[int], sample_s: float) -> float:
    return round(sum(values) * sample_s, 3)


def figures(cluster: FleetCluster) -> dict[str, Any]:
    """The run's figures (deterministic: simulated time and counts only)."""
    samples = cluster.samples
    sample_s = cluster.spec.sample_ms / 1000
    fault_s = cluster.spec.fault_at_s if cluster.spec.scenario != "steady" else None
    last = samples[-1] if samples else None
    leaders = last.leaders if last is not None else []
    racks: dict[str, int] = {}
    for broker, count in zip(cluster.brokers, leaders, strict=True):
        assert broker.rack is not None
        racks[broker.rack] = racks.get(broker.rack, 0) + count

    def recovered(attribute: str) -> float | None:
        """Seconds from the fault until the series is 0 for good (None: never)."""
        if fault_s is None or not samples:
            return None
        if getattr(samples[-1], attribute) != 0:
            return None
        for sample in reversed(samples):
            if getattr(sample, attribute) != 0:
                return round(max(0.0, sample.time_s + sample_s - fault_s), 3)
        return 0.0

    after = [s for s in samples if fault_s is None or s.time_s > fault_s]
    return {
        "all_brokers_unfenced_s": None if cluster.all_unfenced_at_ms is None else cluster.all_unfenced_at_ms / 1000,
        "partitions_created_s": None if cluster.created_at_ms is None else cluster.created_at_ms / 1000,
        "partitions": last.partitions if last else 0,
        "max_offline_partitions": max((s.offline for s in samples), default=0),
        "offline_partition_seconds": _seconds([s.offline for s in samples], sample_s),
        "offline_at_end": last.offline if last else 0,
        "max_partitions_led_by_a_dead_broker": max((s.led_by_dead for s in samples), default=0),
        "partition_seconds_led_by_a_dead_broker": _seconds([s.led_by_dead for s in samples], sample_s),
        "max_under_replicated_partitions": max((s.under_replicated for s in samples), default=0),
        "under_replicated_partition_seconds": _seconds([s.under_replicated for s in samples], sample_s),
        "under_replicated_at_end": last.under_replicated if last else 0,
        "leaders_back_on_live_brokers_after_fault_s": recovered("led_by_dead"),
        "fully_replicated_after_fault_s": recovered("under_replicated"),
        "leader_moves": sum(s.leader_moves for s in samples),
        "leader_moves_after_fault": sum(s.leader_moves for s in after),
        "records_committed": cluster.committed_end,
        "max_records_per_sample": max((s.records for s in samples), default=0),
        "leaders_per_broker_at_end": {
            "min": min(leaders, default=0),
            "max": max(leaders, default=0),
            "mean": round(statistics.fmean(leaders), 3) if leaders else 0,
            "stdev": round(statistics.pstdev(leaders), 3) if leaders else 0,
        },
        "leaders_per_rack_at_end": dict(sorted(racks.items())),
        "controller_elections": cluster.elections,
        "controlled_shutdowns": cluster.controlled_shutdowns,
        "broker_incarnations": cluster.incarnations,
        "simulated_events": cluster.events,
    }

