"""Broker registration, heartbeats, fencing and unregistration at the controller
(``server.controller.cluster``, Kafka 4.4's ``ClusterControlManager`` and
``BrokerHeartbeatManager``)."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.metadata import encode_record
from server.controller.cluster import ClusterControl, ReplayError, register_broker_record_version
from server.controller.controller import QuorumController
from server.controller.errors import ApiError

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
MV = 21  # 3.9-IV0
SESSION_MS = 9000
DIR_A = Uuid.from_longs(11, 111)
DIR_B = Uuid.from_longs(22, 222)


def _request(broker_id: int = 1, incarnation: Uuid | None = None, **overrides: object) -> BrokerRegistrationRequest:
    fields: dict[str, object] = dict(
        broker_id=broker_id,
        cluster_id=CLUSTER,
        incarnation_id=incarnation or Uuid.from_longs(broker_id, 1),
        listeners=[Listener(name="PLAINTEXT", host="localhost", port=9092 + broker_id, security_protocol=0)],
        features=[
            Feature(name="metadata.version", min_supported_version=1, max_supported_version=21),
            Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
        ],
        rack=None,
        log_dirs=[Uuid.from_longs(100 + broker_id, broker_id)],
    )
    fields.update(overrides)
    return BrokerRegistrationRequest(**fields)  # type: ignore[arg-type]


def _heartbeat(broker_id: int, epoch: int, offset: int, **overrides: object) -> BrokerHeartbeatRequest:
    fields: dict[str, object] = dict(
        broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=offset, want_fence=False, want_shut_down=False
    )
    fields.update(overrides)
    return BrokerHeartbeatRequest(**fields)  # type: ignore[arg-type]


def _active(now_ms: int = 0) -> ClusterControl:
    cluster = ClusterControl(CLUSTER, SESSION_MS)
    cluster.activate(now_ms)
    return cluster


def _register(
    cluster: ClusterControl, request: BrokerRegistrationRequest, epoch: int, *, now_ms: int = 0, mv: int = MV
) -> int:
    """Register and replay the record at offset ``epoch`` (as the batch would land)."""
    records, answered = cluster.register_broker(
        request, new_epoch=epoch, finalized={"metadata.version": mv, "kraft.version": 1}, metadata_version=mv, now_ms=now_ms
    )
    for record, _ in records:
        cluster.replay(record, epoch)
    return answered


def _apply(cluster: ClusterControl, records: list[tuple[object, int]], offset: int = 0) -> None:
    for record, _ in records:
        cluster.replay(record, offset)  # type: ignore[arg-type]


def test_a_new_broker_gets_the_offset_of_its_batch_as_epoch_and_starts_fenced() -> None:
    cluster = _active()
    records, epoch = cluster.register_broker(
        _request(1), new_epoch=42, finalized={"metadata.version": MV}, metadata_version=MV, now_ms=0
    )
    ((record, version),) = records
    assert isinstance(record, RegisterBrokerRecord) and epoch == 42
    assert (record.broker_id, record.broker_epoch, record.fenced, record.in_controlled_shutdown) == (1, 42, True, False)
    assert version == 3 and record.log_dirs == [Uuid.from_longs(101, 1)]
    assert [(e.name, e.port) for e in record.end_points] == [("PLAINTEXT", 9093)]
    cluster.replay(record, 42)
    registration = cluster.registrations[1]
    assert registration.fenced and registration.epoch == 42 and cluster.register_offsets[1] == 42
    assert registration.features["metadata.version"] == (1, 21)


@pytest.mark.parametrize(("level", "version"), [(1, 0), (6, 0), (7, 1), (8, 2), (16, 2), (17, 3), (29, 3), (30, 4), (33, 4)])
def test_register_broker_record_version_follows_metadata_version(level: int, version: int) -> None:
    assert register_broker_record_version(level) == version


def test_below_directory_assignment_the_record_carries_no_log_dirs() -> None:
    cluster = _active()
    records, _ = cluster.register_broker(
        _request(1, log_dirs=[]), new_epoch=5, finalized={"metadata.version": 14}, metadata_version=14, now_ms=0
    )
    ((record, version),) = records
    assert version == 2 and record.log_dirs == []  # type: ignore[attr-defined]


def test_the_same_incarnation_again_keeps_its_epoch_and_state() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 10)
    _apply(cluster, cluster.process_heartbeat(_heartbeat(1, epoch, 10), metadata_version=MV)[0])
    assert not cluster.registrations[1].fenced
    records, again = cluster.register_broker(
        _request(1), new_epoch=99, finalized={"metadata.version": MV}, metadata_version=MV, now_ms=10
    )
    assert again == 10 and records[0][0].fenced is False  # type: ignore[attr-defined]


def test_another_incarnation_waits_for_the_old_session_to_expire() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 10)
    assert cluster.track_heartbeat(1, epoch, 1000)
    restarted = _request(1, incarnation=Uuid.from_longs(1, 2))
    with pytest.raises(ApiError) as refused:
        cluster.register_broker(restarted, new_epoch=50, finalized={"metadata.version": MV}, metadata_version=MV, now_ms=1000 + SESSION_MS)
    assert refused.value.error == Errors.DUPLICATE_BROKER_REGISTRATION
    assert _register(cluster, restarted, 50, now_ms=1000 + SESSION_MS + 1) == 50
    assert cluster.registrations[1].fenced and cluster.registrations[1].incarnation_id == Uuid.from_longs(1, 2)


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"cluster_id": "another"}, Errors.INCONSISTENT_CLUSTER_ID),
        ({"is_migrating_zk_broker": True}, Errors.BROKER_ID_NOT_REGISTERED),
        ({"log_dirs": []}, Errors.INVALID_REGISTRATION),
        ({"log_dirs": [Uuid.from_longs(0, 2)]}, Errors.INVALID_REGISTRATION),  # LOST is reserved
        ({"log_dirs": [DIR_A, DIR_A]}, Errors.INVALID_REGISTRATION),
        ({"features": [Feature(name="metadata.version", min_supported_version=22, max_supported_version=30)]}, Errors.UNSUPPORTED_VERSION),
        ({"features": [Feature(name="kraft.version", min_supported_version=0, max_supported_version=1)]}, Errors.INVALID_REGISTRATION),
        # kraft.version 1 is finalized and the broker does not list it
        ({"features": [Feature(name="metadata.version", min_supported_version=1, max_supported_version=21)]}, Errors.UNSUPPORTED_VERSION),
    ],
)
def test_registrations_kafka_refuses(overrides: dict[str, object], error: Errors) -> None:
    cluster = _active()
    with pytest.raises(ApiError) as refused:
        cluster.register_broker(
            _request(1, **overrides), new_epoch=5, finalized={"metadata.version": MV, "kraft.version": 1}, metadata_version=MV, now_ms=0
        )
    assert refused.value.error == error


def test_a_directory_registered_by_another_broker_is_refused() -> None:
    cluster = _active()
    _register(cluster, _request(1, log_dirs=[DIR_A]), 5)
    with pytest.raises(ApiError, match="Broker 1 is already registered with directory") as refused:
        _register(cluster, _request(2, log_dirs=[DIR_B, DIR_A]), 6)
    assert refused.value.error == Errors.INVALID_REGISTRATION


def test_writes_need_an_active_controller() -> None:
    cluster = ClusterControl(CLUSTER, SESSION_MS)
    with pytest.raises(RuntimeError, match="not active"):
        cluster.register_broker(_request(1), new_epoch=1, finalized={"metadata.version": MV}, metadata_version=MV, now_ms=0)
    assert not cluster.track_heartbeat(1, 1, 0)


def test_a_heartbeat_before_registration_or_at_another_epoch_is_stale() -> None:
    cluster = _active()
    with pytest.raises(ApiError, match="before registration") as stale:
        cluster.process_heartbeat(_heartbeat(1, 5, 0), metadata_version=MV)
    assert stale.value.error == Errors.STALE_BROKER_EPOCH
    epoch = _register(cluster, _request(1), 5)
    with pytest.raises(ApiError, match=f"Expected broker epoch {epoch}, but got broker epoch 4") as stale:
        cluster.process_heartbeat(_heartbeat(1, 4, 0), metadata_version=MV)
    assert stale.value.error == Errors.STALE_BROKER_EPOCH


def test_a_broker_is_unfenced_once_caught_up_with_its_registration_and_asking() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 7)
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 6), metadata_version=MV)
    assert records == [] and (reply.is_caught_up, reply.is_fenced, reply.should_shut_down) == (False, True, False)
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 7, want_fence=True), metadata_version=MV)
    assert records == [] and reply.is_caught_up and reply.is_fenced
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 7), metadata_version=MV)
    assert records == [(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=-1), 0)]
    assert reply.is_caught_up and not reply.is_fenced
    _apply(cluster, records, 8)
    assert not cluster.registrations[1].fenced
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 9), metadata_version=MV)
    assert records == [] and not reply.is_fenced


def test_before_3_3_iv2_fencing_uses_the_old_records() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1, log_dirs=[]), 3, mv=5)
    records, _ = cluster.process_heartbeat(_heartbeat(1, epoch, 3), metadata_version=5)
    assert records == [(UnfenceBrokerRecord(id=1, epoch=epoch), 0)]
    _apply(cluster, records)
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 4, want_fence=True), metadata_version=5)
    assert records == [(FenceBrokerRecord(id=1, epoch=epoch), 0)] and reply.is_fenced
    _apply(cluster, records)
    assert cluster.registrations[1].fenced


def test_an_unfenced_broker_leading_nothing_shuts_down_at_once() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    _apply(cluster, cluster.process_heartbeat(_heartbeat(1, epoch, 3), metadata_version=MV)[0])
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 4, want_shut_down=True), metadata_version=MV)
    assert records == [(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=1), 0)]
    assert reply.is_fenced and reply.should_shut_down


def test_an_expired_session_fences_its_broker_once() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    cluster.track_heartbeat(1, epoch, 100)
    _apply(cluster, cluster.process_heartbeat(_heartbeat(1, epoch, 3), metadata_version=MV)[0])
    assert cluster.maybe_fence_stale_broker(100 + SESSION_MS, metadata_version=MV) is None
    records = cluster.maybe_fence_stale_broker(101 + SESSION_MS, metadata_version=MV)
    assert records == [(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=1), 0)]
    _apply(cluster, records)
    assert cluster.registrations[1].fenced
    assert cluster.maybe_fence_stale_broker(200 + SESSION_MS, metadata_version=MV) is None
    # it heartbeats again with the same epoch: unfenced again, no registration needed
    cluster.track_heartbeat(1, epoch, 300 + SESSION_MS)
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 10), metadata_version=MV)
    assert records[0][0].fenced == -1 and not reply.is_fenced  # type: ignore[attr-defined]


def test_a_session_of_an_old_epoch_expires_without_records() -> None:
    cluster = _active()
    cluster.track_heartbeat(1, 77, 0)  # a heartbeat that named a stale epoch
    epoch = _register(cluster, _request(1), 3)
    assert epoch != 77
    assert cluster.maybe_fence_stale_broker(SESSION_MS + 1, metadata_version=MV) == []


def test_activation_gives_every_unfenced_broker_a_fresh_session() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    _apply(cluster, cluster.process_heartbeat(_heartbeat(1, epoch, 3), metadata_version=MV)[0])
    _register(cluster, _request(2), 4)  # stays fenced: no session
    cluster.deactivate()
    cluster.activate(50_000)
    assert cluster.heartbeats is not None
    assert cluster.heartbeats.has_valid_session(1, epoch, 50_000 + SESSION_MS)
    assert not cluster.heartbeats.has_valid_session(2, 4, 50_000)
    assert cluster.maybe_fence_stale_broker(50_000 + SESSION_MS + 1, metadata_version=MV) is not None


def test_offline_and_cordoned_log_dirs_are_recorded() -> None:
    cluster = _active()
    features = [
        Feature(name="metadata.version", min_supported_version=7, max_supported_version=33),
        Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
    ]
    epoch = _register(cluster, _request(1, log_dirs=[DIR_A, DIR_B], features=features), 3, mv=30)
    records, _ = cluster.process_heartbeat(
        _heartbeat(1, epoch, 3, offline_log_dirs=[DIR_B], cordoned_log_dirs=[]), metadata_version=30
    )
    assert [(type(r).__name__, v) for r, v in records] == [
        ("BrokerRegistrationChangeRecord", 0),
        ("BrokerRegistrationChangeRecord", 2),
        ("BrokerRegistrationChangeRecord", 3),
    ]
    assert records[1][0].log_dirs == [DIR_A] and records[2][0].cordoned_log_dirs == []  # type: ignore[attr-defined]
    _apply(cluster, records)
    registration = cluster.registrations[1]
    assert registration.log_dirs == (DIR_A,) and registration.cordoned_log_dirs == () and not registration.fenced
    # the same cordoned list again changes nothing
    records, _ = cluster.process_heartbeat(_heartbeat(1, epoch, 5, cordoned_log_dirs=[]), metadata_version=30)
    assert records == []


def test_unregistration() -> None:
    cluster = _active()
    with pytest.raises(ApiError, match="Broker ID 1 is not currently registered") as refused:
        cluster.unregister_broker(1)
    assert refused.value.error == Errors.BROKER_ID_NOT_REGISTERED
    epoch = _register(cluster, _request(1, log_dirs=[DIR_A]), 3)
    records = cluster.unregister_broker(1)
    assert records == [(UnregisterBrokerRecord(broker_id=1, broker_epoch=epoch), 0)]
    _apply(cluster, records)
    assert 1 not in cluster.registrations and 1 not in cluster.register_offsets
    _register(cluster, _request(2, log_dirs=[DIR_A]), 9)  # its directory is free again


def test_records_that_name_no_registration_are_replay_errors() -> None:
    cluster = ClusterControl(CLUSTER, SESSION_MS)
    with pytest.raises(ReplayError, match="no broker registration found"):
        cluster.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, fenced=-1), 0)
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=5), 5)
    with pytest.raises(ReplayError, match="with that epoch"):
        cluster.replay(UnregisterBrokerRecord(broker_id=1, broker_epoch=4), 6)
    with pytest.raises(ReplayError, match="unknown value"):
        cluster.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, fenced=3), 6)


def test_the_controller_replays_broker_records_at_their_offsets() -> None:
    controller = QuorumController(bootstrap=(), cluster_id=CLUSTER)
    controller.replay(encode_record(RegisterBrokerRecord(broker_id=4, broker_epoch=12), 3), 12)
    controller.replay(encode_record(BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=12, fenced=-1), 0), 13)
    assert controller.cluster.register_offsets == {4: 12} and not controller.cluster.registrations[4].fenced
    controller.reset([encode_record(RegisterBrokerRecord(broker_id=5, broker_epoch=20), 3)], 30)
    assert controller.cluster.register_offsets == {5: 30} and set(controller.cluster.registrations) == {5}
