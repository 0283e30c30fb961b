"""Fetch (api key 1) on ``__cluster_metadata``-0: log replication and the high watermark.

Versions handled: 4-18 as a leader (topic by TopicId from v13, by name before; the replica id
from ReplicaState at v15+, from ReplicaId before; ReplicaDirectoryId from v17; NodeEndpoints in
the response from v17; v18's HighWatermark of KIP-1166: the follower sends the one it knows,
and the leader answers at once a follower that knows an older one). The follower side builds the request without a version: the driver
encodes it at the negotiated version and, below v15, moves ``replica_state.replica_id`` into
``replica_id`` (``FetchRequest.SimpleBuilder``). Mirrors ``KafkaRaftClient.handleFetchRequest``
/ ``tryCompleteFetchRequest`` / ``handleFetchResponse`` (KIP-595; snapshots KIP-630).

Leader steps, each with the error it returns:

1. ClusterId present and different -> top-level INCONSISTENT_CLUSTER_ID.
2. Not exactly one topic (TopicId ``METADATA_TOPIC_ID``, or name ``__cluster_metadata`` below
   v13) with one partition 0 -> top-level INVALID_REQUEST.
3. MaxWaitMs < 0, FetchOffset < 0, LastFetchedEpoch < 0 or LastFetchedEpoch >
   CurrentLeaderEpoch -> partition INVALID_REQUEST.
4. CurrentLeaderEpoch below the local epoch -> partition FENCED_LEADER_EPOCH; above ->
   UNKNOWN_LEADER_EPOCH; not the leader -> NOT_LEADER_OR_FOLLOWER. CurrentLeader is always set;
   a partition error carries HighWatermark -1 (``buildEmptyFetchResponse``).
5. Offset validation (``ReplicatedLog.validateOffsetAndEpoch``): behind the log start, or at
   it with another epoch, or an epoch older than the earliest snapshot -> SnapshotId = latest
   snapshot; otherwise ``end_offset_for_epoch(LastFetchedEpoch)``: another epoch, or an end
   offset below FetchOffset -> DivergingEpoch{epoch, end offset}.
6. A valid fetch updates the replica's state: a voter (matching id and, if known, directory
   id) moves the high watermark (only past the epoch start offset) and check-quorum; anyone
   else is tracked as an observer. Records: up to 8 MiB of whole batches from FetchOffset.
7. No records, no error, no divergence, no snapshot, MaxWaitMs > 0 and (v18) a HighWatermark
   not below the leader's -> parked until the log end offset passes FetchOffset, the high
   watermark moves (``KafkaRaftClient.onUpdateLeaderHighWatermark`` completes every parked
   fetch) or MaxWaitMs expires; then answered as above. Leaving the
   leader role answers parked fetches with NOT_LEADER_OR_FOLLOWER.

Follower steps on the response:

1. Top-level error, or no ``__cluster_metadata`` partition -> retry after
   ``retry.backoff.ms``.
2. NodeEndpoints (v17) are remembered; CurrentLeader names a later epoch, or a leader this
   replica did not know -> ``maybe_transition`` (an observer finds its leader this way, from
   a bootstrap server or any voter).
3. Partition error -> retry after backoff (the fetch timeout eventually starts an election).
4. DivergingEpoch -> truncate to: ``min(EndOffset, LEO)`` for epoch 0; else the local end
   offset of that epoch, ``min``'d with EndOffset when the local epoch matches
   (``ReplicatedLog.truncateToEndOffset``). Below the high watermark -> ``RaftSafetyError``.
5. SnapshotId -> start downloading that snapshot with FetchSnapshot (``fetch_snapshot``).
6. Records -> CRC and offset checks, then appended; HWM = min(leader HWM, log end offset).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from kwire.errors import Errors
from kwire.uuid import METADATA_TOPIC_ID
from kwire.wire import RecordsRegion, as_buffer
from messages.generated.fetch_request import FetchPartition, FetchRequest, FetchTopic
from messages.generated.fetch_request import ReplicaState as FetchReplicaState
from messages.generated.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    SnapshotId,
)
from server.raft import leadership
from server.raft.common import is_diverging, leader_endpoint, validate_leader_only
from server.raft.roles import Follower, Leader, ParkedFetch, ReplicaState, SnapshotDownload
from server.raft.types import (
    BOOTSTRAP_SNAPSHOT_ID,
    MAX_FETCH_SIZE_BYTES,
    MAX_FETCH_WAIT_MS,
    METADATA_PARTITION,
    METADATA_TOPIC_NAME,
    OBSERVER_SESSION_TIMEOUT_MS,
    OffsetAndEpoch,
    ReplicaKey,
)
from storage.batch_scan import iter_batches
from storage.errors import CorruptRecordError

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import RequestReceived, ResponseReceived

VERSIONS = (4, 18)


def build_request(ctx: RaftContext) -> FetchRequest:
    """The follower/observer Fetch (``KafkaRaftClient.buildFetchRequest``)."""
    end = ctx.view.end_offset()
    return FetchRequest(
        cluster_id=ctx.identity.cluster_id,
        replica_id=-1,
        replica_state=FetchReplicaState(replica_id=ctx.identity.node_id, replica_epoch=-1),
        max_wait_ms=MAX_FETCH_WAIT_MS,
        min_bytes=0,
        max_bytes=MAX_FETCH_SIZE_BYTES,
        topics=[
            FetchTopic(
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    FetchPartition(
                        partition=METADATA_PARTITION,
                        current_leader_epoch=ctx.quorum.epoch,
                        fetch_offset=end.offset,
                        last_fetched_epoch=end.epoch,
                        log_start_offset=ctx.log.log_start_offset,
                        partition_max_bytes=0,
                        replica_directory_id=ctx.identity.directory_id,
                        high_watermark=ctx.view.high_watermark,
                    )
                ],
            )
        ],
    )


def _single_partition(topics: list[Any], version: int) -> Any | None:
    if len(topics) != 1:
        return None
    topic = topics[0]
    if version >= 13:
        if topic.topic_id != METADATA_TOPIC_ID:
            return None
    elif topic.topic != METADATA_TOPIC_NAME:
        return None
    if len(topic.partitions) != 1:
        return None
    partition = topic.partitions[0]
    index = partition.partition if hasattr(partition, "partition") else partition.partition_index
    return partition if index == METADATA_PARTITION else None


def _response(
    ctx: RaftContext,
    version: int,
    listener: str,
    error: Errors,
    *,
    records: bytes | RecordsRegion | None = None,
    diverging: OffsetAndEpoch | None = None,
    snapshot: OffsetAndEpoch | None = None,
) -> FetchResponse:
    state = ctx.quorum.state
    high_watermark = -1  # an error answer carries none (buildEmptyFetchResponse)
    if error == Errors.NONE and isinstance(state, Leader) and state.high_watermark is not None:
        high_watermark = state.high_watermark
    partition = PartitionData(
        partition_index=METADATA_PARTITION,
        error_code=error,
        high_watermark=high_watermark,
        log_start_offset=ctx.log.log_start_offset,
        current_leader=LeaderIdAndEpoch(
            leader_id=-1 if state.leader_id is None else state.leader_id,
            leader_epoch=ctx.quorum.epoch,
        ),
        records=records if records else None,
    )
    if diverging is not None:
        partition.diverging_epoch = EpochEndOffset(epoch=diverging.epoch, end_offset=diverging.offset)
    if snapshot is not None:
        partition.snapshot_id = SnapshotId(end_offset=snapshot.offset, epoch=snapshot.epoch)
    topic = FetchableTopicResponse(partitions=[partition])
    if version >= 13:
        topic.topic_id = METADATA_TOPIC_ID
    else:
        topic.topic = METADATA_TOPIC_NAME
    endpoints: list[NodeEndpoint] = []
    found = leader_endpoint(ctx, listener)
    if version >= 17 and found is not None:
        endpoints.append(NodeEndpoint(node_id=found[0], host=found[1], port=found[2]))
    return FetchResponse(responses=[topic], node_endpoints=endpoints)


def not_leader_response(ctx: RaftContext, version: int, listener: str) -> FetchResponse:
    """The answer to a parked fetch when this replica stops leading."""
    return _response(ctx, version, listener, Errors.NOT_LEADER_OR_FOLLOWER)


class FetchValidation(enum.Enum):
    """How a fetch position relates to the leader's log (``ValidOffsetAndEpoch.Kind``)."""

    VALID = "valid"
    """The follower's log matches up to its fetch offset: send records."""
    DIVERGING = "diverging"
    """The follower's last fetched epoch ends earlier here: answer DivergingEpoch."""
    SNAPSHOT = "snapshot"
    """The position is below the log start (or at 0 past a snapshot): answer SnapshotId."""


def validate_offset_and_epoch(
    ctx: RaftContext, fetch_offset: int, last_fetched_epoch: int
) -> tuple[FetchValidation, OffsetAndEpoch | None]:
    """The relation of ``(fetch_offset, last_fetched_epoch)`` to the local log, with the
    diverging end offset or the snapshot id to send (``ReplicatedLog.validateOffsetAndEpoch``)."""
    log = ctx.log
    latest = log.latest_snapshot_id()
    earliest = log.earliest_snapshot_id()
    if latest is not None and latest.offset == log.log_start_offset:
        # the snapshot the log starts at, even if an older one was not cleaned up yet
        earliest = latest
    if fetch_offset == 0 and latest is not None and latest != BOOTSTRAP_SNAPSHOT_ID:
        return (FetchValidation.SNAPSHOT, latest)
    if log.log_start_offset == 0 and fetch_offset == 0:
        return (FetchValidation.VALID, None)
    if earliest is not None and earliest != BOOTSTRAP_SNAPSHOT_ID and (
        fetch_offset < log.log_start_offset
        or (fetch_offset == log.log_start_offset and last_fetched_epoch != earliest.epoch)
        or last_fetched_epoch < earliest.epoch
    ):
        return (FetchValidation.SNAPSHOT, latest)
    end = log.end_offset_for_epoch(last_fetched_epoch)
    if end.epoch != last_fetched_epoch or end.offset < fetch_offset:
        return (FetchValidation.DIVERGING, end)
    return (FetchValidation.VALID, None)


def handle_request(
    ctx: RaftContext, now_ms: int, event: RequestReceived, *, may_park: bool = True
) -> FetchResponse | None:
    """Leader steps 1-7 above (``handleFetchRequest``). Returns the response, or None when the
    fetch is parked; with ``may_park=False`` (a parked fetch woken up) it always answers."""
    request: FetchRequest = event.request
    version = event.api_version
    if not ctx.identity.validate_cluster_id(request.cluster_id):
        return FetchResponse(error_code=Errors.INCONSISTENT_CLUSTER_ID)
    partition = _single_partition(request.topics, version)
    if partition is None:
        return FetchResponse(error_code=Errors.INVALID_REQUEST)
    if (
        request.max_wait_ms < 0
        or partition.fetch_offset < 0
        or partition.last_fetched_epoch < 0
        or partition.last_fetched_epoch > partition.current_leader_epoch
    ):
        return _response(ctx, version, event.listener, Errors.INVALID_REQUEST)
    error = validate_leader_only(ctx, partition.current_leader_epoch)
    if error != Errors.NONE:
        return _response(ctx, version, event.listener, error)
    state = ctx.quorum.leader()
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    key = ReplicaKey.of(replica_id, partition.replica_directory_id if version >= 17 else None)
    kind, found = validate_offset_and_epoch(ctx, partition.fetch_offset, partition.last_fetched_epoch)
    if kind is FetchValidation.DIVERGING:
        return _response(ctx, version, event.listener, Errors.NONE, diverging=found)
    if kind is FetchValidation.SNAPSHOT:
        return _response(ctx, version, event.listener, Errors.NONE, snapshot=found)
    _update_replica_state(ctx, state, key, partition.fetch_offset, now_ms)
    records = ctx.log.read_records(partition.fetch_offset, MAX_FETCH_SIZE_BYTES)
    leader_hwm = -1 if state.high_watermark is None else state.high_watermark
    # v18 (KIP-1166): a follower that knows an older high watermark is answered at once
    stale_hwm = version >= 18 and partition.high_watermark < leader_hwm
    if not records and may_park and request.max_wait_ms > 0 and not stale_hwm:
        state.parked.append(
            ParkedFetch(
                event.request_id,
                version,
                request,
                event.listener,
                partition.fetch_offset,
                now_ms + request.max_wait_ms,
                leader_hwm,
            )
        )
        return None
    return _response(ctx, version, event.listener, Errors.NONE, records=records)


def _update_replica_state(
    ctx: RaftContext, state: Leader, key: ReplicaKey, fetch_offset: int, now_ms: int
) -> None:
    """``LeaderState.updateReplicaState``: voters move the HWM, observers are just tracked."""
    if key.id < 0:
        return
    leader_end = ctx.log.log_end_offset
    if state.voters.is_voter(key) and key.id != ctx.identity.node_id:
        replica = state.voter_states[key.id]
        replica.update_follower(fetch_offset, leader_end, now_ms)
        state.record_voter_fetch(key.id, now_ms)
        leadership.advance_high_watermark(ctx, now_ms)
        return
    if key.id == ctx.identity.node_id:
        return
    observer = state.observer_states.get(key)
    if observer is None:
        observer = ReplicaState(key)
        state.observer_states[key] = observer
    observer.update_follower(fetch_offset, leader_end, now_ms)
    stale = [
        k
        for k, s in state.observer_states.items()
        if s.last_fetch_ms >= 0 and now_ms - s.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
    ]
    for k in stale:
        del state.observer_states[k]


# --------------------------------------------------------------------------------------------
# follower side


def truncation_offset(ctx: RaftContext, diverging: OffsetAndEpoch) -> int:
    """``ReplicatedLog.truncateToEndOffset``."""
    leo = ctx.view.log_end_offset()
    if diverging.epoch == 0:
        return min(diverging.offset, leo)
    local = ctx.log.end_offset_for_epoch(diverging.epoch)
    if local.epoch == diverging.epoch:
        return min(local.offset, diverging.offset)
    return local.offset


def handle_response(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """Follower steps 1-6 above (``handleFetchResponse``): truncation, appends and the high
    watermark go through ``ctx.view``, a SnapshotId starts a download. Returns nothing."""
    source_id, response = event.source_id, event.response
    if response.error_code != Errors.NONE:
        retry_later(ctx, source_id, now_ms)
        return
    if len(response.responses) != 1:
        retry_later(ctx, source_id, now_ms)
        return
    topic = response.responses[0]
    if len(topic.partitions) != 1 or topic.partitions[0].partition_index != METADATA_PARTITION:
        retry_later(ctx, source_id, now_ms)
        return
    partition = topic.partitions[0]
    for endpoint in response.node_endpoints:
        ctx.requests.learn_endpoint(endpoint.node_id, endpoint.host, endpoint.port)
    current = partition.current_leader
    if current.leader_epoch >= 0:
        leader = current.leader_id if current.leader_id >= 0 else None
        if ctx.quorum.maybe_transition(leader, current.leader_epoch, now_ms):
            return
    if partition.error_code != Errors.NONE:
        retry_later(ctx, source_id, now_ms)
        return
    state = ctx.quorum.state
    if not isinstance(state, Follower) or state.leader_id != source_id:
        return
    if current.leader_epoch != state.epoch:
        return
    state.fetch_deadline_ms = ctx.quorum.fetch_deadline(now_ms)
    state.has_fetched = True
    diverging = partition.diverging_epoch
    if is_diverging(diverging.epoch, diverging.end_offset):
        ctx.view.stage_truncation(
            truncation_offset(ctx, OffsetAndEpoch(diverging.end_offset, diverging.epoch))
        )
        return
    snapshot = partition.snapshot_id
    if snapshot.epoch >= 0 or snapshot.end_offset >= 0:
        # behind the leader's log start: download its snapshot first (KIP-630)
        state.snapshot_download = SnapshotDownload(OffsetAndEpoch(snapshot.end_offset, snapshot.epoch))
        return
    records = partition.records
    if records:
        records = as_buffer(records)  # a region only when a leader's answer was never encoded
        try:
            batches = list(iter_batches(records))
            expected = ctx.view.log_end_offset()
            for batch in batches:
                batch.ensure_valid()
                if batch.base_offset != expected or batch.last_offset_delta < 0:
                    raise CorruptRecordError(
                        f"batch at {batch.base_offset}, expected {expected}"
                    )
                if batch.partition_leader_epoch > state.epoch:
                    raise CorruptRecordError(
                        f"batch epoch {batch.partition_leader_epoch} above {state.epoch}"
                    )
                expected = batch.next_offset
        except CorruptRecordError:
            retry_later(ctx, source_id, now_ms)
            return
        if batches:
            # the whole batches as one copy; a partial batch at the end is left out
            ctx.view.stage_append(bytes(records[: sum(b.size_in_bytes for b in batches)]))
    if partition.high_watermark >= 0:
        new_hwm = min(partition.high_watermark, ctx.view.log_end_offset())
        if new_hwm > ctx.view.high_watermark:
            ctx.view.update_high_watermark(new_hwm)


def retry_later(ctx: RaftContext, source_id: int, now_ms: int) -> None:
    """Back off ``source_id`` and, as a Follower, send no Fetch or FetchSnapshot for
    ``retry.backoff.ms``."""
    ctx.requests.backoff(source_id, now_ms)
    state = ctx.quorum.state
    if isinstance(state, Follower):
        state.backoff_until_ms = now_ms + ctx.config.retry_backoff_ms
