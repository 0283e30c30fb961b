"""kraft.version 1 (KIP-853): voters from the bootstrap checkpoint, the start-of-epoch
KRaftVersion + Voters records, directory ids in voter keys, voter sets read from the log."""

from __future__ import annotations

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.voters_record import VotersRecord
from server.raft.control import (
    bootstrap_voters,
    build_control_batch,
    control_records_of,
    voters_record,
)
from server.raft.events import Resign
from server.raft.log import MemoryRaftLog
from server.raft.roles import Leader, Resigned
from server.raft.types import ElectionState, Endpoint, ReplicaKey, VoterNode, VoterSet
from storage.batch_scan import iter_batches
from storage.format import DynamicVoter
from storage.format import voters_record as format_voters_record
from storage.snapshots import BOOTSTRAP_SNAPSHOT_ID, build_snapshot_batches
from tests.raft.helpers import elect_local_leader, make_context, vote_request

DIRS = {i: Uuid.from_longs(0x1000 + i, 0x2000 + i) for i in (1, 2, 3)}


def _checkpoint() -> bytes:
    """What ``kafka-storage format --initial-controllers`` writes as the (0, 0) snapshot."""
    dynamic = [DynamicVoter(i, f"host{i}", 9000 + i, DIRS[i]) for i in (1, 2, 3)]
    record = format_voters_record(dynamic, "CONTROLLER")
    return b"".join(
        build_snapshot_batches(
            BOOTSTRAP_SNAPSHOT_ID,
            last_contained_log_timestamp=0,
            records=[],
            append_time_ms=0,
            kraft_version=1,
            voters=record,
        )
    )


def _dynamic_context(log: MemoryRaftLog | None = None, election: ElectionState | None = None):  # type: ignore[no-untyped-def]
    kraft_version, voters = bootstrap_voters(_checkpoint())
    assert kraft_version == 1 and voters is not None
    return make_context(
        voters=voters, kraft_version=1, log=log, election=election, directory_id=DIRS[1]
    )


def test_bootstrap_checkpoint_gives_version_and_voters() -> None:
    kraft_version, voters = bootstrap_voters(_checkpoint())
    assert kraft_version == 1 and voters is not None
    assert [v.key for v in voters.voters] == [ReplicaKey(i, DIRS[i]) for i in (1, 2, 3)]
    assert voters.get(2).endpoints == (Endpoint("CONTROLLER", "host2", 9002),)  # type: ignore[union-attr]
    assert voters.get(2).supported_kraft_versions == (0, 1)  # type: ignore[union-attr]


def test_first_leader_copies_the_voter_set_into_the_log_once() -> None:
    context = _dynamic_context()
    leader = elect_local_leader(context)
    (batch,) = list(iter_batches(context.log.read(0, 1 << 20)))
    messages = [r.message for r in control_records_of(batch)]
    assert [type(m) for m in messages] == [LeaderChangeMessage, KRaftVersionRecord, VotersRecord]
    assert messages[1].kraft_version == 1  # type: ignore[union-attr]
    assert messages[2] == voters_record(context.core.voters)
    assert context.core.control.voters_in_log
    # the next epoch's start batch has only the LeaderChange
    context.step(Resign())
    assert isinstance(context.core.state, Resigned)
    context.now += 5000
    elect_local_leader(context)
    assert isinstance(context.core.state, Leader) and context.core.epoch > leader.epoch
    last = list(iter_batches(context.log.read(0, 1 << 20)))[-1]
    assert [type(r.message) for r in control_records_of(last)] == [LeaderChangeMessage]


def test_voter_set_in_the_log_overrides_the_bootstrap_one() -> None:
    log = MemoryRaftLog()
    smaller = VoterSet(
        tuple(VoterNode(ReplicaKey(i, DIRS[i]), (Endpoint("CONTROLLER", f"host{i}", 9000 + i),), (0, 1)) for i in (1, 2))
    )
    log.append(build_control_batch([voters_record(smaller)], base_offset=0, epoch=1, timestamp_ms=0))
    log.flush()
    context = _dynamic_context(log=log, election=ElectionState(1))
    assert context.core.voters == smaller
    # a truncation that removes the record brings the bootstrap set back
    context.core.view.stage_truncation(0)
    assert context.core.voters.ids == frozenset({1, 2, 3})


def test_votes_check_directory_ids() -> None:
    context = _dynamic_context()
    request = vote_request(2, 3, 0, 0)
    request.topics[0].partitions[0].voter_directory_id = Uuid.from_longs(9, 9)
    _, response = context.request(request, 1)
    assert response.topics[0].partitions[0].error_code == Errors.INVALID_VOTER_KEY
    request = vote_request(2, 3, 0, 0)
    request.topics[0].partitions[0].replica_directory_id = DIRS[2]
    _, response = context.request(request, 1)
    assert response.topics[0].partitions[0].vote_granted
    assert context.core.persisted_election.voted_key == ReplicaKey(2, DIRS[2])
    # the same id with another directory is another replica: no second vote
    request = vote_request(2, 3, 0, 0)
    request.topics[0].partitions[0].replica_directory_id = Uuid.from_longs(7, 7)
    _, response = context.request(request, 1)
    assert not response.topics[0].partitions[0].vote_granted


def test_leader_refreshes_its_own_voter_entry_at_epoch_start() -> None:
    log = MemoryRaftLog()
    stale = VoterSet(
        tuple(
            VoterNode(ReplicaKey(i, DIRS[i]), (Endpoint("CONTROLLER", f"old{i}", 1000 + i),), (0, 1))
            for i in (1, 2, 3)
        )
    )
    log.append(build_control_batch([voters_record(stale)], base_offset=0, epoch=1, timestamp_ms=0))
    log.flush()
    context = _dynamic_context(log=log, election=ElectionState(1))
    elect_local_leader(context)
    last = list(iter_batches(context.log.read(0, 1 << 20)))[-1]
    messages = [r.message for r in control_records_of(last)]
    assert [type(m) for m in messages] == [LeaderChangeMessage, KRaftVersionRecord, VotersRecord]
    me = context.core.voters.get(1)
    assert me is not None and me.endpoints == (Endpoint("CONTROLLER", "host1", 9001),)
    other = context.core.voters.get(2)
    assert other is not None and other.endpoints == (Endpoint("CONTROLLER", "old2", 1002),)
