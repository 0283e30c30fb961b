"""The seeded scenarios of the quorum simulation (:func:`run_scenario`): ``steady``,
``leader_crash``, ``partition_leader``, ``chaos`` and ``reconfig`` (the default mix a seed picks
from, :data:`SCENARIOS`), ``stray`` (``tools.simulate.stray``) and ``brokers``
(``tools.simulate.broker_run``: the node's controller host beside each core)."""

from __future__ import annotations

import random

from kwire.uuid import Uuid
from messages.generated.add_raft_voter_request import AddRaftVoterRequest, Listener
from messages.generated.remove_raft_voter_request import RemoveRaftVoterRequest
from server.raft.types import QuorumConfig
from tools.simulate.broker_run import run_brokers
from tools.simulate.cluster import Cluster
from tools.simulate.runs import RunStats, await_leader, linger_ms, liveness, voter_change
from tools.simulate.stray import run_stray

__all__ = ["SCENARIOS", "run_scenario"]

SCENARIOS = ("steady", "leader_crash", "partition_leader", "chaos", "reconfig")
"""The scenarios a seed picks from when none is named."""


def run_reconfig(seed: int, rng: random.Random) -> RunStats:
    """KIP-853: grow the quorum with observers, shrink it (possibly removing the leader), with
    message loss and a crash, on a kraft.version 1 cluster."""
    cluster = Cluster(
        seed,
        rng.choice((1, 3, 3)),
        rng.choice((1, 2)),
        drop_rate=rng.choice((0.0, 0.0, 0.02)),
        config=QuorumConfig(pre_vote=rng.random() < 0.8, append_linger_ms=linger_ms(seed)),
        kraft_version=1,
        snapshot_every=rng.choice((0, 15)),
        observers_bootstrap=rng.random() < 0.5,
    )
    cluster.start_workload(200, 60_000)
    await_leader(cluster, 10_000)
    cluster.run_until(cluster.now + 1000)
    for observer in cluster.observer_ids:
        key_dir = cluster.directory_ids[observer]

        def add(observer: int = observer, key_dir: Uuid = key_dir) -> AddRaftVoterRequest:
            return AddRaftVoterRequest(
                cluster_id="sim-cluster",
                voter_id=observer,
                voter_directory_id=key_dir,
                listeners=[Listener(name="CONTROLLER", host=f"node{observer}", port=9000 + observer)],
            )

        if not voter_change(cluster, add):
            cluster.fail(f"could not add observer {observer} as a voter")
        if rng.random() < 0.3:
            victim = rng.choice(cluster.current_voter_ids())
            cluster.crash(victim)
            cluster.run_until(cluster.now + rng.randint(100, 2000))
            cluster.restart(victim)
    moved = None
    if rng.random() < 0.5:
        # a voter restarts listening on another port: it must tell the leader (UpdateRaftVoter)
        moved = rng.choice(cluster.current_voter_ids())
        cluster.crash(moved)
        cluster.port_bump[moved] = 100
        cluster.run_until(cluster.now + rng.randint(50, 500))
        cluster.restart(moved)
        cluster.run_until(cluster.now + 4000)
    voters = cluster.current_voter_ids()
    if len(voters) > 1:
        victim = rng.choice(voters)

        def remove() -> RemoveRaftVoterRequest:
            return RemoveRaftVoterRequest(
                cluster_id="sim-cluster", voter_id=victim, voter_directory_id=cluster.directory_ids[victim]
            )

        if not voter_change(cluster, remove):
            cluster.fail(f"could not remove voter {victim}")
    liveness(cluster, "the voter changes", 5000)
    if moved is not None:
        # an UpdateRaftVoter refused while another change was pending is retried only after
        # 3 x fetch.timeout.ms (Kafka's update-voter period)
        cluster.run_until(cluster.now + 3 * cluster.config.fetch_timeout_ms + 1000)
    leader = await_leader(cluster, 10_000)
    leader_core = cluster.nodes[leader].core
    assert leader_core is not None
    entry = leader_core.voters.get(moved) if moved is not None else None
    if entry is not None and entry.endpoints[0].port != cluster.port_of(moved):  # type: ignore[arg-type]
        cluster.fail(f"voter {moved} moved to port {cluster.port_of(moved)}, the voter set says {entry}")  # type: ignore[arg-type]
    cluster.check_committed_on_majority()
    cluster.check_describe_quorum()
    return RunStats(
        seed,
        "reconfig",
        cluster.events,
        cluster.elections,
        cluster.committed_end,
        cluster.now,
        cluster.snapshots_taken,
        cluster.snapshot_installs,
        cluster.voter_changes,
        cluster.trace.hexdigest(),
    )


def run_scenario(seed: int, scenario: str | None = None) -> RunStats:
    """Run one seeded scenario, raising InvariantViolation (or the core's own assertion) on a
    safety or liveness failure. The scenario is picked by the seed unless given."""
    rng = random.Random(seed ^ 0x5EED)
    name = scenario or SCENARIOS[seed % len(SCENARIOS)]
    if name == "reconfig":
        return run_reconfig(seed, rng)
    if name == "stray":
        return run_stray(seed, rng)
    if name == "brokers":
        return run_brokers(seed, rng)
    voters = rng.choice((1, 3, 3, 5)) if name == "steady" else rng.choice((3, 3, 5))
    observers = rng.choice((0, 0, 1, 2))
    drop = rng.choice((0.0, 0.0, 0.01, 0.05)) if name != "chaos" else rng.choice((0.0, 0.02, 0.1))
    pre_vote = rng.random() < 0.8
    kraft_version = rng.choice((0, 1))
    cluster = Cluster(
        seed,
        voters,
        observers,
        drop_rate=drop,
        config=QuorumConfig(pre_vote=pre_vote, append_linger_ms=linger_ms(seed)),
        kraft_version=kraft_version,
        snapshot_every=rng.choice((0, 0, 10, 25)),
    )
    if pre_vote and voters > 1 and rng.random() < 0.2:
        cluster.vote_v1_nodes = {rng.choice(cluster.voter_ids)}
    if name == "chaos":
        cluster.duplicate_rate = rng.choice((0.0, 0.02, 0.05))
    if name == "steady":
        liveness(cluster, "start", 4000)
    elif name == "leader_crash":
        liveness(cluster, "start", 3500)
        leader = await_leader(cluster, 10_000)
        cluster.crash(leader)
        if len(cluster.voter_ids) > 1:
            liveness(cluster, "the leader crashed", 6000)
        cluster.restart(leader)
        liveness(cluster, "the old leader restarted", 3000)
    elif name == "partition_leader":
        liveness(cluster, "start", 3500)
        leader = await_leader(cluster, 10_000)
        cluster.isolate(leader)
        cluster.start_workload(100, cluster.now + 5000)
        cluster.run_until(cluster.now + 5000)
        cluster.heal()
        liveness(cluster, "healing the partition", 6000)
    else:  # chaos
        cluster.start_workload(80, 12000)
        for _ in range(12):
            cluster.run_until(cluster.now + rng.randint(200, 1500))
            action = rng.random()
            target = rng.choice(list(cluster.nodes))
            if action < 0.3:
                cluster.crash(target)
            elif action < 0.55:
                cluster.restart(target)
            elif action < 0.75:
                cluster.isolate(target)
            elif action < 0.85:
                ids = list(cluster.nodes)
                rng.shuffle(ids)
                cut = rng.randint(1, len(ids) - 1)
                cluster.partition(ids[:cut], ids[cut:])
            else:
                cluster.heal()
        cluster.run_until(12000)
        cluster.heal()
        cluster.drop_rate = 0.0
        cluster.duplicate_rate = 0.0
        for node_id in cluster.nodes:
            cluster.restart(node_id)
        liveness(cluster, "healing and restarting everything", 8000)
    cluster.check_committed_on_majority()
    cluster.check_describe_quorum()
    return RunStats(
        seed,
        name,
        cluster.events,
        cluster.elections,
        cluster.committed_end,
        cluster.now,
        cluster.snapshots_taken,
        cluster.snapshot_installs,
        trace_digest=cluster.trace.hexdigest(),
    )

