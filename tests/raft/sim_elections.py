"""Who wins the election after a leader dies, and how long it takes: three voters of the
seeded simulation (``tools.simulate``) under a steady load, one leader killed per seed.

Some voters may run Kafka's follower timer in place of kwire's: ``FollowerState`` gives up on
its leader exactly ``controller.quorum.fetch.timeout.ms`` after the last successful fetch,
where ``QuorumState.fetch_deadline`` draws the moment (every other timer of both is the same:
``QuorumState.randomElectionTimeoutMs``, the exponential election backoff, KIP-996's pre-vote
rule). The mixes: ``kwire`` (three kwire voters), ``mixed`` (node 1 kwire, nodes 2 and 3 with
Kafka's timer), ``stock`` (all three with Kafka's timer). The leader killed is never node 1
(when node 1 leads it is crashed and restarted first, uncounted), so node 1 is a survivor of
every election counted, and its share of the wins is the figure of interest in ``mixed``::

    python -m tests.raft.sim_elections --seeds 1000

prints per mix: elections, node 1's wins, failover time (ms from the kill to the new leader:
median, 90th percentile, max) and the elections that took more than one epoch (a split vote:
both survivors became Candidates).
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from typing import Any

from server.raft.quorum_state import QuorumState
from tools.simulate.cluster import Cluster

SLOT = 1
"""The node whose share of wins is counted (kwire in the ``mixed`` mix)."""
MIXES = {"kwire": frozenset(), "mixed": frozenset({2, 3}), "stock": frozenset({1, 2, 3})}
"""Mix name -> the voters with Kafka's exact follower timer."""
LOAD_PERIOD_MS = 100
"""One append every this many ms (the mixed-quorum compat test's ``metadata.max.idle.interval.ms``)."""


def _kafka_fetch_deadline(quorum: QuorumState, now_ms: int) -> int:
    """``FollowerState``: exactly the fetch timeout after the last successful fetch."""
    return now_ms + quorum._config.fetch_timeout_ms


class _MixedCluster(Cluster):
    """A :class:`~tools.simulate.cluster.Cluster` whose voters in ``kafka_timer_ids`` give up on their
    leader as Kafka's ``FollowerState`` does."""

    def __init__(self, seed: int, kafka_timer_ids: frozenset[int]) -> None:
        self.kafka_timer_ids = kafka_timer_ids
        super().__init__(seed, 3)

    def step(self, node_id: int, event: Any, seen_text: str | None = None) -> None:
        core = self.nodes[node_id].core
        if node_id in self.kafka_timer_ids and core is not None and "fetch_deadline" not in vars(core.quorum):
            quorum = core.quorum
            quorum.fetch_deadline = lambda now_ms: _kafka_fetch_deadline(quorum, now_ms)  # type: ignore[method-assign]
        super().step(node_id, event, seen_text)


@dataclass(frozen=True)
class Failover:
    """One seed's election after the leader's kill."""

    killed: int
    elected: int
    failover_ms: int
    epochs: int
    """Epochs the election took (1 unless votes split or an election was lost)."""


def _run_until_leader(cluster: Cluster, excluded: int | None, within_ms: int) -> int:
    deadline = cluster.now + within_ms
    while cluster.now < deadline:
        leader = cluster.leader()
        if leader is not None and leader != excluded:
            return leader
        cluster.run_until(cluster.now + 1)
    cluster.fail(f"no leader other than {excluded} within {within_ms} ms")
    raise AssertionError("unreachable")


def failover(seed: int, kafka_timer_ids: frozenset[int]) -> Failover:
    """Start three voters under load; once a leader other than node 1 leads and every voter
    fetched for a while, kill it at a random moment and run until another voter leads."""
    cluster = _MixedCluster(seed, kafka_timer_ids)
    cluster.start_workload(LOAD_PERIOD_MS, 10**9)
    cluster.run_until(3000)
    leader = _run_until_leader(cluster, None, 20_000)
    if leader == SLOT:
        cluster.crash(SLOT)
        leader = _run_until_leader(cluster, SLOT, 20_000)
        cluster.restart(SLOT)
    cluster.run_until(cluster.now + 3000 + cluster.rng.randrange(1000))
    leader = _run_until_leader(cluster, None, 20_000)
    if leader == SLOT:  # it won again after its restart: no election to count on this seed
        return failover(seed + 1_000_000, kafka_timer_ids)
    core = cluster.nodes[leader].core
    assert core is not None
    epoch, killed_at = core.epoch, cluster.now
    cluster.crash(leader)
    elected = _run_until_leader(cluster, leader, 30_000)
    new = cluster.nodes[elected].core
    assert new is not None
    return Failover(leader, elected, cluster.now - killed_at, new.epoch - epoch)


@dataclass(frozen=True)
class Summary:
    mix: str
    elections: int
    slot_wins: int
    median_ms: float
    p90_ms: float
    max_ms: int
    split: int
    """Elections that took more than one epoch."""

    def row(self) -> str:
        return (
            f"{self.mix:6} {self.elections:5} {self.slot_wins:5} ({self.slot_wins / self.elections:4.0%})"
            f" {self.median_ms:7.0f} {self.p90_ms:7.0f} {self.max_ms:7} {self.split:5}"
        )


HEADER = f"{'mix':6} {'runs':>5} {'node 1 wins':>12} {'median':>7} {'p90':>7} {'max':>7} {'split':>5}"


def summarize(mix: str, seeds: range) -> Summary:
    """Run :func:`failover` for every seed with the voters of ``MIXES[mix]`` on Kafka's timer."""
    runs = [failover(seed, MIXES[mix]) for seed in seeds]
    times = sorted(run.failover_ms for run in runs)
    return Summary(
        mix,
        len(runs),
        sum(1 for run in runs if run.elected == SLOT),
        statistics.median(times),
        times[int(0.9 * (len(times) - 1))],
        times[-1],
        sum(1 for run in runs if run.epochs > 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=500)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--mix", choices=sorted(MIXES), action="append")
    args = parser.parse_args()
    print(HEADER)
    for mix in args.mix or list(MIXES):
        print(summarize(mix, range(args.first, args.first + args.seeds)).row(), flush=True)


if __name__ == "__main__":
    main()
