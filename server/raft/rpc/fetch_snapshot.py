"""FetchSnapshot (api key 59): a follower behind the leader's log start downloads a snapshot.

Versions handled: 0-1 (v1 adds ReplicaDirectoryId and the response's NodeEndpoints). Mirrors
``KafkaRaftClient.handleFetchSnapshotRequest`` / ``handleFetchSnapshotResponse`` (KIP-630).

Leader steps, each with the error it returns:

1. ClusterId present and different -> top-level INCONSISTENT_CLUSTER_ID.
2. Not exactly one topic ``__cluster_metadata`` with one partition 0 -> top-level
   INVALID_REQUEST.
3. CurrentLeaderEpoch below the local epoch -> partition FENCED_LEADER_EPOCH; above ->
   UNKNOWN_LEADER_EPOCH; not the leader -> NOT_LEADER_OR_FOLLOWER (CurrentLeader is set).
4. The bootstrap snapshot (0, 0), or no such frozen snapshot -> SNAPSHOT_NOT_FOUND.
5. Position < 0 or >= the snapshot's size -> POSITION_OUT_OF_RANGE.
6. Up to ``min(MaxBytes, 8 MiB)`` bytes from Position as UnalignedRecords, with Size and
   Position; a voter's request also counts for check-quorum.

Follower steps (while its Follower state holds a download started by a Fetch SnapshotId):

1. Top-level error or a malformed response -> retry after backoff.
2. CurrentLeader of a later epoch / another leader -> ``maybe_transition`` (download dropped).
3. SNAPSHOT_NOT_FOUND or POSITION_OUT_OF_RANGE -> drop the download, Fetch again (the leader
   will name its current snapshot); other partition errors -> retry after backoff.
4. Another snapshot id or a Position that is not the bytes held so far -> drop the download.
5. Append the bytes; once Size bytes are held, the snapshot is installed through the Outbox
   (``install_snapshot``: the log is replaced by it), the state machine is told to load it
   (``load_snapshot``), the voter set is re-read from it, and the high watermark moves to its
   end offset (a snapshot only covers committed data).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kwire.errors import Errors
from messages.generated.fetch_snapshot_request import (
    FetchSnapshotRequest,
    PartitionSnapshot,
    TopicSnapshot,
)
from messages.generated.fetch_snapshot_request import SnapshotId as RequestSnapshotId
from messages.generated.fetch_snapshot_response import (
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
)
from messages.generated.fetch_snapshot_response import PartitionSnapshot as ResponsePartition
from messages.generated.fetch_snapshot_response import SnapshotId as ResponseSnapshotId
from messages.generated.fetch_snapshot_response import TopicSnapshot as ResponseTopic
from server.raft.common import leader_endpoint, single_partition, validate_leader_only
from server.raft.roles import Follower, SnapshotDownload
from server.raft.rpc.fetch import retry_later
from server.raft.types import (
    BOOTSTRAP_SNAPSHOT_ID,
    MAX_FETCH_SIZE_BYTES,
    METADATA_PARTITION,
    METADATA_TOPIC_NAME,
    OffsetAndEpoch,
    ReplicaKey,
)

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import RequestReceived, ResponseReceived

VERSIONS = (0, 1)


def build_request(ctx: RaftContext, download: SnapshotDownload) -> FetchSnapshotRequest:
    """The follower's FetchSnapshot for the snapshot being downloaded, from byte position
    ``len(download.data)``, at most 8 MiB (``KafkaRaftClient.buildFetchSnapshotRequest``)."""
    return FetchSnapshotRequest(
        cluster_id=ctx.identity.cluster_id,
        replica_id=ctx.identity.node_id,
        max_bytes=MAX_FETCH_SIZE_BYTES,
        topics=[
            TopicSnapshot(
                name=METADATA_TOPIC_NAME,
                partitions=[
                    PartitionSnapshot(
                        partition=METADATA_PARTITION,
                        current_leader_epoch=ctx.quorum.epoch,
                        snapshot_id=RequestSnapshotId(
                            end_offset=download.snapshot_id.offset, epoch=download.snapshot_id.epoch
                        ),
                        position=len(download.data),
                        replica_directory_id=ctx.identity.directory_id,
                    )
                ],
            )
        ],
    )


def _response(
    ctx: RaftContext,
    version: int,
    listener: str,
    error: Errors,
    snapshot_id: OffsetAndEpoch | None = None,
    *,
    size: int = 0,
    position: int = 0,
    data: bytes = b"",
) -> FetchSnapshotResponse:
    leader = ctx.quorum.state.leader_id
    partition = ResponsePartition(
        index=METADATA_PARTITION,
        error_code=error,
        current_leader=LeaderIdAndEpoch(leader_id=-1 if leader is None else leader, leader_epoch=ctx.quorum.epoch),
        size=size,
        position=position,
        unaligned_records=data,
    )
    if snapshot_id is not None:
        partition.snapshot_id = ResponseSnapshotId(end_offset=snapshot_id.offset, epoch=snapshot_id.epoch)
    endpoints: list[NodeEndpoint] = []
    found = leader_endpoint(ctx, listener)
    if version >= 1 and found is not None:
        endpoints.append(NodeEndpoint(node_id=found[0], host=found[1], port=found[2]))
    return FetchSnapshotResponse(
        topics=[ResponseTopic(name=METADATA_TOPIC_NAME, partitions=[partition])],
        node_endpoints=endpoints,
    )


def handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> FetchSnapshotResponse:
    """Leader steps 1-6 above (``handleFetchSnapshotRequest``); returns the response: a chunk of
    the snapshot, or an error."""
    request: FetchSnapshotRequest = event.request
    version = event.api_version
    if not ctx.identity.validate_cluster_id(request.cluster_id):
        return FetchSnapshotResponse(error_code=Errors.INCONSISTENT_CLUSTER_ID)
    partition = single_partition(request.topics, "name", "partition")
    if partition is None:
        return FetchSnapshotResponse(error_code=Errors.INVALID_REQUEST)
    error = validate_leader_only(ctx, partition.current_leader_epoch)
    if error != Errors.NONE:
        return _response(ctx, version, event.listener, error)
    state = ctx.quorum.leader()
    snapshot_id = OffsetAndEpoch(partition.snapshot_id.end_offset, partition.snapshot_id.epoch)
    size = ctx.log.snapshot_size(snapshot_id)
    if snapshot_id == BOOTSTRAP_SNAPSHOT_ID or size is None:
        return _response(ctx, version, event.listener, Errors.SNAPSHOT_NOT_FOUND, snapshot_id)
    if partition.position < 0 or partition.position >= size:
        return _response(ctx, version, event.listener, Errors.POSITION_OUT_OF_RANGE, snapshot_id)
    key = ReplicaKey.of(request.replica_id, partition.replica_directory_id if version >= 1 else None)
    if state.voters.is_voter(key):
        state.record_voter_fetch(key.id, now_ms)
    max_bytes = max(0, min(request.max_bytes, MAX_FETCH_SIZE_BYTES))
    data = ctx.log.read_snapshot(snapshot_id, partition.position, max_bytes)
    return _response(
        ctx,
        version,
        event.listener,
        Errors.NONE,
        snapshot_id,
        size=size,
        position=partition.position,
        data=data,
    )


def handle_response(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """Follower steps 1-5 above (``handleFetchSnapshotResponse``): the complete snapshot is
    staged for install through ``ctx.view``. Returns nothing."""
    source_id, response = event.source_id, event.response
    if response.error_code != Errors.NONE:
        retry_later(ctx, source_id, now_ms)
        return
    partition = single_partition(response.topics, "name", "index")
    if partition is None:
        retry_later(ctx, source_id, now_ms)
        return
    current = partition.current_leader
    if current.leader_epoch >= 0:
        leader = current.leader_id if current.leader_id >= 0 else None
        if ctx.quorum.maybe_transition(leader, current.leader_epoch, now_ms):
            return
    state = ctx.quorum.state
    if not isinstance(state, Follower) or state.leader_id != source_id or state.snapshot_download is None:
        return
    download = state.snapshot_download
    if partition.error_code in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
        state.snapshot_download = None
        return
    if partition.error_code != Errors.NONE:
        retry_later(ctx, source_id, now_ms)
        return
    snapshot_id = OffsetAndEpoch(partition.snapshot_id.end_offset, partition.snapshot_id.epoch)
    if snapshot_id != download.snapshot_id or partition.position != len(download.data):
        state.snapshot_download = None
        return
    state.fetch_deadline_ms = ctx.quorum.fetch_deadline(now_ms)
    state.has_fetched = True
    download.size = partition.size
    download.data += partition.unaligned_records
    if len(download.data) > partition.size:
        state.snapshot_download = None
        return
    if len(download.data) == partition.size:
        state.snapshot_download = None
        ctx.view.stage_snapshot_install(download.snapshot_id, bytes(download.data))
