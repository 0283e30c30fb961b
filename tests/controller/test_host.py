"""The controller host's rules (``server.controller.host``), driven as the node and the
simulation drive it: over a real single-voter KRaft core and an in-memory log, with the time
moved by hand and the fsync completed when a test says so."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.begin_quorum_epoch_request import BeginQuorumEpochRequest
from messages.generated.begin_quorum_epoch_request import PartitionData as BeginPartition
from messages.generated.begin_quorum_epoch_request import TopicData as BeginTopic
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.controller_registration_request import ControllerRegistrationRequest
from messages.generated.controller_registration_request import Listener as ControllerListener
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.describe_acls_request import DescribeAclsRequest
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.no_op_record import NoOpRecord
from messages.generated.unregister_controller_record import UnregisterControllerRecord
from messages.generated.unregister_controller_request import UnregisterControllerRequest
from messages.generated.unregister_controller_response import UnregisterControllerResponse
from messages.generated.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from messages.generated.vote_request import VoteRequest
from messages.metadata import decode_record, encode_record
from messages.runtime import Message
from server.controller import periodic_tasks
from server.controller.cluster import ReplayError
from server.controller.host import ControllerOutbox, ControllerRequest, QuorumController
from server.controller.operation_context import ControllerConfig
from server.controller.stepping import run_steps, steps
from server.failpoints import FailpointHalt, parse_action
from server.raft.core import RaftCore
from server.raft.events import (
    AppendResult,
    ClientAppend,
    CommittedBatch,
    Event,
    FlushCompleted,
    OutboundRequest,
    Outbox,
    RequestReceived,
    Resign,
    Tick,
    UpgradeKRaftVersion,
)
from server.raft.log import MemoryRaftLog
from server.raft.outbox import apply_log_changes, apply_now
from server.raft.roles import Leader
from server.raft.types import (
    ElectionState,
    Endpoint,
    OffsetAndEpoch,
    QuorumConfig,
    ReplicaIdentity,
    VoterSet,
)
from storage.records import RecordBatch
from storage.snapshot_format import read_snapshot_content

METADATA_VERSION = 21  # 3.9-IV0
BOOTSTRAP = [(FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION), 0)]


def _config(**overrides: Any) -> ControllerConfig:
    values: dict[str, Any] = {"node_id": 1, "cluster_id": "host-test", "static_config": {}, "max_idle_interval_ms": 0}
    values.update(overrides)
    return ControllerConfig(**values)


@dataclass
class Harness:
    """One node: a core of ``voters`` over a memory log and a host beside it. The log's fsync
    completes at once unless ``hold_flush`` (then :meth:`flush_now` completes it)."""

    config: ControllerConfig = field(default_factory=_config)
    voters: tuple[int, ...] = (1,)
    hold_flush: bool = False
    stopping: bool = False
    bootstrap: list[tuple[Message, int]] = field(default_factory=lambda: list(BOOTSTRAP))
    now: int = 0
    replies: list[tuple[Any, Message]] = field(default_factory=list)
    snapshots: list[tuple[OffsetAndEpoch, bytes]] = field(default_factory=list)
    committed: list[CommittedBatch] = field(default_factory=list)
    raft_events: list[Event] = field(default_factory=list)
    deadline_ms: int | None = None
    flush_pending: bool = False

    def __post_init__(self) -> None:
        self.log = MemoryRaftLog()
        self.core = RaftCore(
            identity=ReplicaIdentity(1, cluster_id="host-test", endpoints=(Endpoint("CONTROLLER", "host1", 9001),)),
            log=self.log,
            voters=VoterSet.static({i: (f"host{i}", 9000 + i) for i in self.voters}),
            rng=random.Random(1),
            now_ms=0,
            config=QuorumConfig(append_linger_ms=0),
        )
        self.host = QuorumController(self.config, bootstrap=self.bootstrap, raft=self.core, now_ms=0, rng=random.Random(7))
        if self.stopping:
            self.host.shutdown()
        self.step(Tick())

    # -- OutboxTarget

    async def persist_election(self, election: ElectionState) -> None:
        pass

    async def write_log(self, out: Outbox) -> None:
        apply_log_changes(self.log, out)

    def send(self, request: OutboundRequest) -> None:
        pass

    def reply(self, reply: Any) -> None:
        pass

    async def flush(self) -> None:
        self.flush_pending = True

    async def load_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        raise AssertionError("a single voter never loads a snapshot")

    def commit(self, batch: CommittedBatch) -> None:
        self.committed.append(batch)
        self.host.commit(self.now, batch)

    def append_result(self, result: AppendResult) -> None:
        assert self.host.append_result(result), result

    def schedule(self, deadline_ms: int | None) -> None:
        pass

    # -- driving, with server.node.driver's stepping function

    def step(self, *events: Event, load: bool = True) -> None:
        """One turn of core and host with the node's own stepping function; ``load``: the host
        may replay the next slice of an image being rebuilt (the driver's deadline turn)."""

        def apply(out: Outbox) -> bool:
            self.flush_pending = False
            apply_now(out, self)
            if not self.flush_pending or self.hold_flush:
                return False
            self.log.flush()
            return True

        run_steps(steps(self.core, self.host, events, lambda: self.now, load=load), apply, self.carry_out)

    def carry_out(self, out: ControllerOutbox) -> None:
        self.replies.extend(out.replies)
        if out.snapshot is not None:
            self.snapshots.append((out.snapshot.snapshot_id, out.snapshot.build()))
        self.raft_events.extend(out.raft_events)
        self.deadline_ms = out.next_deadline_ms

    def flush_now(self) -> None:
        if self.flush_pending:
            self.flush_pending = False
            self.log.flush()
            self.step(FlushCompleted())

    def advance(self, ms: int) -> None:
        self.now += ms
        self.step(Tick())

    def request(self, body: Message, version: int, handle: Any = None) -> None:
        self.host.request(self.now, ControllerRequest(handle if handle is not None else body, body, version, "CONTROLLER", self.now))
        self.step()

    def answer(self, handle: Any) -> Message | None:
        return next((response for h, response in self.replies if h is handle), None)

    def records(self) -> list[Message]:
        """Every data record committed so far, decoded."""
        return [
            decode_record(value)[0]
            for batch in self.committed if not batch.is_control
            for value in RecordBatch(batch.data).iter_values() if value is not None
        ]


def _active() -> Harness:
    """A single-voter node whose controller is active (the bootstrap records committed): a
    single voter elects itself as it starts."""
    harness = Harness()
    assert isinstance(harness.core.state, Leader)
    assert harness.host.active_controller() is not None
    return harness


def _registration(broker_id: int, incarnation: int = 1) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id="host-test", incarnation_id=Uuid.from_longs(broker_id, incarnation),
        listeners=[Listener(name="PLAINTEXT", host="b", port=9092, security_protocol=0)],
        features=[Feature(name="metadata.version", min_supported_version=1, max_supported_version=METADATA_VERSION)],
        rack=None, log_dirs=[Uuid.from_longs(broker_id, 99)],
    )


def _heartbeat(broker_id: int, epoch: int, offset: int, **fields: Any) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=offset, **fields)


# ---------------------------------------------------------------------- activation


def test_the_first_leader_activates_with_the_bootstrap_records_as_one_batch() -> None:
    harness = _active()
    data = [b for b in harness.committed if not b.is_control]
    assert len(data) == 1, data
    names = [type(decode_record(v)[0]).__name__ for v in RecordBatch(data[0].data).iter_values() if v is not None]
    # 3.9-IV0 writes its bootstrap records as a metadata transaction (KIP-868)
    assert names == ["BeginTransactionRecord", "FeatureLevelRecord", "ZkMigrationStateRecord", "EndTransactionRecord"]
    assert harness.records()[1] == BOOTSTRAP[0][0]
    assert harness.host.controller.metadata_version == METADATA_VERSION
    assert harness.host.controller.active_epoch == harness.core.epoch


def test_no_activation_before_the_epoch_start_is_replayed_nor_while_stopping() -> None:
    harness = Harness(hold_flush=True)
    assert isinstance(harness.core.state, Leader)
    # the LeaderChange of the epoch is not committed: nothing before its start offset is missing,
    # so the controller claims the epoch and appends its bootstrap records, applied at once
    # (Kafka's active controller replays its activation records as it writes them)...
    assert harness.host.controller.active_epoch == harness.core.epoch
    assert harness.host.active_controller() is not None and harness.host.speculating
    assert harness.committed == []
    # ...so a write runs at once, and is answered once it commits
    handle = object()
    harness.request(_registration(5), 4, handle)
    assert harness.answer(handle) is None
    harness.flush_now()
    assert harness.answer(handle).error_code == Errors.NONE  # type: ignore[union-attr]
    assert not harness.host.speculating

    stopping = Harness(stopping=True)
    assert isinstance(stopping.core.state, Leader)
    assert stopping.host.controller.active_epoch is None


def test_off_the_leader_a_write_gets_not_controller_naming_the_leader() -> None:
    harness = Harness(voters=(1, 2, 3))
    begin = BeginQuorumEpochRequest(topics=[BeginTopic(topic_name="__cluster_metadata", partitions=[
        BeginPartition(partition_index=0, leader_id=2, leader_epoch=4)
    ])])
    harness.step(RequestReceived(1, 0, begin))
    assert harness.core.leader_and_epoch.leader_id == 2
    handle = object()
    harness.request(_registration(5), 4, handle)
    answer = harness.answer(handle)
    assert answer is not None and answer.error_code == Errors.NOT_CONTROLLER
    assert harness.host.not_controller().message == "The active controller appears to be node 2."


# ---------------------------------------------------------------------- writes


def test_a_write_is_answered_once_its_batch_commits() -> None:
    harness = _active()
    harness.hold_flush = True
    handle = object()
    harness.request(_registration(5), 4, handle)
    assert harness.answer(handle) is None  # appended, not yet committed
    harness.flush_now()
    answer = harness.answer(handle)
    assert answer is not None and answer.error_code == Errors.NONE


def test_the_unsafe_switch_answers_a_write_once_appended_before_it_commits() -> None:
    """``unsafe_ack_on_append`` (the fault tests' positive control): the same write is answered
    NONE while its batch is still unflushed, so uncommitted."""
    harness = Harness(config=_config(unsafe_ack_on_append=True))
    harness.hold_flush = True
    handle = object()
    harness.request(_registration(5), 4, handle)
    answer = harness.answer(handle)
    assert answer is not None and answer.error_code == Errors.NONE
    assert not any(getattr(r, "broker_id", None) == 5 for r in harness.records())  # not committed
    harness.flush_now()
    assert sum(1 for reply_handle, _ in harness.replies if reply_handle is handle) == 1  # answered once


def test_writes_run_at_once_in_arrival_order_and_each_epoch_is_its_batch_offset() -> None:
    harness = _active()
    harness.hold_flush = True
    first, second = object(), object()
    harness.request(_registration(5), 4, first)
    appends = [e for e in harness.raft_events if isinstance(e, ClientAppend)]
    harness.request(_registration(6), 4, second)
    assert len([e for e in harness.raft_events if isinstance(e, ClientAppend)]) == len(appends) + 1  # no waiting
    assert harness.answer(first) is None and harness.answer(second) is None
    harness.flush_now()
    a, b = harness.answer(first), harness.answer(second)
    assert a is not None and b is not None and a.error_code == b.error_code == Errors.NONE
    registrations = [r for r in harness.records() if type(r).__name__ == "RegisterBrokerRecord"]
    assert [r.broker_id for r in registrations] == [5, 6]
    starts = {
        decode_record(next(iter(RecordBatch(batch.data).iter_values())))[0].broker_id: batch.base_offset  # type: ignore[union-attr]
        for batch in harness.committed if not batch.is_control and batch.base_offset > 0
        and type(decode_record(next(iter(RecordBatch(batch.data).iter_values())))[0]).__name__ == "RegisterBrokerRecord"
    }
    assert a.broker_epoch == starts[5] and b.broker_epoch == starts[6]
    assert a.broker_epoch < b.broker_epoch


def test_a_write_sees_the_uncommitted_writes_before_it_and_is_answered_after_them() -> None:
    harness = _active()
    registered = object()
    harness.request(_registration(5), 4, registered)
    epoch = harness.answer(registered).broker_epoch  # type: ignore[union-attr]
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, object())  # unfenced
    harness.hold_flush = True
    created, again = object(), object()
    topic = CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=1, replication_factor=-1)],
                                timeout_ms=1000, validate_only=False)
    harness.request(topic, 7, created)
    harness.request(topic, 7, again)  # writes nothing: it saw the first creation, not yet committed
    assert harness.answer(created) is None and harness.answer(again) is None
    harness.flush_now()
    first, second = harness.answer(created), harness.answer(again)
    assert first is not None and first.topics[0].error_code == Errors.NONE  # type: ignore[attr-defined]
    assert second is not None and second.topics[0].error_code == Errors.TOPIC_ALREADY_EXISTS  # type: ignore[attr-defined]
    assert [r.name for r in harness.records() if type(r).__name__ == "TopicRecord"] == ["t"]  # type: ignore[attr-defined]


def test_a_read_on_the_active_controller_is_answered_once_what_it_saw_commits() -> None:
    harness = _active()
    harness.hold_flush = True
    write, read = object(), object()
    harness.request(_registration(5), 4, write)
    harness.request(DescribeClusterRequest(endpoint_type=2), 1, read)
    assert harness.answer(read) is None and harness.answer(write) is None
    harness.flush_now()
    answer = harness.answer(read)
    assert harness.answer(write) is not None
    # 3.9-IV0 registers controllers (KIP-919): the leader is this node, but with nothing
    # registered yet it is not among the listed controllers, so ControllerId is -1
    assert answer is not None and answer.error_code == Errors.NONE
    assert answer.brokers == [] and answer.controller_id == -1


def test_a_heartbeat_counts_as_contact_when_it_arrives_even_while_it_waits() -> None:
    harness = Harness(config=_config(session_timeout_ms=800))
    registered = object()
    harness.request(_registration(5), 4, registered)
    epoch = harness.answer(registered).broker_epoch  # type: ignore[union-attr]
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, object())  # unfenced
    harness.hold_flush = True
    harness.request(_registration(6), 4, object())  # a write in flight: the next heartbeat waits
    harness.now += 700
    waiting = object()
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, waiting)
    assert harness.answer(waiting) is None
    sessions = harness.host.controller.cluster.heartbeats
    assert sessions is not None
    # 1,200 ms after the first heartbeat, 500 after the waiting one: alive by the waiting one alone
    assert sessions.has_valid_session(5, epoch, harness.now + 500)
    assert not sessions.has_valid_session(5, epoch, harness.now + 900)


def test_a_refused_append_answers_not_controller() -> None:
    harness = _active()
    harness.hold_flush = True
    handle = object()
    harness.request(_registration(5), 4, handle)
    token = [e.token for e in harness.raft_events if isinstance(e, ClientAppend)][-1]
    assert token < 0  # the host's tokens never meet a driver's
    assert harness.host.append_result(AppendResult(token, -1, -1, -1, Errors.NOT_LEADER_OR_FOLLOWER))
    harness.step()
    answer = harness.answer(handle)
    assert answer is not None and answer.error_code == Errors.NOT_CONTROLLER
    # the registration was applied when appended: the image goes back to the committed one
    assert not harness.host.speculating and 5 not in harness.host.controller.cluster.registrations
    assert not harness.host.append_result(AppendResult(7, 0, 0, 1))  # a driver's own append


def test_losing_leadership_answers_every_waiting_write_not_controller() -> None:
    harness = _active()
    harness.hold_flush = True
    waiting, parked = object(), object()
    harness.request(_registration(5), 4, waiting)
    harness.request(_registration(6), 4, parked)
    assert set(harness.host.controller.cluster.registrations) == {5, 6} and harness.host.speculating
    harness.step(Resign())
    assert harness.host.controller.active_epoch is None
    for handle in (waiting, parked):
        answer = harness.answer(handle)
        assert answer is not None and answer.error_code == Errors.NOT_CONTROLLER, handle
    # back to the committed image, replayed from the start of the log (no snapshot)
    assert not harness.host.speculating and harness.host.controller.cluster.registrations == {}
    assert harness.host.controller.metadata_version == METADATA_VERSION


def test_losing_leadership_goes_back_to_the_committed_image_from_the_latest_snapshot() -> None:
    harness = Harness(config=_config(snapshot_max_bytes=1, snapshot_max_interval_ms=0))
    registered = object()
    harness.request(_registration(5), 4, registered)
    assert harness.answer(registered).error_code == Errors.NONE  # type: ignore[union-attr]
    snapshot_id, data = harness.snapshots[-1]
    assert snapshot_id.offset == harness.host.replayed_offset
    harness.log.create_snapshot(snapshot_id, data)
    harness.log.delete_before_snapshot()
    harness.hold_flush = True
    taken = len(harness.snapshots)
    harness.request(_registration(6), 4, object())
    harness.request(_registration(7), 4, object())
    assert set(harness.host.controller.cluster.registrations) == {5, 6, 7}
    harness.step(Resign())
    assert not harness.host.speculating
    assert set(harness.host.controller.cluster.registrations) == {5}
    assert harness.host.replayed_offset == snapshot_id.offset
    assert len(harness.snapshots) == taken  # nothing committed, and an image ahead is never snapshotted


def test_going_back_to_the_committed_image_takes_a_slice_per_poll() -> None:
    harness = Harness(config=_config(snapshot_max_bytes=1, snapshot_max_interval_ms=0))
    for broker_id in (5, 6):
        harness.request(_registration(broker_id), 4, object())
    snapshot_id, data = harness.snapshots[-1]
    harness.log.create_snapshot(snapshot_id, data)
    harness.request(_registration(7), 4, object())  # committed after the snapshot: read back from the log
    committed_end = harness.host.replayed_offset
    assert committed_end > snapshot_id.offset
    harness.hold_flush = True
    harness.request(_registration(8), 4, object())
    assert 8 in harness.host.controller.cluster.registrations and harness.host.speculating
    host = harness.host
    host.load_records_per_poll = 1
    harness.step(Resign())
    assert host.loading and host.replayed_offset < committed_end
    waiting = object()
    harness.request(_registration(9), 4, waiting)
    polls = 0
    while host.loading:
        assert harness.answer(waiting) is None, "requests wait for the whole image"
        assert harness.deadline_ms == harness.now
        harness.step()
        polls += 1
        assert polls < 20
    assert polls >= 2
    assert set(host.controller.cluster.registrations) == {5, 6, 7}
    assert host.replayed_offset == committed_end and not host.speculating
    assert harness.answer(waiting).error_code == Errors.NOT_CONTROLLER  # type: ignore[union-attr]


def test_a_snapshot_waits_until_the_image_holds_nothing_uncommitted() -> None:
    harness = Harness(config=_config(snapshot_max_bytes=1, snapshot_max_interval_ms=0))
    harness.request(_registration(5), 4, object())
    taken = len(harness.snapshots)
    harness.hold_flush = True
    harness.request(_registration(6), 4, object())  # appended, not flushed
    # applied, and its append not handed to the core yet when the batch of broker 6 commits
    harness.host.request(harness.now, ControllerRequest(object(), _registration(7), 4, "CONTROLLER", harness.now))
    harness.flush_now()
    assert 6 in {r.broker_id for r in harness.records() if type(r).__name__ == "RegisterBrokerRecord"}  # type: ignore[attr-defined]
    assert harness.host.speculating and len(harness.snapshots) == taken  # the trigger stays armed
    harness.flush_now()
    assert not harness.host.speculating and len(harness.snapshots) == taken + 1
    snapshot_id, data = harness.snapshots[-1]
    assert snapshot_id.offset == harness.host.replayed_offset
    values = read_snapshot_content(data).data_records()
    names = {decode_record(v)[0].broker_id for v in values  # type: ignore[union-attr]
             if v is not None and type(decode_record(v)[0]).__name__ == "RegisterBrokerRecord"}
    assert names == {5, 6, 7}


def test_an_operation_error_is_answered_at_once_and_writes_nothing() -> None:
    harness = _active()
    before = len(harness.committed)
    handle = object()
    harness.request(BrokerRegistrationRequest(
        broker_id=5, cluster_id="another-cluster", incarnation_id=Uuid.from_longs(5, 1), listeners=[], features=[],
        rack=None, log_dirs=[],
    ), 4, handle)
    answer = harness.answer(handle)
    assert answer is not None and answer.error_code == Errors.INCONSISTENT_CLUSTER_ID
    assert len(harness.committed) == before


def test_a_kraft_version_upgrade_is_appended_before_the_request_records(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = _active()
    monkeypatch.setattr(harness.core, "check_kraft_upgrade", lambda epoch, level: True)
    request = UpdateFeaturesRequest(feature_updates=[FeatureUpdateKey(feature="kraft.version", max_version_level=1, upgrade_type=1)])
    harness.host.request(harness.now, ControllerRequest("u", request, 1, "CONTROLLER", harness.now))
    out = harness.host.poll(harness.now)
    assert [type(e) for e in out.raft_events] == [UpgradeKRaftVersion, ClientAppend]
    assert out.raft_events[0] == UpgradeKRaftVersion(1)
    append = out.raft_events[1]
    assert isinstance(append, ClientAppend)
    assert [type(decode_record(v)[0]) for v in append.values] == [NoOpRecord]


def test_a_request_that_is_not_a_controller_rpc_is_refused() -> None:
    harness = _active()
    with pytest.raises(KeyError):
        harness.host.request(0, ControllerRequest("x", VoteRequest(), 0))


def test_created_topic_ids_come_from_the_injected_rng() -> None:
    ids = []
    for _ in range(2):
        harness = _active()
        handle = object()
        harness.request(_registration(5), 4, handle)
        epoch = harness.answer(handle).broker_epoch  # type: ignore[union-attr]
        harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, object())
        harness.request(CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=1, replication_factor=1)]), 7, handle)
        ids.append([t.topic_id for t in harness.host.controller.replication.topics.values()])
    assert ids[0] == ids[1] and len(ids[0]) == 1


# ---------------------------------------------------------------------- periodic tasks


def test_an_active_controller_appends_a_no_op_every_idle_interval() -> None:
    harness = Harness(config=_config(max_idle_interval_ms=500))
    before = sum(isinstance(r, NoOpRecord) for r in harness.records())
    assert harness.deadline_ms is not None and harness.deadline_ms <= harness.now + 500
    for _ in range(4):
        harness.advance(500)
    assert sum(isinstance(r, NoOpRecord) for r in harness.records()) - before == 4
    harness.host.shutdown()
    for _ in range(2):
        harness.advance(500)
    assert sum(isinstance(r, NoOpRecord) for r in harness.records()) - before == 4


def test_a_broker_whose_session_expires_is_fenced_by_the_periodic_check() -> None:
    harness = Harness(config=_config(session_timeout_ms=800))
    handle = object()
    harness.request(_registration(5), 4, handle)
    epoch = harness.answer(handle).broker_epoch  # type: ignore[union-attr]
    heartbeat = object()
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, heartbeat)
    assert harness.answer(heartbeat).is_fenced is False  # type: ignore[union-attr]
    assert not any(isinstance(r, FenceBrokerRecord) for r in harness.records())
    for _ in range(12):  # 1,200 ms without a heartbeat, checked every 100 ms
        harness.advance(100)
    assert harness.host.controller.cluster.registrations[5].fenced
    assert any(type(r).__name__ in ("FenceBrokerRecord", "BrokerRegistrationChangeRecord") for r in harness.records())


def test_a_broker_is_fenced_as_its_session_ends_not_at_the_next_period() -> None:
    """The check runs every ``broker.session.timeout.ms`` / 8 and also when the oldest session
    ends: a broker last heard from between two periodic checks is fenced 1 ms past its session,
    not at the next period (up to an eighth of the timeout later, Kafka 4.x's sampling)."""
    harness = Harness(config=_config(session_timeout_ms=8000))  # checks every 1,000 ms
    harness.now = 5_350  # between two periodic checks
    handle = object()
    harness.request(_registration(5), 4, handle)
    epoch = harness.answer(handle).broker_epoch  # type: ignore[union-attr]
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, object())
    registrations = harness.host.controller.cluster.registrations
    assert not registrations[5].fenced
    session_end = 5_350 + 8_000 + 1
    while not registrations[5].fenced:  # the driver wakes at each deadline the host names
        assert harness.deadline_ms is not None and harness.deadline_ms <= session_end
        harness.now = harness.deadline_ms
        harness.step(Tick())
    assert harness.now == session_end


def _two_unfenced_brokers() -> Harness:
    """An active controller with brokers 5 and 6 registered and unfenced, sessions of 800 ms."""
    harness = Harness(config=_config(session_timeout_ms=800))
    for broker in (5, 6):
        handle = object()
        harness.request(_registration(broker), 4, handle)
        epoch = harness.answer(handle).broker_epoch  # type: ignore[union-attr]
        harness.request(_heartbeat(broker, epoch, harness.core.high_watermark - 1), 1, object())
    return harness


def test_a_task_that_runs_again_at_once_waits_for_the_next_turn_of_the_driver() -> None:
    """Fencing expired brokers one after another: the poll that follows the host's own appends
    (``run_tasks=False``) does not fence the next one; the driver's next turn does."""
    harness = _two_unfenced_brokers()
    registrations = harness.host.controller.cluster.registrations
    assert not registrations[5].fenced and not registrations[6].fenced
    harness.now += 1000  # both sessions expired
    harness.step(Tick())
    assert [registrations[b].fenced for b in (5, 6)].count(True) == 1
    assert harness.deadline_ms == harness.now  # due again at once
    harness.step(Tick())
    assert registrations[5].fenced and registrations[6].fenced


def test_a_task_waits_while_too_many_of_the_controllers_records_are_uncommitted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flow control for the periodic writes: with more than ``MAX_UNCOMMITTED_TASK_RECORDS``
    records in flight the next expired broker waits for them to commit."""
    harness = _two_unfenced_brokers()
    monkeypatch.setattr(periodic_tasks, "MAX_UNCOMMITTED_TASK_RECORDS", 0)
    registrations = harness.host.controller.cluster.registrations
    harness.hold_flush = True
    harness.now += 1000  # both sessions expired
    harness.step(Tick())
    assert [registrations[b].fenced for b in (5, 6)].count(True) == 1
    for _ in range(3):  # the first fence is not committed: the second waits
        harness.now += 10
        harness.step(Tick())
    assert [registrations[b].fenced for b in (5, 6)].count(True) == 1
    harness.log.flush()  # the first fence commits (the ticks took over the pending flush)
    harness.step(FlushCompleted())
    harness.now += 10
    harness.step(Tick())
    assert registrations[5].fenced and registrations[6].fenced


def test_poll_names_the_earliest_task_deadline_and_none_off_the_leader() -> None:
    harness = Harness(config=_config(session_timeout_ms=8000, max_idle_interval_ms=0))
    assert harness.deadline_ms == harness.now + 1000  # session checks every 8000 / 8 ms
    harness.step(Resign())
    assert harness.deadline_ms is None


# ---------------------------------------------------------------------- snapshots


def test_a_snapshot_is_taken_when_the_replayed_bytes_reach_the_trigger() -> None:
    harness = Harness(config=_config(snapshot_max_bytes=1, snapshot_max_interval_ms=0))
    assert harness.snapshots, "the bootstrap batch alone passes a 1-byte trigger"
    snapshot_id, data = harness.snapshots[-1]
    last = [b for b in harness.committed if not b.is_control][-1]
    assert snapshot_id == OffsetAndEpoch(last.last_offset + 1, last.epoch)
    content = read_snapshot_content(data)
    values = content.data_records()
    assert [decode_record(v)[0] for v in values if v is not None][0] == BOOTSTRAP[0][0]
    fresh = QuorumController(_config(), bootstrap=BOOTSTRAP, raft=harness.core, now_ms=0, rng=random.Random(0))
    fresh.load_snapshot(harness.now, snapshot_id, values)
    assert fresh.replayed_offset == snapshot_id.offset
    assert fresh.controller.feature_levels == harness.host.controller.feature_levels


def test_no_snapshot_without_a_trigger_or_a_metadata_version() -> None:
    quiet = Harness(config=_config(snapshot_max_bytes=1 << 30, snapshot_max_interval_ms=0))
    assert not quiet.snapshots
    early = Harness(config=_config(snapshot_max_bytes=1), hold_flush=True)
    assert not early.snapshots  # nothing replayed yet


# ---------------------------------------------------------------------- UnregisterController

def test_a_snapshot_loads_a_slice_per_poll_and_what_arrives_meanwhile_waits_for_it() -> None:
    harness = Harness(config=_config(snapshot_max_bytes=1, snapshot_max_interval_ms=0))
    for broker_id in (5, 6, 7):
        harness.request(_registration(broker_id), 4, object())
    snapshot_id, data = harness.snapshots[-1]
    values = read_snapshot_content(data).data_records()
    assert snapshot_id.offset == harness.host.replayed_offset and len(values) == 4  # features, 3 brokers
    harness.request(_registration(8), 4, object())
    after = [b for b in harness.committed if b.base_offset >= snapshot_id.offset]
    assert after, "broker 8's batch committed after the snapshot"

    fresh = QuorumController(_config(), bootstrap=BOOTSTRAP, raft=harness.core, now_ms=0, rng=random.Random(0))
    fresh.load_records_per_poll = 1
    fresh.load_snapshot(harness.now, snapshot_id, values)
    assert fresh.loading and fresh.replayed_offset == 0
    for batch in after:
        fresh.commit(harness.now, batch)  # waits for the whole snapshot
    waiting = object()
    fresh.request(harness.now, ControllerRequest(waiting, _registration(9), 4, "CONTROLLER", harness.now))
    partial = dict(fresh.controller.cluster.registrations)
    for _ in range(3):  # the polls that follow raft messages and requests leave the load alone
        assert fresh.poll(harness.now, load=False).next_deadline_ms == harness.now
    assert fresh.loading and fresh.controller.cluster.registrations == partial
    polls, loaded = 0, []
    while fresh.loading:
        assert fresh.controller.active_epoch is None, "no claim on a partial image"
        assert 8 not in fresh.controller.cluster.registrations
        out = fresh.poll(harness.now)
        assert not out.replies or not fresh.loading
        loaded += [out.loaded] if out.loaded is not None else []
        polls += 1
        assert polls <= len(values), "each poll replays a slice"
        if fresh.loading:
            assert out.next_deadline_ms == harness.now
    assert polls >= len(values) - 1 and loaded == [snapshot_id]
    assert fresh.replayed_offset == after[-1].last_offset + 1
    assert set(fresh.controller.cluster.registrations) == {5, 6, 7, 8}
    assert fresh.controller.cluster.registrations == harness.host.controller.cluster.registrations
    answered = [response for handle, response in out.replies if handle is waiting]
    assert [r.error_code for r in answered] == [Errors.NOT_CONTROLLER]  # type: ignore[attr-defined]
    assert fresh.controller.active_epoch == harness.core.epoch  # claimed once whole



def _controller_registration(controller_id: int) -> ControllerRegistrationRequest:
    return ControllerRegistrationRequest(
        controller_id=controller_id, incarnation_id=Uuid.from_longs(controller_id, 1), zk_migration_ready=False,
        listeners=[ControllerListener(name="CONTROLLER", host="c", port=9093, security_protocol=0)], features=[],
    )


def test_unregister_controller_removes_a_registration_from_metadata_version_4_4_iv2_on() -> None:
    old = Harness()
    refused = object()
    old.request(UnregisterControllerRequest(controller_id=1), 0, refused)
    answer = old.answer(refused)
    assert answer is not None and answer.error_code == Errors.UNSUPPORTED_VERSION
    assert answer.error_message == "The current MetadataVersion is too old to support controller unregistration."

    harness = Harness(bootstrap=[(FeatureLevelRecord(name="metadata.version", feature_level=33), 0)])
    harness.request(_controller_registration(9), 0, object())
    assert 9 in harness.host.controller.controllers
    done, again, never = object(), object(), object()
    harness.request(UnregisterControllerRequest(controller_id=9), 0, done)
    harness.request(UnregisterControllerRequest(controller_id=9), 0, again)
    harness.request(UnregisterControllerRequest(controller_id=42), 0, never)
    assert harness.answer(done) == UnregisterControllerResponse(error_code=Errors.NONE, error_message="")
    assert 9 not in harness.host.controller.controllers
    assert isinstance(harness.records()[-1], UnregisterControllerRecord)
    for handle, controller_id in ((again, 9), (never, 42)):
        assert harness.answer(handle) == UnregisterControllerResponse(
            error_code=Errors.CONTROLLER_ID_NOT_REGISTERED,
            error_message=f"Controller ID {controller_id} is not currently registered.",
        )


def test_an_unregistration_of_an_unknown_controller_does_not_replay() -> None:
    harness = Harness()
    with pytest.raises(ReplayError, match="no controller registration found"):
        harness.host.controller.replay(encode_record(UnregisterControllerRecord(controller_id=5), 0))


def test_with_an_authorizer_only_super_users_pass_before_the_acls_are_loaded() -> None:
    """Kafka's controller refuses everyone else with AuthorizerNotReadyException
    (UNKNOWN_SERVER_ERROR) until its metadata has caught up to the high watermark; ANONYMOUS,
    allowed by default once loaded, is refused before."""
    node = Harness(config=_config(authorizer=True, allow_everyone_if_no_acl_found=True, super_users=frozenset({"User:admin"})))
    node.host.authorizer.loaded = False  # as on a node still replaying
    describe = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                   principal_filter=None, host_filter=None, operation=1, permission_type=1)
    node.host.request(node.now, ControllerRequest("early", describe, 3, principal="User:ANONYMOUS"))
    node.host.request(node.now, ControllerRequest("admin", describe, 3, principal="User:admin"))
    node.step()
    assert node.answer("early").error_code == Errors.UNKNOWN_SERVER_ERROR  # type: ignore[union-attr]
    assert node.answer("admin").error_code == Errors.NONE  # type: ignore[union-attr]
    node.host.request(node.now, ControllerRequest("later", describe, 3, principal="User:ANONYMOUS"))
    node.step()
    assert node.host.authorizer.loaded
    assert node.answer("later").error_code == Errors.NONE  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- failpoints


def _unfenced_broker(harness: Harness) -> int:
    registered = object()
    harness.request(_registration(5), 4, registered)
    epoch: int = harness.answer(registered).broker_epoch  # type: ignore[union-attr]
    return epoch


def test_an_armed_heartbeat_error_answers_that_error_and_clearing_restores_the_answer() -> None:
    harness = _active()
    epoch = _unfenced_broker(harness)
    harness.host.failpoints.arm("controller.heartbeat", parse_action("error(41)"))
    refused = object()
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, refused)
    assert harness.answer(refused).error_code == Errors.NOT_CONTROLLER  # type: ignore[union-attr]
    other = object()
    harness.request(_registration(6), 4, other)  # another RPC is not at that point
    assert harness.answer(other).error_code == 0  # type: ignore[union-attr]
    harness.host.failpoints.clear()
    answered = object()
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, answered)
    assert harness.answer(answered).error_code == 0  # type: ignore[union-attr]


def test_a_dropped_heartbeat_gets_no_answer_and_counts_as_no_contact() -> None:
    harness = Harness(config=_config(session_timeout_ms=800))
    epoch = _unfenced_broker(harness)
    harness.host.failpoints.arm("controller.heartbeat", parse_action("drop"))
    harness.now += 700
    dropped = object()
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, dropped)
    harness.advance(1)
    assert harness.answer(dropped) is None
    sessions = harness.host.controller.cluster.heartbeats
    assert sessions is not None
    # 1,200 ms after registering: a heartbeat that arrived would have kept the session alive
    assert not sessions.has_valid_session(5, epoch, harness.now + 500)
    assert harness.host.failpoints.fired["controller.heartbeat"] == 1


def test_a_delayed_heartbeat_is_held_and_let_in_by_deadline() -> None:
    harness = _active()
    epoch = _unfenced_broker(harness)
    harness.host.failpoints.arm("controller.heartbeat", parse_action("delay(300)"))
    held = object()
    start = harness.now
    harness.request(_heartbeat(5, epoch, harness.core.high_watermark - 1), 1, held)
    assert harness.answer(held) is None
    assert harness.deadline_ms is not None and harness.deadline_ms <= start + 300
    harness.advance(299)
    assert harness.answer(held) is None
    harness.advance(1)
    assert harness.answer(held).error_code == 0  # type: ignore[union-attr]


def test_a_halt_at_a_point_stops_the_host_with_failpoint_halt() -> None:
    harness = _active()
    harness.host.failpoints.arm("controller.request", parse_action("halt"))
    with pytest.raises(FailpointHalt):
        harness.host.request(harness.now, ControllerRequest(object(), _registration(5), 4, "CONTROLLER", harness.now))


def test_an_append_refused_at_a_failpoint_answers_the_write_not_controller_and_clearing_restores_it() -> None:
    harness = _active()
    harness.core.failpoints.arm("raft.append", parse_action("error(6)"))
    refused = object()
    harness.request(_registration(5), 4, refused)
    assert harness.answer(refused).error_code == Errors.NOT_CONTROLLER  # type: ignore[union-attr]
    assert 5 not in harness.host.controller.cluster.registrations  # back to the committed image
    harness.core.failpoints.clear()
    harness.advance(1)
    answered = object()
    harness.request(_registration(5), 4, answered)
    assert harness.answer(answered).error_code == Errors.NONE  # type: ignore[union-attr]
    assert 5 in harness.host.controller.cluster.registrations


def test_a_delayed_commit_is_replayed_late_and_in_order_with_the_batches_behind_it() -> None:
    harness = _active()
    harness.host.failpoints.arm("controller.commit", parse_action("delay(200)"))
    first, second = object(), object()
    harness.request(_registration(5), 4, first)
    harness.host.failpoints.clear()  # the batch after it waits behind it all the same
    harness.advance(50)
    harness.request(_registration(6), 4, second)
    assert harness.answer(first) is None and harness.answer(second) is None
    assert harness.deadline_ms is not None and harness.deadline_ms <= 200
    replayed = harness.host.replayed_offset
    harness.advance(149)
    assert harness.answer(first) is None and harness.host.replayed_offset == replayed
    harness.advance(1)
    assert harness.answer(first).error_code == 0 and harness.answer(second).error_code == 0  # type: ignore[union-attr]
    assert harness.host.replayed_offset > replayed
