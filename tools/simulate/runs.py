"""What a seeded run reports (:class:`RunStats`) and the steps scenarios share: run under load
until something commits, wait for a leader, change the voter set (KIP-853)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tools.simulate.cluster import Cluster

__all__ = ["RunStats", "await_leader", "linger_ms", "liveness", "voter_change"]


@dataclass
class RunStats:
    seed: int
    scenario: str
    events: int
    elections: int
    committed_end: int
    simulated_ms: int
    snapshots_taken: int = 0
    snapshot_installs: int = 0
    voter_changes: int = 0
    trace_digest: str = ""
    """``Cluster.trace``: equal for two runs of a seed iff the cores did exactly the same."""
    topics_created: int = 0
    """Topics the "brokers" scenario's admin created."""
    isr_changes: int = 0
    """Partition changes AlterPartition made in the "brokers" scenario."""
    controlled_shutdowns: int = 0
    """Brokers the "brokers" scenario's controller let shut down after a controlled shutdown."""
    reassignments: int = 0
    """Partition changes the "brokers" scenario's AlterPartitionReassignments wrote."""
    reassignments_completed: int = 0
    """Reassignments an AlterPartition completed in the "brokers" scenario."""
    leader_moves: int = 0
    """Partition changes a broker's fencing, unfencing or shutdown made in the "brokers" scenario."""
    image_snapshot_loads: int = 0
    """Controller images the "brokers" scenario's nodes loaded from snapshots."""
    speculative_commits: int = 0
    """Batches the "brokers" scenario committed while the active controller's image held
    records applied beyond them."""
    reverts: int = 0
    """Times a "brokers" scenario's controller went back to its committed image."""


def liveness(cluster: Cluster, what: str, duration_ms: int) -> None:
    before = cluster.committed_end
    end = cluster.now + duration_ms
    cluster.start_workload(100, end)
    cluster.run_until(end)
    if cluster.committed_end <= before:
        cluster.fail(f"liveness: nothing committed within {duration_ms} ms after {what}")


def voter_change(cluster: Cluster, make_request: Any, attempts: int = 20) -> bool:
    """Send a voter change to the leader until it answers NONE; False if it never does."""
    for _ in range(attempts):
        leader = await_leader(cluster, 15_000)
        handle = cluster.admin_request(leader, make_request())
        deadline = cluster.now + 3000
        while handle not in cluster.admin_responses and cluster.now < deadline:
            cluster.run_until(cluster.now + 20)
        response = cluster.admin_responses.pop(handle, None)
        if response is not None and response.error_code == 0:
            cluster.voter_changes += 1
            return True
        cluster.run_until(cluster.now + 200)
    return False



def await_leader(cluster: Cluster, within_ms: int) -> int:
    deadline = cluster.now + within_ms
    while cluster.now < deadline:
        leader = cluster.leader()
        if leader is not None:
            return leader
        cluster.run_until(cluster.now + 50)
    cluster.fail(f"no leader elected within {within_ms} ms")
    raise AssertionError("unreachable")


def linger_ms(seed: int) -> int:
    """``append.linger.ms`` of a run: half the seeds batch at once, half linger Kafka's 25 ms.
    Taken from the seed, not the run's random stream, so other choices of a seed stay put."""
    return (0, 25)[seed % 2]

