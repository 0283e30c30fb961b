"""kraft.version 0 -> 1 on a running static quorum (``server.raft.kraft_upgrade``), as Kafka
4.1+'s ``LeaderState.maybeAppendUpgradedKRaftVersion`` does it."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.update_raft_voter_request import (
    KRaftVersionFeature,
    Listener,
    UpdateRaftVoterRequest,
)
from messages.generated.voters_record import VotersRecord
from server.raft.events import UpgradeKRaftVersion
from server.raft.kraft_upgrade import UpgradeRefused
from server.raft.roles import Leader
from storage.batch_scan import iter_batches
from storage.control import read_kraft_batch
from tests.raft.helpers import (
    CLUSTER_ID,
    Context,
    elect_local_leader,
    fetch_request,
    make_context,
    static_voters,
)

DIRS = {i: Uuid.from_longs(0x99, i) for i in (1, 2, 3)}


def _static_leader() -> tuple[Context, Leader]:
    context = make_context(voters=static_voters(1, 2, 3), directory_id=DIRS[1])
    leader = elect_local_leader(context)
    end = context.log.log_end_offset
    context.request(fetch_request(2, leader.epoch, end, leader.epoch), 17)  # the HWM is known
    assert leader.high_watermark == end
    return context, leader


def _update(context: Context, leader: Leader, voter: int, high: int = 1) -> None:
    _, response = context.request(
        UpdateRaftVoterRequest(
            cluster_id=CLUSTER_ID,
            current_leader_epoch=leader.epoch,
            voter_id=voter,
            voter_directory_id=DIRS[voter],
            listeners=[Listener(name="CONTROLLER", host=f"host{voter}", port=9000 + voter)],
            kraft_version_feature=KRaftVersionFeature(min_supported_version=0, max_supported_version=high),
        ),
        0,
    )
    assert response.error_code == Errors.NONE


def _refusal(context: Context, epoch: int, level: int) -> UpgradeRefused:
    with pytest.raises(UpgradeRefused) as caught:
        context.core.check_kraft_upgrade(epoch, level)
    return caught.value


def test_the_upgrade_waits_for_every_voter_and_appends_kraft_version_and_voters() -> None:
    context, leader = _static_leader()
    # the leader's own entry is known from the start of its epoch; the others' are not
    assert leader.volatile_voters is not None and leader.volatile_voters.get(1).key.directory_id == DIRS[1]  # type: ignore[union-attr]
    refusal = _refusal(context, leader.epoch, 1)
    assert refusal.error == Errors.INVALID_UPDATE_VERSION
    assert refusal.message == "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters support it"
    _update(context, leader, 2)
    _update(context, leader, 3, high=0)  # a voter that cannot run kraft.version 1
    assert _refusal(context, leader.epoch, 1).error == Errors.INVALID_UPDATE_VERSION
    _update(context, leader, 3)
    assert context.core.check_kraft_upgrade(leader.epoch, 0) is False  # already there
    assert context.core.check_kraft_upgrade(leader.epoch, 1) is True
    before = context.log.log_end_offset
    context.step(UpgradeKRaftVersion(1))
    # one control batch: KRaftVersion(1) and the voters with their directory ids
    [batch] = [read_kraft_batch(b) for b in iter_batches(context.log.read(before, 1 << 20))]
    assert batch.is_control
    records = [r.message for r in batch.records]  # type: ignore[union-attr]
    assert [type(m) for m in records] == [KRaftVersionRecord, VotersRecord]
    assert records[0].kraft_version == 1
    assert [(v.voter_id, v.voter_directory_id) for v in records[1].voters] == [(i, DIRS[i]) for i in (1, 2, 3)]
    assert context.core.kraft_version == 1
    assert context.core.voters.get(2).key.directory_id == DIRS[2]  # type: ignore[union-attr]
    # asked again: nothing to do; another level while pending: refused
    assert context.core.check_kraft_upgrade(leader.epoch, 1) is False
    refusal = _refusal(context, leader.epoch, 0)
    assert refusal.error == Errors.INVALID_UPDATE_VERSION and "concurrent upgrade" in refusal.message


def test_an_upgrade_off_the_leader_or_for_an_earlier_epoch_is_not_the_controllers() -> None:
    context, leader = _static_leader()
    assert _refusal(context, leader.epoch - 1, 1).error == Errors.NOT_CONTROLLER
    follower = make_context(voters=static_voters(1, 2, 3), directory_id=DIRS[1])
    assert _refusal(follower, 0, 1).error == Errors.NOT_CONTROLLER


def test_a_dynamic_quorum_refuses_a_downgrade() -> None:
    from tests.raft.test_voter_changes import _leader

    context, leader = _leader(kraft_version=1)
    refusal = _refusal(context, leader.epoch, 0)
    assert refusal.error == Errors.INVALID_UPDATE_VERSION
    assert refusal.message.endswith("because the new version is a downgrade")


def test_the_leader_describes_the_upgraded_voters_with_their_directory_ids() -> None:
    from messages.generated.describe_quorum_request import (
        DescribeQuorumRequest,
        PartitionData,
        TopicData,
    )

    context, leader = _static_leader()
    for voter in (2, 3):
        _update(context, leader, voter)
    context.step(UpgradeKRaftVersion(1))
    _, response = context.request(
        DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]),
        2,
    )
    voters = response.topics[0].partitions[0].current_voters
    assert {v.replica_id: v.replica_directory_id for v in voters} == DIRS
    assert leader.voter_states[2].end_offset is not None  # the progress carried over
