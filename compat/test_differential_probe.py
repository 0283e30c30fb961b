"""Differential probe: the same crafted KRaft requests to a stock controller and to kwire.

For the pinned releases and two roles (``make test``: the newest release as leaders and the older
as observers; ``make nightly``: every pair, :func:`compat.kafka.release_matrix`), a stock
controller and a kwire node are put in the same state: the standalone leader of a directory formatted by that release's ``kafka-storage format
--standalone`` (same cluster id, NoOps off so that their logs stand still), or an observer
formatted with ``--no-initial-controllers`` whose bootstrap server never answers (Unattached in
epoch 0 with an empty log). Every case builds one request from the
receiver's own state (its leader epoch E, log end offset and directory id, read through
DescribeQuorum just before), sends it to both at the same version, and compares the answers
after taking out what differs by construction (absolute epochs become E-relative, the
receiver's own id becomes "self", records become "some"/"none"):

* Vote v0-v2, votes and KIP-996 pre-votes, for every relation of ReplicaEpoch to E,
  LastOffsetEpoch to ReplicaEpoch and LastOffset to the log end; bad replica ids, voter keys,
  cluster ids and topics;
* BeginQuorumEpoch and EndQuorumEpoch from older, current and invalid leaders;
* Fetch from an observer at every relation of CurrentLeaderEpoch, LastFetchedEpoch and
  FetchOffset to the leader's;
* AddRaftVoter of a voter already in the set, with a wrong cluster id, without listeners (its
  error message compared too, the receiver's directory id masked).

Cases that make the receiver leave its epoch (a later-epoch Vote) run last; both nodes are
leaders again, re-elected on their own, before each. A difference fails the test with a table of
every differing case (``KWIRE_PROBE_PRINT=1`` prints every case's answer). Cost: one stock
controller JVM and one kwire process per release and role.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.differential import ROLES, PairNode, State, send, start_pair, wait_ready
from compat.harness import CLUSTER_ID, KafkaRelease
from compat.kafka import release_matrix
from kwire.topics import METADATA_PARTITION, METADATA_TOPIC_NAME
from kwire.uuid import METADATA_TOPIC_ID, Uuid
from messages.generated import add_raft_voter_request as arv
from messages.generated import begin_quorum_epoch_request as bqe
from messages.generated import end_quorum_epoch_request as eqe
from messages.generated import fetch_request as fr
from messages.generated import vote_request as vr
from messages.runtime import Message

pytestmark = pytest.mark.compat

RELEAD_TIMEOUT_S = 60.0
OTHER_DIR = Uuid.from_string("b3RoZXItZGlyZWN0b3J5IQ")


@dataclass(frozen=True)
class Case:
    name: str
    version: int
    build: Callable[[State], Message]
    moves_epoch: bool = False
    leader_only: bool = False
    """Names the receiver itself as the leader: only a leader can be told that (Kafka stops
    with IllegalStateException on an inconsistent leader, as kwire raises RaftSafetyError)."""


# ----------------------------------------------------------------------------- nodes


@pytest.fixture
def pair(each_kafka: KafkaRelease, tmp_path: Path, role: str) -> Iterator[dict[str, PairNode]]:
    """A stock controller and a kwire node of each pinned release, in each role: the standalone
    leader of its quorum, or an observer formatted with --no-initial-controllers whose bootstrap
    server never answers (Unattached in epoch 0); see compat/differential.py."""
    with start_pair(each_kafka, tmp_path, role) as nodes:
        yield nodes


# ----------------------------------------------------------------------------- requests


def vote(
    s: State, *, epoch: int, last_epoch: int, last_offset: int, pre_vote: bool = False, replica: int = 2,
    voter_id: int | None = None, voter_dir: Uuid | None = None, cluster: str | None = CLUSTER_ID,
    topic: str = METADATA_TOPIC_NAME,
) -> vr.VoteRequest:
    return vr.VoteRequest(
        cluster_id=cluster,
        voter_id=s.node_id if voter_id is None else voter_id,
        topics=[vr.TopicData(topic_name=topic, partitions=[vr.PartitionData(
            partition_index=METADATA_PARTITION, replica_epoch=epoch, replica_id=replica,
            replica_directory_id=OTHER_DIR, voter_directory_id=s.directory_id if voter_dir is None else voter_dir,
            last_offset_epoch=last_epoch, last_offset=last_offset, pre_vote=pre_vote,
        )])],
    )


def begin_epoch(s: State, *, epoch: int, leader: int, voter_id: int | None = None,
                voter_dir: Uuid | None = None, cluster: str | None = CLUSTER_ID) -> bqe.BeginQuorumEpochRequest:
    return bqe.BeginQuorumEpochRequest(
        cluster_id=cluster, voter_id=s.node_id if voter_id is None else voter_id,
        topics=[bqe.TopicData(topic_name=METADATA_TOPIC_NAME, partitions=[bqe.PartitionData(
            partition_index=METADATA_PARTITION, voter_directory_id=s.directory_id if voter_dir is None else voter_dir,
            leader_id=leader, leader_epoch=epoch,
        )])],
    )


def end_epoch(s: State, *, epoch: int, leader: int, cluster: str | None = CLUSTER_ID) -> eqe.EndQuorumEpochRequest:
    return eqe.EndQuorumEpochRequest(
        cluster_id=cluster,
        topics=[eqe.TopicData(topic_name=METADATA_TOPIC_NAME, partitions=[eqe.PartitionData(
            partition_index=METADATA_PARTITION, leader_id=leader, leader_epoch=epoch,
            preferred_successors=[], preferred_candidates=[],
        )])],
    )


def fetch(s: State, *, leader_epoch: int, offset: int, last_epoch: int, replica: int = 5,
          cluster: str | None = CLUSTER_ID) -> fr.FetchRequest:
    return fr.FetchRequest(
        cluster_id=cluster, replica_id=-1, replica_state=fr.ReplicaState(replica_id=replica, replica_epoch=-1),
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
        topics=[fr.FetchTopic(topic=METADATA_TOPIC_NAME, topic_id=METADATA_TOPIC_ID, partitions=[fr.FetchPartition(
            partition=METADATA_PARTITION, current_leader_epoch=leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_epoch, log_start_offset=0, partition_max_bytes=1 << 20,
            replica_directory_id=OTHER_DIR,
        )])],
    )


def add_voter(s: State, *, voter: int, directory: Uuid | None, listeners: bool = True,
              cluster: str | None = CLUSTER_ID) -> arv.AddRaftVoterRequest:
    return arv.AddRaftVoterRequest(
        cluster_id=cluster, timeout_ms=5000, voter_id=voter,
        voter_directory_id=s.directory_id if directory is None else directory,
        listeners=[arv.Listener(name="CONTROLLER", host="localhost", port=1)] if listeners else [],
    )


def _cases(vote_version: int, fetch_version: int, add_voter_version: int) -> list[Case]:
    cases: list[Case] = []
    kinds = [(v, False) for v in range(vote_version + 1)] + ([(2, True)] if vote_version >= 2 else [])
    for version, pre in kinds:
        tag = f"vote v{version}{' pre' if pre else ''}"
        for de in (-1, 0):  # ReplicaEpoch: E-1 (fenced), E
            for dl in (-1, 0, 1):  # LastOffsetEpoch - ReplicaEpoch
                for offset in ("zero", "end", "ahead", "negative"):
                    def build(s: State, de: int = de, dl: int = dl, offset: str = offset, pre: bool = pre) -> Message:
                        epoch = s.epoch + de
                        last = {"zero": 0, "end": s.log_end, "ahead": s.log_end + 100, "negative": -1}[offset]
                        return vote(s, epoch=epoch, last_epoch=max(epoch + dl, 0) if dl else epoch, last_offset=last,
                                    pre_vote=pre)
                    cases.append(Case(f"{tag} epoch E{de:+d} last-epoch {dl:+d} offset {offset}", version, build))
        cases.append(Case(f"{tag} replica -1", version,
                          lambda s, pre=pre: vote(s, epoch=s.epoch, last_epoch=0, last_offset=0, pre_vote=pre, replica=-1)))
        cases.append(Case(f"{tag} other cluster", version,
                          lambda s, pre=pre: vote(s, epoch=s.epoch, last_epoch=0, last_offset=0, pre_vote=pre, cluster="other")))
        cases.append(Case(f"{tag} null cluster", version,
                          lambda s, pre=pre: vote(s, epoch=s.epoch, last_epoch=0, last_offset=0, pre_vote=pre, cluster=None)))
        cases.append(Case(f"{tag} wrong topic", version,
                          lambda s, pre=pre: vote(s, epoch=s.epoch, last_epoch=0, last_offset=0, pre_vote=pre, topic="other")))
        if version >= 1:
            cases.append(Case(f"{tag} to voter 7", version,
                              lambda s, pre=pre: vote(s, epoch=s.epoch, last_epoch=0, last_offset=0, pre_vote=pre, voter_id=7)))
            cases.append(Case(f"{tag} to another directory", version,
                              lambda s, pre=pre: vote(s, epoch=s.epoch, last_epoch=0, last_offset=0, pre_vote=pre,
                                                      voter_dir=OTHER_DIR)))
    for version in (0, 1):
        tag = f"begin-epoch v{version}"
        cases += [
            Case(f"{tag} older epoch", version, lambda s: begin_epoch(s, epoch=s.epoch - 1, leader=2)),
            Case(f"{tag} itself as leader", version, lambda s: begin_epoch(s, epoch=s.epoch, leader=1), leader_only=True),
            Case(f"{tag} leader -1", version, lambda s: begin_epoch(s, epoch=s.epoch, leader=-1)),
            Case(f"{tag} other cluster", version, lambda s: begin_epoch(s, epoch=s.epoch, leader=1, cluster="x"), leader_only=True),
        ]
        if version >= 1:
            cases.append(Case(f"{tag} to voter 7", version,
                              lambda s: begin_epoch(s, epoch=s.epoch, leader=1, voter_id=7), leader_only=True))
        tag = f"end-epoch v{version}"
        cases += [
            Case(f"{tag} older epoch", version, lambda s: end_epoch(s, epoch=s.epoch - 1, leader=2)),
            Case(f"{tag} itself", version, lambda s: end_epoch(s, epoch=s.epoch, leader=1), leader_only=True),
            Case(f"{tag} leader -1", version, lambda s: end_epoch(s, epoch=s.epoch, leader=-1)),
            Case(f"{tag} other cluster", version, lambda s: end_epoch(s, epoch=s.epoch, leader=1, cluster="x"), leader_only=True),
        ]
    tag = f"fetch v{fetch_version}"
    for de in (-1, 0, 1):
        for what, at in (("start", lambda s: (0, 0)), ("end", lambda s: (s.log_end, s.epoch)),
                         ("past the end", lambda s: (s.log_end + 5, s.epoch)),
                         ("later epoch", lambda s: (s.log_end, s.epoch + 1))):
            def build_fetch(s: State, de: int = de, at: Callable[[State], tuple[int, int]] = at) -> Message:
                offset, last = at(s)
                return fetch(s, leader_epoch=s.epoch + de, offset=offset, last_epoch=last)
            cases.append(Case(f"{tag} leader epoch E{de:+d} at {what}", fetch_version, build_fetch))
    cases += [
        Case(f"{tag} other cluster", fetch_version, lambda s: fetch(s, leader_epoch=s.epoch, offset=0, last_epoch=0,
                                                                    cluster="x")),
        Case(f"{tag} replica -1", fetch_version, lambda s: fetch(s, leader_epoch=s.epoch, offset=0, last_epoch=0,
                                                                 replica=-1)),
        Case(f"{tag} negative offset", fetch_version, lambda s: fetch(s, leader_epoch=s.epoch, offset=-1,
                                                                      last_epoch=0)),
    ]
    tag = f"add-voter v{add_voter_version}"
    cases += [
        Case(f"{tag} the existing voter", add_voter_version, lambda s: add_voter(s, voter=1, directory=None)),
        Case(f"{tag} other cluster", add_voter_version, lambda s: add_voter(s, voter=4, directory=OTHER_DIR,
                                                                            cluster="x")),
        Case(f"{tag} no listeners", add_voter_version, lambda s: add_voter(s, voter=4, directory=OTHER_DIR,
                                                                           listeners=False)),
    ]
    for version, pre in kinds:  # these move the receiver to a later epoch: last
        tag = f"vote v{version}{' pre' if pre else ''}"
        cases.append(Case(f"{tag} epoch E+1 up to date", version, moves_epoch=True, build=(
            lambda s, pre=pre: vote(s, epoch=s.epoch + 1, last_epoch=s.epoch, last_offset=s.log_end, pre_vote=pre))))
        cases.append(Case(f"{tag} epoch E+2 behind", version, moves_epoch=True, build=(
            lambda s, pre=pre: vote(s, epoch=s.epoch + 2, last_epoch=0, last_offset=0, pre_vote=pre))))
    return cases


# ----------------------------------------------------------------------------- answers


def _leader(leader_id: int, s: State) -> Any:
    return "self" if leader_id == s.node_id else leader_id


def normalize(response: Any, s: State) -> tuple[Any, ...]:
    """The comparable part of an answer (see the module docstring)."""
    name = type(response).__name__
    top = int(response.error_code) if hasattr(response, "error_code") else None
    if name == "VoteResponse":
        parts = [(int(p.error_code), _leader(p.leader_id, s), p.leader_epoch - s.epoch, p.vote_granted)
                 for t in response.topics for p in t.partitions]
        return (top, parts, len(response.node_endpoints))
    if name in ("BeginQuorumEpochResponse", "EndQuorumEpochResponse"):
        parts = [(int(p.error_code), _leader(p.leader_id, s), p.leader_epoch - s.epoch)
                 for t in response.topics for p in t.partitions]
        return (top, parts, len(getattr(response, "node_endpoints", [])))
    if name == "FetchResponse":
        parts = []
        for t in response.responses:
            for p in t.partitions:
                parts.append((
                    int(p.error_code),
                    p.high_watermark - s.high_watermark if p.high_watermark >= 0 else p.high_watermark,
                    (p.diverging_epoch.epoch - s.epoch, p.diverging_epoch.end_offset - s.log_end)
                    if p.diverging_epoch.epoch >= 0 else None,
                    (p.snapshot_id.epoch, p.snapshot_id.end_offset) if p.snapshot_id.epoch >= 0 else None,
                    (_leader(p.current_leader.leader_id, s), p.current_leader.leader_epoch - s.epoch),
                    "some" if p.records else "none",
                ))
        return (top, parts, len(response.node_endpoints))
    if name == "AddRaftVoterResponse":  # the message too, the receiver's own directory id masked
        message = response.error_message
        return (top, message if message is None else message.replace(str(s.directory_id), "<self>"))
    raise AssertionError(f"unexpected response {name}")


@pytest.mark.parametrize(("kafka_version", "role"), release_matrix(ROLES))
def test_stock_and_kwire_answer_alike(each_kafka: KafkaRelease, pair: dict[str, PairNode]) -> None:
    # the newest versions the stock release takes (3.9: Vote 0-1, Fetch 0-17, AddRaftVoter 0)
    vote_version = 2 if each_kafka.at_least(4, 0) else 1
    fetch_version = 18 if each_kafka.at_least(4, 0) else 17
    add_voter_version = 1 if each_kafka.at_least(4, 1) else 0
    cases = _cases(vote_version, fetch_version, add_voter_version)
    if pair["kwire"].role == "observer":  # it stays in epoch 0: no case may move it
        cases = [c for c in cases if not (c.moves_epoch or c.leader_only)]
    assert len(cases) >= 50
    differences: list[str] = []
    for case in cases:
        answers = {}
        for name, node in pair.items():
            state = wait_ready(node, RELEAD_TIMEOUT_S)
            response = trio.run(send, node.port, case.build(state), case.version)
            answers[name] = response if isinstance(response, str) else normalize(response, state)
        if os.environ.get("KWIRE_PROBE_PRINT"):
            print(case.name, answers["stock"])
        if answers["stock"] != answers["kwire"]:
            differences.append(f"{case.name}:\n    stock {answers['stock']}\n    kwire {answers['kwire']}")
    for name, node in pair.items():
        assert node.proc.poll() is None, f"{name} died during the probe"
    assert not differences, f"{len(differences)} of {len(cases)} cases differ:\n" + "\n".join(differences)
