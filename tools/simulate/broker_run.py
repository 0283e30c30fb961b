"""The seeded "brokers" scenario (``tools.simulate.brokers``): three brokers and an admin
against a quorum whose nodes run the controller host, through 20 rounds of faults."""

from __future__ import annotations

import random
from typing import Any

from kwire.uuid import Uuid
from server.raft.types import QuorumConfig
from tools.simulate.broker_clients import SimBroker
from tools.simulate.brokers import SESSION_TIMEOUT_MS, BrokerCluster
from tools.simulate.runs import RunStats, linger_ms, liveness

__all__ = ["run_brokers"]

HEARTBEAT_INTERVAL_MS = 300
FAULT_ROUNDS = 20
ADMIN_INTERVAL_MS = 400
SNAPSHOT_BYTES = 2048
"""``metadata.log.max.record.bytes.between.snapshots`` of the seeds that snapshot."""


def run_brokers(seed: int, rng: random.Random) -> RunStats:
    """The scenario (module docstring): 3 or 5 voters, three brokers, 20 rounds of faults, then
    every broker must be registered and unfenced within 10 s of healing."""

    elr = rng.random() < 0.5
    cluster = BrokerCluster(
        seed,
        rng.choice((3, 3, 5)),
        metadata_version=26 if elr else 21,  # 4.1-IV1 with eligible leader replicas, else 3.9-IV0
        elr=elr,
        snapshot_bytes=rng.choice((1 << 40, 1 << 40, SNAPSHOT_BYTES)),
        observers=rng.choice((0, 1)),
        config=QuorumConfig(pre_vote=rng.random() < 0.8, append_linger_ms=linger_ms(seed)),
        kraft_version=rng.choice((0, 1)),
        drop_rate=rng.choice((0.0, 0.01, 0.05)),
    )
    brokers = [SimBroker(100 + i, Uuid.from_longs(seed & 0xFFFF, 100 + i)) for i in range(3)]

    def every(period_ms: int, action: Any) -> None:
        def tick() -> None:
            action()
            cluster.schedule(cluster.now + period_ms, "call", tick)

        cluster.schedule(cluster.now + rng.randint(1, period_ms), "call", tick)

    def restart_broker(broker: SimBroker) -> None:
        broker.alive, broker.epoch, broker.shutting_down, broker.in_flight = True, None, False, None
        broker.incarnation = Uuid.from_longs(rng.getrandbits(32), broker.broker_id)

    for broker in brokers:
        every(HEARTBEAT_INTERVAL_MS, lambda broker=broker: cluster.broker_tick(broker))
    every(ADMIN_INTERVAL_MS, cluster.admin_tick)
    liveness(cluster, "start", 3500)
    for _ in range(FAULT_ROUNDS):
        cluster.run_until(cluster.now + rng.randint(300, 1500))
        action = rng.random()
        if action < 0.25:
            leader = cluster.leader()
            if leader is not None:
                cluster.crash(leader)
        elif action < 0.35:
            broker = rng.choice(brokers)
            broker.alive = False  # stops heartbeating; its session expires
        elif action < 0.45:
            rng.choice(brokers).shutting_down = True  # asks to shut down until it may
        elif action < 0.6:
            for broker in brokers:
                if not broker.alive:
                    restart_broker(broker)
        elif action < 0.75:
            cluster.isolate(rng.choice(list(cluster.nodes)))
        else:
            cluster.heal()
            for node_id in cluster.nodes:
                cluster.restart(node_id)
    cluster.heal()
    cluster.drop_rate = 0.0
    for node_id in cluster.nodes:
        cluster.restart(node_id)
    for broker in brokers:
        if not broker.alive or broker.shutting_down:  # restarted: a new incarnation
            restart_broker(broker)
    deadline = cluster.now + 10_000 + SESSION_TIMEOUT_MS
    while True:
        controller = cluster.active_image()
        images = {} if controller is None else controller.cluster.registrations
        if all(b.broker_id in images and not images[b.broker_id].fenced and b.epoch == images[b.broker_id].epoch
               for b in brokers):
            break
        if cluster.now > deadline:
            cluster.fail(f"BrokersRunning: brokers {[(b.broker_id, b.epoch) for b in brokers]}, image {images}")
        cluster.run_until(cluster.now + 100)
    cluster.check_committed_on_majority()
    return RunStats(
        seed, "brokers", cluster.events, cluster.elections, cluster.committed_end, cluster.now,
        cluster.snapshots_taken, cluster.snapshot_installs, trace_digest=cluster.trace.hexdigest(),
        topics_created=len(cluster.topics_ever), isr_changes=cluster.isr_changes,
        reassignments=cluster.reassignments, reassignments_completed=cluster.reassignments_completed,
        controlled_shutdowns=cluster.controlled_shutdowns, leader_moves=cluster.leader_moves,
        image_snapshot_loads=cluster.image_snapshot_loads, speculative_commits=cluster.speculative_commits,
        reverts=cluster.reverts,
    )
