"""Fetch (api key 1) on ``__cluster_metadata``-0: log replication and the high watermark.

Versions handled: 4-18 as a leader (topic by TopicId from v13, by name before; the replica id
from ReplicaState at v15+, from ReplicaId before; ReplicaDirectoryId from v17; NodeEndpoints in
the response from v17; the v18 request HighWatermark of KIP-1166 is accepted but not used to
wake parked fetches early). The follower side builds the request without a version: the driver
encodes it at the negotiated version and, below v15, moves ``replica_state.replica_id`` into
``replica_id`` (``FetchRequest.SimpleBuilder``). Mirrors ``KafkaRaftClient.handleFetchRequest``
/ ``tryCompleteFetchRequest`` / ``handleFetchResponse`` (kraft-facts §2.4, §6.3, §6.5, §6.6).

Leader steps, each with the error it returns:

1. ClusterId present and different -> top-level INCONSISTENT_CLUSTER_ID.
2. Not exactly one topic (TopicId ``METADATA_TOPIC_ID``, or name ``__cluster_metadata`` below
   v13) with one partition 0 -> top-level INVALID_REQUEST.
3. MaxWaitMs < 0, FetchOffset < 0, LastFetchedEpoch < 0 or LastFetchedEpoch >
   CurrentLeaderEpoch -> top-level INVALID_REQUEST.
4. CurrentLeaderEpoch below the local epoch -> partition FENCED_LEADER_EPOCH; above ->
   UNKNOWN_LEADER_EPOCH; not the leader -> NOT_LEADER_OR_FOLLOWER. CurrentLeader is always set.
5. Offset validation (``ReplicatedLog.validateOffsetAndEpoch``): behind the log start, or at
   it with another epoch, or an epoch older than the earliest snapshot -> SnapshotId = latest
   snapshot; otherwise ``end_offset_for_epoch(LastFetchedEpoch)``: another epoch, or an end
   offset below FetchOffset -> DivergingEpoch{epoch, end offset}.
6. A valid fetch updates the replica's state: a voter (matching id and, if known, directory
   id) moves the high watermark (only past the epoch start offset) and check-quorum; anyone
   else is tracked as an observer. Records: up to 8 MiB of whole batches from FetchOffset.
7. No records, no error, no divergence, no snapshot and MaxWaitMs > 0 -> parked until the log
   end offset passes FetchOffset or MaxWaitMs expires; then answered as above. Leaving the
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

from typing import TYPE_CHECKING, Any

from kwire.errors import Errors
from kwire.uuid import METADATA_TOPIC_ID
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
from server.raft.common import is_diverging, leader_endpoint, validate_leader_only
from server.raft.roles import Follower, Leader, ParkedFetch, ReplicaState, SnapshotDownload
from server.raft.types import (
    MAX_FETCH_SIZE_BYTES,
    MAX_FETCH_WAIT_MS,
    METADATA_PARTITION,
    METADATA_TOPIC_NAME,
    OBSERVER_SESSION_TIMEOUT_MS,
    OffsetAndEpoch,
    ReplicaKey,
)
from storage.errors import CorruptRecordError
from storage.records import iter_batches

if TYPE_CHECKING:
    from server.raft.core import RaftCore
    from server.raft.events import RequestReceived

VERSIONS = (4, 18)
BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(0, 0)


def build_request(core: RaftCore) -> FetchRequest:
    """The follower/observer Fetch (``KafkaRaftClient.buildFetchRequest``)."""
    end = core.end_offset()
    return FetchRequest(
        cluster_id=core.identity.cluster_id,
        replica_id=-1,
        replica_state=FetchReplicaState(replica_id=core.identity.node_id, replica_epoch=-1),
        max_wait_ms=MAX_FETCH_WAIT_MS,
        min_bytes=0,
        max_bytes=MAX_FETCH_SIZE_BYTES,
        topics=[
            FetchTopic(
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    FetchPartition(
                        partition=METADATA_PARTITION,
                        current_leader_epoch=core.epoch,
                        fetch_offset=end.offset,
                        last_fetched_epoch=end.epoch,
                        log_start_offset=core.log.log_start_offset,
                        partition_max_bytes=0,
                        replica_directory_id=core.identity.directory_id,
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
    core: RaftCore,
    version: int,
    listener: str,
    error: Errors,
    *,
    records: bytes | None = None,
    diverging: OffsetAndEpoch | None = None,
    snapshot: OffsetAndEpoch | None = None,
) -> FetchResponse:
    state = core.state
    high_watermark = -1
    if isinstance(state, Leader) and state.high_watermark is not None:
        high_watermark = state.high_watermark
    partition = PartitionData(
        partition_index=METADATA_PARTITION,
        error_code=error,
        high_watermark=high_watermark,
        log_start_offset=core.log.log_start_offset,
        current_leader=LeaderIdAndEpoch(
            leader_id=-1 if state.leader_id is None else state.leader_id,
            leader_epoch=core.epoch,
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
    found = leader_endpoint(core, listener)
    if version >= 17 and found is not None:
        endpoints.append(NodeEndpoint(node_id=found[0], host=found[1], port=found[2]))
    return FetchResponse(responses=[topic], node_endpoints=endpoints)


def not_leader_response(core: RaftCore, version: int, listener: str) -> FetchResponse:
    """The answer to a parked fetch when this replica stops leading."""
    return _response(core, version, listener, Errors.NOT_LEADER_OR_FOLLOWER)


def validate_offset_and_epoch(core: RaftCore, fetch_offset: int, last_fetched_epoch: int) -> tuple[str, OffsetAndEpoch | None]:
    """``("valid" | "diverging" | "snapshot", offset and epoch)``."""
    log = core.log
    latest = log.latest_snapshot_id()
    earliest = log.earliest_snapshot_id()
    if latest is not None and latest.offset == log.log_start_offset:
        # the snapshot the log starts at, even if an older one was not cleaned up yet
        earliest = latest
    if fetch_offset == 0 and latest is not None and latest != BOOTSTRAP_SNAPSHOT_ID:
        return ("snapshot", latest)
    if log.log_start_offset == 0 and fetch_offset == 0:
        return ("valid", None)
    if earliest is not None and earliest != BOOTSTRAP_SNAPSHOT_ID and (
        fetch_offset < log.log_start_offset
        or (fetch_offset == log.log_start_offset and last_fetched_epoch != earliest.epoch)
        or last_fetched_epoch < earliest.epoch
    ):
        return ("snapshot", latest)
    end = log.end_offset_for_epoch(last_fetched_epoch)
    if end.epoch != last_fetched_epoch or end.offset < fetch_offset:
        return ("diverging", end)
    return ("valid", None)


def handle_request(
    core: RaftCore, now_ms: int, event: RequestReceived, *, may_park: bool
) -> FetchResponse | None:
    request: FetchRequest = event.request
    version = event.api_version
    if not core.validate_cluster_id(request.cluster_id):
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
        return FetchResponse(error_code=Errors.INVALID_REQUEST)
    error = validate_leader_only(core, partition.current_leader_epoch)
    if error != Errors.NONE:
        return _response(core, version, event.listener, error)
    state = core.state
    assert isinstance(state, Leader)
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    key = ReplicaKey.of(replica_id, partition.replica_directory_id if version >= 17 else None)
    kind, found = validate_offset_and_epoch(core, partition.fetch_offset, partition.last_fetched_epoch)
    if kind == "diverging":
        return _response(core, version, event.listener, Errors.NONE, diverging=found)
    if kind == "snapshot":
        return _response(core, version, event.listener, Errors.NONE, snapshot=found)
    _update_replica_state(core, state, key, partition.fetch_offset, now_ms)
    records = core.log.read(partition.fetch_offset, MAX_FETCH_SIZE_BYTES)
    if not records and may_park and request.max_wait_ms > 0:
        state.parked.append(
            ParkedFetch(
                event.request_id,
                version,
                request,
                event.listener,
                partition.fetch_offset,
                now_ms + request.max_wait_ms,
            )
        )
        return None
    return _response(core, version, event.listener, Errors.NONE, records=records)


def _update_replica_state(
    core: RaftCore, state: Leader, key: ReplicaKey, fetch_offset: int, now_ms: int
) -> None:
    """``LeaderState.updateReplicaState``: voters move the HWM, observers are just tracked."""
    if key.id < 0:
        return
    leader_end = core.log.log_end_offset
    if state.voters.is_voter(key) and key.id != core.identity.node_id:
        replica = state.voter_states[key.id]
        replica.update_follower(fetch_offset, leader_end, now_ms)
        state.record_voter_fetch(key.id, now_ms)
        core.maybe_advance_leader_high_watermark()
        return
    if key.id == core.identity.node_id:
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


def truncation_offset(core: RaftCore, diverging: OffsetAndEpoch) -> int:
    """``ReplicatedLog.truncateToEndOffset``."""
    leo = core.log_end_offset()
    if diverging.epoch == 0:
        return min(diverging.offset, leo)
    local = core.log.end_offset_for_epoch(diverging.epoch)
    if local.epoch == diverging.epoch:
        return min(local.offset, diverging.offset)
    return local.offset


def handle_response(core: RaftCore, now_ms: int, source_id: int, response: FetchResponse) -> None:
    if response.error_code != Errors.NONE:
        retry_later(core, source_id, now_ms)
        return
    if len(response.responses) != 1:
        retry_later(core, source_id, now_ms)
        return
    topic = response.responses[0]
    if len(topic.partitions) != 1 or topic.partitions[0].partition_index != METADATA_PARTITION:
        retry_later(core, source_id, now_ms)
        return
    partition = topic.partitions[0]
    for endpoint in response.node_endpoints:
        core.learn_endpoint(endpoint.node_id, endpoint.host, endpoint.port)
    current = partition.current_leader
    if current.leader_epoch >= 0:
        leader = current.leader_id if current.leader_id >= 0 else None
        if core.maybe_transition(leader, current.leader_epoch, now_ms):
            return
    if partition.error_code != Errors.NONE:
        retry_later(core, source_id, now_ms)
        return
    state = core.state
    if not isinstance(state, Follower) or state.leader_id != source_id:
        return
    if current.leader_epoch != state.epoch:
        return
    state.fetch_deadline_ms = now_ms + core.config.fetch_timeout_ms
    state.has_fetched = True
    diverging = partition.diverging_epoch
    if is_diverging(diverging.epoch, diverging.end_offset):
        core.stage_truncation(
            truncation_offset(core, OffsetAndEpoch(diverging.end_offset, diverging.epoch))
        )
        return
    snapshot = partition.snapshot_id
    if snapshot.epoch >= 0 or snapshot.end_offset >= 0:
        # behind the leader's log start: download its snapshot first (KIP-630)
        state.snapshot_download = SnapshotDownload(OffsetAndEpoch(snapshot.end_offset, snapshot.epoch))
        return
    records = partition.records
    if records:
        try:
            batches = list(iter_batches(records))
            expected = core.log_end_offset()
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
            retry_later(core, source_id, now_ms)
            return
        if batches:
            # the whole batches as one copy; a partial batch at the end is left out
            core.stage_append(bytes(records[: sum(b.size_in_bytes for b in batches)]))
    if partition.high_watermark >= 0:
        new_hwm = min(partition.high_watermark, core.log_end_offset())
        if new_hwm > core.high_watermark:
            core.update_high_watermark(new_hwm)


def retry_later(core: RaftCore, source_id: int, now_ms: int) -> None:
    core.backoff(source_id, now_ms)
    state = core.state
    if isinstance(state, Follower):
        state.backoff_until_ms = now_ms + core.config.retry_backoff_ms
