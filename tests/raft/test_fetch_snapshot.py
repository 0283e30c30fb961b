"""Snapshots (KIP-630): Fetch answers SnapshotId below the log start, FetchSnapshot serves
bytes, the follower downloads and installs them."""

from __future__ import annotations

from kwire.errors import Errors
from messages.generated.fetch_snapshot_request import (
    FetchSnapshotRequest,
    PartitionSnapshot,
    SnapshotId,
    TopicSnapshot,
)
from messages.generated.fetch_snapshot_response import (
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
)
from messages.generated.fetch_snapshot_response import PartitionSnapshot as ResponsePartition
from messages.generated.fetch_snapshot_response import SnapshotId as ResponseSnapshotId
from messages.generated.fetch_snapshot_response import TopicSnapshot as ResponseTopic
from server.raft.core import RaftCore
from server.raft.events import Tick
from server.raft.log import MemoryRaftLog
from server.raft.roles import Follower
from server.raft.types import ElectionState, OffsetAndEpoch
from storage.snapshots import SnapshotId as StorageSnapshotId
from storage.snapshots import build_snapshot_batches
from tests.raft.helpers import (
    CLUSTER_ID,
    append_batches,
    elect_local_leader,
    fetch_request,
    make_context,
)
from tests.raft.test_fetch import _fetch_response


def _snapshot_bytes(offset: int, epoch: int, values: list[bytes]) -> bytes:
    return b"".join(
        build_snapshot_batches(
            StorageSnapshotId(offset, epoch),
            last_contained_log_timestamp=0,
            records=values,
            append_time_ms=0,
        )
    )


def _leader_with_snapshot():  # type: ignore[no-untyped-def]
    log = MemoryRaftLog()
    append_batches(log, [1, 1, 1, 1])
    context = make_context(log=log, election=ElectionState(1))
    leader = elect_local_leader(context)
    log.update_high_watermark(4)
    data = _snapshot_bytes(4, 1, [b"v0", b"v1", b"v2", b"v3"])
    log.create_snapshot(OffsetAndEpoch(4, 1), data)
    log.delete_before_snapshot()
    assert log.log_start_offset == 4
    return context, leader, data


def _request(epoch: int, snapshot: tuple[int, int], position: int, max_bytes: int = 1 << 20) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(
        cluster_id=CLUSTER_ID,
        replica_id=2,
        max_bytes=max_bytes,
        topics=[
            TopicSnapshot(
                name="__cluster_metadata",
                partitions=[
                    PartitionSnapshot(
                        partition=0,
                        current_leader_epoch=epoch,
                        snapshot_id=SnapshotId(end_offset=snapshot[0], epoch=snapshot[1]),
                        position=position,
                    )
                ],
            )
        ],
    )


def test_fetch_below_log_start_returns_the_snapshot_id() -> None:
    context, leader, _ = _leader_with_snapshot()
    _, response = context.request(fetch_request(2, leader.epoch, 0, 0), 17)
    part = response.responses[0].partitions[0]
    assert (part.snapshot_id.end_offset, part.snapshot_id.epoch) == (4, 1)
    assert not part.records
    _, response = context.request(fetch_request(2, leader.epoch, 2, 1), 17)
    assert response.responses[0].partitions[0].snapshot_id.end_offset == 4


def test_fetch_snapshot_serves_chunks_and_errors() -> None:
    context, leader, data = _leader_with_snapshot()
    _, response = context.request(_request(leader.epoch, (4, 1), 0, max_bytes=50), 1)
    part = response.topics[0].partitions[0]
    assert part.error_code == Errors.NONE and part.size == len(data) and part.position == 0
    assert part.unaligned_records == data[:50]
    _, response = context.request(_request(leader.epoch, (4, 1), 50), 1)
    assert response.topics[0].partitions[0].unaligned_records == data[50:]
    _, response = context.request(_request(leader.epoch, (4, 1), len(data)), 1)
    assert response.topics[0].partitions[0].error_code == Errors.POSITION_OUT_OF_RANGE
    _, response = context.request(_request(leader.epoch, (3, 1), 0), 1)
    assert response.topics[0].partitions[0].error_code == Errors.SNAPSHOT_NOT_FOUND
    _, response = context.request(_request(leader.epoch, (0, 0), 0), 1)
    assert response.topics[0].partitions[0].error_code == Errors.SNAPSHOT_NOT_FOUND
    _, response = context.request(_request(leader.epoch - 1, (4, 1), 0), 1)
    assert response.topics[0].partitions[0].error_code == Errors.FENCED_LEADER_EPOCH


def _snapshot_response(epoch: int, leader: int, snapshot: tuple[int, int], size: int, position: int,
                       data: bytes, error: int = 0) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(
        topics=[
            ResponseTopic(
                name="__cluster_metadata",
                partitions=[
                    ResponsePartition(
                        index=0,
                        error_code=error,
                        snapshot_id=ResponseSnapshotId(end_offset=snapshot[0], epoch=snapshot[1]),
                        current_leader=LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch),
                        size=size,
                        position=position,
                        unaligned_records=data,
                    )
                ],
            )
        ]
    )


def test_follower_downloads_and_installs_a_snapshot() -> None:
    context = make_context(election=ElectionState(5, 2, None))
    out = context.outboxes[-1]
    data = _snapshot_bytes(7, 3, [b"a", b"b"])
    out = context.respond(out, 2, _fetch_response(5, 2, hwm=9))
    # no SnapshotId yet: a normal empty answer; now one naming a snapshot
    fetch_send = [s for s in out.sends if s.destination_id == 2][-1]
    response = _fetch_response(5, 2)
    response.responses[0].partitions[0].snapshot_id.end_offset = 7
    response.responses[0].partitions[0].snapshot_id.epoch = 3
    out = context.respond(type(out)(sends=[fetch_send]), 2, response)
    state = context.core.state
    assert isinstance(state, Follower) and state.snapshot_download is not None
    send = [s for s in out.sends if s.destination_id == 2][-1]
    part = send.request.topics[0].partitions[0]
    assert (part.snapshot_id.end_offset, part.snapshot_id.epoch, part.position) == (7, 3, 0)
    out = context.respond(out, 2, _snapshot_response(5, 2, (7, 3), len(data), 0, data[:40]))
    send = [s for s in out.sends if s.destination_id == 2][-1]
    assert send.request.topics[0].partitions[0].position == 40
    out = context.respond(out, 2, _snapshot_response(5, 2, (7, 3), len(data), 40, data[40:]))
    assert out.install_snapshot == (OffsetAndEpoch(7, 3), data)
    assert out.load_snapshot == OffsetAndEpoch(7, 3)
    assert context.log.log_start_offset == 7 and context.log.log_end_offset == 7
    assert context.core.high_watermark == 7
    assert state.snapshot_download is None
    # once the driver applied the install (deadline: now), the next fetch continues after it
    assert out.next_deadline_ms == context.now
    out = context.tick()
    fetches = [s for s in out.sends if type(s.request).__name__ == "FetchRequest"]
    last = fetches[-1].request.topics[0].partitions[0]
    assert (last.fetch_offset, last.last_fetched_epoch) == (7, 3)


def test_restart_loads_the_latest_snapshot_first() -> None:
    context, _, _ = _leader_with_snapshot()
    log = context.log
    core = RaftCore(
        identity=context.core.identity,
        log=log,
        voters=context.core.voters,
        rng=context.core.rng,
        now_ms=context.now,
        election=context.core.persisted_election,
    )
    out = core.step(context.now, Tick())
    assert out.load_snapshot == OffsetAndEpoch(4, 1)


def test_fetch_snapshot_request_validation() -> None:
    context, leader, _ = _leader_with_snapshot()
    bad = _request(leader.epoch, (4, 1), 0)
    bad.cluster_id = "other"
    _, response = context.request(bad, 1)
    assert response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    bad = _request(leader.epoch, (4, 1), 0)
    bad.topics[0].name = "other"
    _, response = context.request(bad, 1)
    assert response.error_code == Errors.INVALID_REQUEST
    _, response = context.request(_request(leader.epoch + 1, (4, 1), 0), 1)
    assert response.topics[0].partitions[0].error_code == Errors.UNKNOWN_LEADER_EPOCH


def test_follower_abandons_a_download_on_snapshot_not_found() -> None:
    context = make_context(election=ElectionState(5, 2, None))
    out = context.outboxes[-1]
    response = _fetch_response(5, 2)
    response.responses[0].partitions[0].snapshot_id.end_offset = 7
    response.responses[0].partitions[0].snapshot_id.epoch = 3
    out = context.respond(out, 2, response)
    state = context.core.state
    assert isinstance(state, Follower) and state.snapshot_download is not None
    out = context.respond(out, 2, _snapshot_response(5, 2, (7, 3), 0, 0, b"", error=Errors.SNAPSHOT_NOT_FOUND))
    assert state.snapshot_download is None
    assert [type(s.request).__name__ for s in out.sends] == ["FetchRequest"]


def test_a_follower_at_the_snapshot_the_log_starts_at_is_valid_even_with_older_snapshots() -> None:
    """Regression (simulation seed 12373): an older snapshot left below the log start must not
    make the leader send the follower the same snapshot forever."""
    context, leader, _ = _leader_with_snapshot()  # log start 4, snapshot (4, 1)
    log = context.log
    log._snapshots[OffsetAndEpoch(2, 0)] = _snapshot_bytes(2, 0, [b"v0", b"v1"])  # not cleaned up
    _, response = context.request(fetch_request(2, leader.epoch, 4, 1), 17)
    part = response.responses[0].partitions[0]
    assert part.snapshot_id.end_offset == -1 and part.diverging_epoch.epoch == -1
