"""The "stray" scenario: the differential probe's request shapes delivered to a loaded quorum
from a replica outside it (or as delayed, stale copies)."""

from __future__ import annotations

import random
from typing import Any

from kwire.uuid import METADATA_TOPIC_ID, Uuid
from messages.generated import begin_quorum_epoch_request as bqe
from messages.generated import end_quorum_epoch_request as eqe
from messages.generated import fetch_request as fr
from messages.generated import vote_request as vr
from messages.generated.add_raft_voter_request import AddRaftVoterRequest, Listener
from server.raft.types import QuorumConfig
from tools.simulate.cluster import API_VERSIONS, Cluster
from tools.simulate.nodes import SimNode
from tools.simulate.runs import RunStats, linger_ms, liveness

__all__ = ["STRAY_ID", "run_stray", "stray_request"]


STRAY_ID = 77
"""A replica id no simulated node has: the sender of the stray requests."""
STRAY_DIR = Uuid.from_longs(0x57, 0x77)


def stray_request(rng: random.Random, cluster: Cluster, node: SimNode) -> tuple[Any, int]:
    """``(request, version)``: one request of the shapes the differential probe
    (``compat/test_differential_probe.py``) sends a stock controller and a kwire node, as a
    replica outside the quorum (or a delayed, stale copy) can send it. Vote v0-2, pre-votes
    too, at epochs E-1..E+2 with every last-epoch and offset relation, from a replica or to a
    voter key that is not the receiver's; Fetch from an unknown observer at the start, the end,
    past the end, a later epoch or a negative offset; BeginQuorumEpoch and EndQuorumEpoch that
    are stale, name no leader or come from another cluster (and an EndQuorumEpoch from the
    real leader of the epoch); AddRaftVoter of an existing voter, without listeners or for
    another cluster. None of them forges a leadership the quorum did not elect."""
    core = node.core
    assert core is not None
    epoch, end = core.epoch, core.log.log_end_offset
    own_dir = cluster.directory_ids[node.node_id]
    cluster_id: str | None = rng.choice(("sim-cluster", "sim-cluster", "sim-cluster", "other", None))
    kind = rng.choice(("vote", "vote", "fetch", "begin", "end", "add"))
    if kind == "vote":
        version = rng.randint(0, 2)
        replica_epoch = max(0, epoch + rng.randint(-1, 2))
        last_epoch = max(0, min(replica_epoch, replica_epoch + rng.randint(-2, 0)))
        last_offset = rng.choice((0, end, end + 100, -1))
        return (
            vr.VoteRequest(
                cluster_id=cluster_id,
                voter_id=rng.choice((node.node_id, node.node_id, 7)),
                topics=[vr.TopicData(topic_name=rng.choice(("__cluster_metadata",) * 5 + ("other",)), partitions=[vr.PartitionData(
                    partition_index=0, replica_epoch=replica_epoch, replica_id=rng.choice((STRAY_ID, STRAY_ID, -1)),
                    replica_directory_id=STRAY_DIR, voter_directory_id=rng.choice((own_dir, own_dir, STRAY_DIR)),
                    last_offset_epoch=last_epoch, last_offset=last_offset, pre_vote=version == 2 and rng.random() < 0.5,
                )])],
            ),
            version,
        )
    if kind == "fetch":
        offset, last = rng.choice(((0, 0), (end, epoch), (end + 5, epoch), (end, epoch + 1), (-1, 0)))
        return (
            fr.FetchRequest(
                cluster_id=cluster_id, replica_id=-1, replica_state=fr.ReplicaState(replica_id=STRAY_ID, replica_epoch=-1),
                max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                topics=[fr.FetchTopic(topic="__cluster_metadata", topic_id=METADATA_TOPIC_ID, partitions=[fr.FetchPartition(
                    partition=0, current_leader_epoch=epoch + rng.randint(-1, 1), fetch_offset=offset,
                    last_fetched_epoch=last, log_start_offset=0, partition_max_bytes=1 << 20, replica_directory_id=STRAY_DIR,
                )])],
            ),
            API_VERSIONS["FetchRequest"],
        )
    if kind == "begin":
        leader, stale = rng.choice(((rng.choice(cluster.voter_ids), True), (-1, False)))
        return (
            bqe.BeginQuorumEpochRequest(
                cluster_id=cluster_id if stale else rng.choice(("other", "sim-cluster")), voter_id=node.node_id,
                topics=[bqe.TopicData(topic_name="__cluster_metadata", partitions=[bqe.PartitionData(
                    partition_index=0, voter_directory_id=own_dir, leader_id=leader,
                    leader_epoch=epoch - 1 if stale else epoch,
                )])],
            ),
            rng.randint(0, 1),
        )
    if kind == "end":
        current = core.leader_and_epoch.leader_id
        leader, at = rng.choice(((rng.choice(cluster.voter_ids), epoch - 1), (-1, epoch), (current if current is not None else -1, epoch)))
        return (
            eqe.EndQuorumEpochRequest(
                cluster_id=cluster_id if at < epoch else "sim-cluster",
                topics=[eqe.TopicData(topic_name="__cluster_metadata", partitions=[eqe.PartitionData(
                    partition_index=0, leader_id=leader, leader_epoch=at, preferred_successors=[], preferred_candidates=[],
                )])],
            ),
            rng.randint(0, 1),
        )
    existing = rng.choice(cluster.voter_ids)
    voter, directory, listeners = rng.choice((
        (existing, cluster.directory_ids[existing], True), (STRAY_ID, STRAY_DIR, False),
    ))
    return (
        AddRaftVoterRequest(
            cluster_id=rng.choice(("sim-cluster", "other")), timeout_ms=5000, voter_id=voter, voter_directory_id=directory,
            listeners=[Listener(name="CONTROLLER", host="localhost", port=1)] if listeners else [],
        ),
        API_VERSIONS["AddRaftVoterRequest"],
    )


def run_stray(seed: int, rng: random.Random) -> RunStats:
    """A quorum under load receives a stray request every 20-200 ms for 10 s
    (:func:`stray_request`), with a crash and restart of one node midway; every invariant
    holds after every event, and the quorum commits again afterwards."""
    cluster = Cluster(
        seed,
        rng.choice((3, 3, 5)),
        rng.choice((0, 1)),
        config=QuorumConfig(pre_vote=rng.random() < 0.8, append_linger_ms=linger_ms(seed)),
        kraft_version=rng.choice((0, 1)),
    )
    liveness(cluster, "start", 3500)
    cluster.start_workload(80, cluster.now + 10_000)
    crash_at = cluster.now + rng.randint(2000, 6000)
    end = cluster.now + 10_000
    crashed: int | None = None
    while cluster.now < end:
        cluster.run_until(cluster.now + rng.randint(20, 200))
        if crashed is None and cluster.now >= crash_at:
            crashed = rng.choice(list(cluster.nodes))
            cluster.crash(crashed)
        running = [n for n in cluster.nodes.values() if n.running and n.core is not None]
        if running:
            target = rng.choice(running)
            request, version = stray_request(rng, cluster, target)
            cluster.admin_request(target.node_id, request, version)
            cluster.strays += 1
    if crashed is not None:
        cluster.restart(crashed)
    liveness(cluster, "the stray requests", 8000)
    cluster.check_committed_on_majority()
    return RunStats(
        seed, "stray", cluster.events, cluster.elections, cluster.committed_end, cluster.now,
        cluster.snapshots_taken, cluster.snapshot_installs, trace_digest=cluster.trace.hexdigest(),
    )

