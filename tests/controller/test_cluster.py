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
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.metadata import encode_record
from server.controller.cluster import (
    BrokerControlState,
    BrokerHeartbeats,
    BrokerRegistration,
    ClusterControlManager,
    ReplayError,
    register_broker_record_version,
)
from server.controller.controller import ControlManagers
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


def _active(now_ms: int = 0) -> ClusterControlManager:
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    cluster.activate(now_ms)
    return cluster


def _register(
    cluster: ClusterControlManager, request: BrokerRegistrationRequest, epoch: int, *, now_ms: int = 0, mv: int = MV
) -> int:
    """Register and replay the record at offset ``epoch`` (as the batch would land)."""
    records, answered = cluster.register_broker(
        request, new_epoch=epoch, finalized={"metadata.version": mv, "kraft.version": 1}, metadata_version=mv, now_ms=now_ms
    )
    for record, _ in records:
        cluster.replay(record, epoch)
    return answered


def _apply(cluster: ClusterControlManager, records: list[tuple[object, int]], offset: int = 0) -> None:
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
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
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
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    with pytest.raises(ReplayError, match="no broker registration found"):
        cluster.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, fenced=-1), 0)
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=5), 5)
    with pytest.raises(ReplayError, match="with that epoch"):
        cluster.replay(UnregisterBrokerRecord(broker_id=1, broker_epoch=4), 6)
    with pytest.raises(ReplayError, match="unknown value"):
        cluster.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, fenced=3), 6)


def test_the_controller_replays_broker_records_at_their_offsets() -> None:
    controller = ControlManagers(bootstrap=(), cluster_id=CLUSTER)
    controller.replay(encode_record(RegisterBrokerRecord(broker_id=4, broker_epoch=12), 3), 12)
    controller.replay(encode_record(BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=12, fenced=-1), 0), 13)
    assert controller.cluster.register_offsets == {4: 12} and not controller.cluster.registrations[4].fenced
    controller.reset([encode_record(RegisterBrokerRecord(broker_id=5, broker_epoch=20), 3)], 30)
    assert controller.cluster.register_offsets == {5: 30} and set(controller.cluster.registrations) == {5}


# ---------------------------------------------------------------------- helpers for the rules below


class _Effects:
    """A PartitionEffects that records which handler ran and answers with one marker record
    per call (a PartitionChangeRecord whose partition id names the handler)."""

    MARKERS = {"removed": 1, "unfenced": 2, "shutdown": 3, "unregistered": 4, "offline": 5}

    def __init__(self, leaderships: bool = False) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.leaderships = leaderships

    def _marker(self, name: str, *args: object) -> list[tuple[object, int]]:
        self.calls.append((name, *args))
        return [(PartitionChangeRecord(partition_id=self.MARKERS[name], topic_id=Uuid.from_longs(7, 7)), 0)]

    def broker_removed(self, broker_id: int) -> list[tuple[object, int]]:
        return self._marker("removed", broker_id)

    def broker_unfenced(self, broker_id: int) -> list[tuple[object, int]]:
        return self._marker("unfenced", broker_id)

    def broker_shutdown(self, broker_id: int, clean: bool) -> list[tuple[object, int]]:
        return self._marker("shutdown", broker_id, clean)

    def broker_unregistered(self, broker_id: int) -> list[tuple[object, int]]:
        return self._marker("unregistered", broker_id)

    def directory_offline(self, broker_id: int, directory: Uuid) -> list[tuple[object, int]]:
        return self._marker("offline", broker_id, directory)

    def has_leaderships(self, broker_id: int) -> bool:
        self.calls.append(("leaderships", broker_id))
        return self.leaderships


def _kinds(records: list[tuple[object, int]]) -> list[str]:
    """Each record as its type name, markers as the handler that made them."""
    names = {v: k for k, v in _Effects.MARKERS.items()}
    return [
        f"effects:{names[r.partition_id]}" if isinstance(r, PartitionChangeRecord) else type(r).__name__
        for r, _ in records
    ]


def _unfenced(cluster: ClusterControlManager, broker_id: int, epoch: int, *, mv: int = MV) -> None:
    """Unfence a registered broker by a caught-up heartbeat and replay the change."""
    records, reply = cluster.process_heartbeat(_heartbeat(broker_id, epoch, 1 << 40), metadata_version=mv)
    assert not reply.is_fenced
    _apply(cluster, records)


def _refusal(cluster: ClusterControlManager, request: BrokerRegistrationRequest, *, mv: int = MV, now_ms: int = 0, **finalized: int) -> ApiError:
    levels = {"metadata.version": mv, "kraft.version": 1, **{k.replace("_", "."): v for k, v in finalized.items()}}
    with pytest.raises(ApiError) as refused:
        cluster.register_broker(request, new_epoch=100, finalized=levels, metadata_version=mv, now_ms=now_ms)
    return refused.value


# ---------------------------------------------------------------------- registration: refusals


def test_the_cluster_id_is_checked_before_a_duplicate_registration() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 10)
    cluster.track_heartbeat(1, epoch, 0)
    refused = _refusal(cluster, _request(1, incarnation=Uuid.from_longs(1, 9), cluster_id="other"))
    assert refused.error == Errors.INCONSISTENT_CLUSTER_ID
    assert refused.message == f"Expected cluster ID {CLUSTER}, but got cluster ID other"


def test_a_duplicate_registration_names_the_session_it_waits_for() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 10)
    cluster.track_heartbeat(1, epoch, 500)
    refused = _refusal(cluster, _request(1, incarnation=Uuid.from_longs(1, 9)), now_ms=600)
    assert refused.error == Errors.DUPLICATE_BROKER_REGISTRATION
    assert refused.message is not None and refused.message.startswith("Another broker is registered with that broker id.")
    assert "expires the broker's session" in refused.message


def test_a_fenced_incarnation_that_still_heartbeats_holds_its_session() -> None:
    # 4.4 asks the heartbeat tracker alone: a session is a recent contact, fenced or not
    cluster = _active()
    epoch = _register(cluster, _request(1), 10)
    assert cluster.registrations[1].fenced
    cluster.track_heartbeat(1, epoch, 1000)
    refused = _refusal(cluster, _request(1, incarnation=Uuid.from_longs(1, 9)), now_ms=1000 + SESSION_MS)
    assert refused.error == Errors.DUPLICATE_BROKER_REGISTRATION


def test_an_incarnation_never_heard_from_has_no_session_to_wait_for() -> None:
    cluster = _active()
    _register(cluster, _request(1), 10)
    restarted = _request(1, incarnation=Uuid.from_longs(1, 9))
    assert _register(cluster, restarted, 20) == 20
    assert cluster.registrations[1].incarnation_id == Uuid.from_longs(1, 9) and cluster.register_offsets[1] == 20


def test_a_contact_at_an_older_epoch_is_not_the_registration_s_session() -> None:
    cluster = _active()
    cluster.track_heartbeat(1, 3, 0)  # a heartbeat of an incarnation before this registration
    _register(cluster, _request(1), 10)
    assert _register(cluster, _request(1, incarnation=Uuid.from_longs(1, 9)), 20, now_ms=1) == 20


def test_a_duplicate_is_refused_before_a_zookeeper_broker() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 10)
    cluster.track_heartbeat(1, epoch, 0)
    refused = _refusal(cluster, _request(1, incarnation=Uuid.from_longs(1, 9), is_migrating_zk_broker=True))
    assert refused.error == Errors.DUPLICATE_BROKER_REGISTRATION
    zk = _refusal(cluster, _request(2, is_migrating_zk_broker=True))
    assert (zk.error, zk.message) == (Errors.BROKER_ID_NOT_REGISTERED, "Controller does not support registering ZK brokers.")


@pytest.mark.parametrize(
    ("log_dirs", "message"),
    [
        ([], "No directories specified in request"),
        ([Uuid.from_longs(0, 0)], "Reserved directory ID in request"),  # MIGRATING
        ([Uuid.from_longs(0, 1)], "Reserved directory ID in request"),  # UNASSIGNED
        ([DIR_A, Uuid.from_longs(0, 99)], "Reserved directory ID in request"),
        ([DIR_A, DIR_B, DIR_A], "Duplicate directory ID in request"),
    ],
)
def test_log_directory_refusals_from_3_7_iv2(log_dirs: list[Uuid], message: str) -> None:
    refused = _refusal(_active(), _request(1, log_dirs=log_dirs), mv=17)
    assert (refused.error, refused.message) == (Errors.INVALID_REGISTRATION, message)


@pytest.mark.parametrize("directory", [Uuid.from_longs(0, 100), Uuid.from_longs(1, 0), Uuid.from_longs(-1, 5)])
def test_only_ids_with_a_zero_high_half_below_100_are_reserved(directory: Uuid) -> None:
    cluster = _active()
    records, _ = cluster.register_broker(
        _request(1, log_dirs=[directory]), new_epoch=5, finalized={"metadata.version": 17}, metadata_version=17, now_ms=0
    )
    assert records[-1][0].log_dirs == [directory]  # type: ignore[attr-defined]


def test_below_3_7_iv2_log_directories_are_not_checked_nor_recorded() -> None:
    cluster = _active()
    bad = _request(1, log_dirs=[Uuid.from_longs(0, 1), Uuid.from_longs(0, 1)])
    records, _ = cluster.register_broker(bad, new_epoch=5, finalized={"metadata.version": 16}, metadata_version=16, now_ms=0)
    ((record, version),) = records
    assert version == 2 and record.log_dirs == []  # type: ignore[attr-defined]
    cluster.replay(record, 5)
    assert cluster.directory_to_broker == {} and cluster.registrations[1].log_dirs == ()


def test_a_broker_may_register_again_with_its_own_directories() -> None:
    cluster = _active()
    _register(cluster, _request(1, log_dirs=[DIR_A]), 5)
    assert _register(cluster, _request(1, incarnation=Uuid.from_longs(1, 9), log_dirs=[DIR_B, DIR_A]), 9) == 9
    assert cluster.directory_to_broker == {DIR_A: 1, DIR_B: 1}


def test_log_directories_are_checked_before_features() -> None:
    bad_both = _request(
        1, log_dirs=[], features=[Feature(name="metadata.version", min_supported_version=30, max_supported_version=30)]
    )
    assert _refusal(_active(), bad_both).error == Errors.INVALID_REGISTRATION


def test_an_unsupported_finalized_level_is_worded_as_kafka_words_it() -> None:
    request = _request(1, features=[
        Feature(name="metadata.version", min_supported_version=1, max_supported_version=20),
        Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
    ])
    refused = _refusal(_active(), request)
    assert refused.error == Errors.UNSUPPORTED_VERSION
    assert refused.message == (
        "Unable to register because the broker does not support finalized version 21 of metadata.version. "
        "The broker wants a version between 1 and 20, inclusive."
    )


def test_a_listed_feature_that_is_not_finalized_must_accept_level_0() -> None:
    wants_group = [
        Feature(name="metadata.version", min_supported_version=1, max_supported_version=21),
        Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
        Feature(name="group.version", min_supported_version=1, max_supported_version=1),
    ]
    refused = _refusal(_active(), _request(1, features=wants_group))
    assert refused.error == Errors.UNSUPPORTED_VERSION and "finalized version 0 of group.version" in (refused.message or "")
    wants_group[2] = Feature(name="group.version", min_supported_version=0, max_supported_version=1)
    assert _register(_active(), _request(1, features=wants_group), 5) == 5


def test_a_finalized_feature_the_broker_does_not_list_is_checked_as_0_to_0() -> None:
    refused = _refusal(_active(), _request(1), group_version=1)
    assert refused.error == Errors.UNSUPPORTED_VERSION
    assert refused.message == (
        "Unable to register because the broker does not support finalized version 1 of group.version. "
        "The broker wants a version between 0 and 0, inclusive."
    )
    # a feature finalized at level 0 is as good as not finalized
    cluster = _active()
    records, _ = cluster.register_broker(
        _request(1), new_epoch=5, finalized={"metadata.version": MV, "kraft.version": 1, "group.version": 0},
        metadata_version=MV, now_ms=0,
    )
    assert len(records) == 1


# ---------------------------------------------------------------------- registration: the record


def test_the_record_copies_the_request_s_listeners_features_and_rack() -> None:
    cluster = _active()
    request = _request(
        3,
        rack="rack-b",
        listeners=[
            Listener(name="PLAINTEXT", host="h1", port=9092, security_protocol=0),
            Listener(name="SSL", host="h1", port=9093, security_protocol=1),
        ],
        features=[
            Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
            Feature(name="metadata.version", min_supported_version=7, max_supported_version=21),
        ],
        incarnation=Uuid.from_longs(3, 33),
    )
    records, _ = cluster.register_broker(
        request, new_epoch=8, finalized={"metadata.version": MV, "kraft.version": 1}, metadata_version=MV, now_ms=0
    )
    ((record, _),) = records
    assert isinstance(record, RegisterBrokerRecord)
    assert [(e.name, e.host, e.port, e.security_protocol) for e in record.end_points] == [
        ("PLAINTEXT", "h1", 9092, 0), ("SSL", "h1", 9093, 1)
    ]
    assert [(f.name, f.min_supported_version, f.max_supported_version) for f in record.features] == [
        ("kraft.version", 0, 1), ("metadata.version", 7, 21)
    ]
    assert (record.rack, record.incarnation_id, record.is_migrating_zk_broker) == ("rack-b", Uuid.from_longs(3, 33), False)
    cluster.replay(record, 8)
    registration = cluster.registrations[3]
    assert registration.endpoints == (("PLAINTEXT", "h1", 9092, 0), ("SSL", "h1", 9093, 1))
    assert registration.features == {"kraft.version": (0, 1), "metadata.version": (7, 21)}
    assert registration.rack == "rack-b"


def test_an_amended_registration_keeps_the_controlled_shutdown_state() -> None:
    cluster = _active()
    cluster.replay(
        RegisterBrokerRecord(
            broker_id=1, incarnation_id=Uuid.from_longs(1, 1), broker_epoch=10, fenced=False, in_controlled_shutdown=True
        ),
        10,
    )
    records, epoch = cluster.register_broker(
        _request(1), new_epoch=50, finalized={"metadata.version": MV, "kraft.version": 1}, metadata_version=MV, now_ms=0
    )
    ((record, _),) = records
    assert epoch == 10
    assert (record.broker_epoch, record.fenced, record.in_controlled_shutdown) == (10, False, True)  # type: ignore[attr-defined]


def test_a_new_incarnation_starts_fenced_and_out_of_controlled_shutdown() -> None:
    cluster = _active()
    cluster.replay(
        RegisterBrokerRecord(
            broker_id=1, incarnation_id=Uuid.from_longs(1, 1), broker_epoch=10, fenced=False, in_controlled_shutdown=True
        ),
        10,
    )
    records, epoch = cluster.register_broker(
        _request(1, incarnation=Uuid.from_longs(1, 2)), new_epoch=50,
        finalized={"metadata.version": MV, "kraft.version": 1}, metadata_version=MV, now_ms=0,
    )
    ((record, _),) = records
    assert epoch == 50
    assert (record.broker_epoch, record.fenced, record.in_controlled_shutdown) == (50, True, False)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("request_version", "previous_epoch", "clean"),
    [
        (3, 10, True),  # names the stored epoch: the last incarnation shut down cleanly
        (4, 10, True),
        (3, 9, False),  # another epoch: unclean
        (3, -1, False),  # no clean-shutdown file
        (2, 10, False),  # before v3 the field is not read
    ],
)
def test_a_new_incarnation_tells_whether_its_predecessor_shut_down_cleanly(
    request_version: int, previous_epoch: int, clean: bool
) -> None:
    cluster = _active()
    _register(cluster, _request(1), 10)
    effects = _Effects()
    records, _ = cluster.register_broker(
        _request(1, incarnation=Uuid.from_longs(1, 2), previous_broker_epoch=previous_epoch),
        new_epoch=20, finalized={"metadata.version": MV, "kraft.version": 1}, metadata_version=MV, now_ms=0,
        request_version=request_version, partitions=effects,
    )
    assert effects.calls == [("shutdown", 1, clean)]
    # the predecessor's partition changes come before the new registration
    assert _kinds(records) == ["effects:shutdown", "RegisterBrokerRecord"]


def test_a_first_registration_is_never_a_clean_restart() -> None:
    # no stored epoch (Kafka's -2) can match the request's PreviousBrokerEpoch default of -1
    effects = _Effects()
    _active().register_broker(
        _request(1), new_epoch=5, finalized={"metadata.version": MV, "kraft.version": 1},
        metadata_version=MV, now_ms=0, request_version=4, partitions=effects,
    )
    assert effects.calls == [("shutdown", 1, False)]


def test_the_same_incarnation_again_changes_no_partitions() -> None:
    cluster = _active()
    _register(cluster, _request(1), 10)
    effects = _Effects()
    records, _ = cluster.register_broker(
        _request(1), new_epoch=20, finalized={"metadata.version": MV, "kraft.version": 1}, metadata_version=MV,
        now_ms=0, partitions=effects,
    )
    assert effects.calls == [] and _kinds(records) == ["RegisterBrokerRecord"]


def test_a_new_incarnation_starts_a_fresh_heartbeat_state() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 10)
    _unfenced(cluster, 1, epoch)
    assert cluster.heartbeats is not None
    assert cluster.heartbeats.current_state(1) is BrokerControlState.UNFENCED
    _register(cluster, _request(1, incarnation=Uuid.from_longs(1, 2)), 20)
    state = cluster.heartbeats.states[1]
    assert (state.fenced, state.metadata_offset, state.controlled_shutdown_offset) == (True, -1, -1)


# ---------------------------------------------------------------------- heartbeats


def test_caught_up_means_past_the_registration_record_not_the_epoch() -> None:
    cluster = _active()
    records, epoch = cluster.register_broker(
        _request(1), new_epoch=10, finalized={"metadata.version": MV, "kraft.version": 1}, metadata_version=MV, now_ms=0
    )
    cluster.replay(records[-1][0], 12)  # two cleanup records came first in the batch
    _, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 11), metadata_version=MV)
    assert not reply.is_caught_up and reply.is_fenced
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 12), metadata_version=MV)
    assert reply.is_caught_up and not reply.is_fenced and _kinds(records) == ["BrokerRegistrationChangeRecord"]


def test_unfencing_writes_the_change_before_the_elections_it_allows() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    effects = _Effects()
    records, _ = cluster.process_heartbeat(_heartbeat(1, epoch, 3), metadata_version=MV, partitions=effects)
    assert _kinds(records) == ["BrokerRegistrationChangeRecord", "effects:unfenced"]
    assert effects.calls == [("unfenced", 1)]


def test_fencing_on_request_moves_partitions_before_the_fence() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    _unfenced(cluster, 1, epoch)
    effects = _Effects()
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 5, want_fence=True), metadata_version=MV, partitions=effects)
    assert _kinds(records) == ["effects:removed", "BrokerRegistrationChangeRecord"]
    assert records[1] == (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=1), 0)
    assert (reply.is_fenced, reply.should_shut_down, reply.in_controlled_shutdown) == (True, False, False)


def test_an_unfenced_broker_wanting_fence_and_shutdown_shuts_down_now() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    _unfenced(cluster, 1, epoch)
    effects = _Effects(leaderships=True)
    records, reply = cluster.process_heartbeat(
        _heartbeat(1, epoch, 5, want_fence=True, want_shut_down=True), metadata_version=MV, partitions=effects
    )
    assert _kinds(records) == ["effects:removed", "BrokerRegistrationChangeRecord"]
    assert reply.is_fenced and reply.should_shut_down
    assert ("leaderships", 1) not in effects.calls  # asked only when a shutdown depends on it


def test_a_fenced_broker_asking_to_shut_down_is_fenced_again_and_told_to_stop() -> None:
    # FENCED -> SHUTDOWN_NOW is a change of state: Kafka runs handleBrokerFenced for it
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    effects = _Effects()
    records, reply = cluster.process_heartbeat(
        _heartbeat(1, epoch, 0, want_shut_down=True), metadata_version=MV, partitions=effects
    )
    assert _kinds(records) == ["effects:removed", "BrokerRegistrationChangeRecord"]
    assert reply.is_fenced and reply.should_shut_down and not reply.is_caught_up


def test_a_fenced_broker_that_wants_to_stay_fenced_gets_no_records() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    effects = _Effects()
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 10, want_fence=True), metadata_version=MV, partitions=effects)
    assert records == [] and effects.calls == [] and reply.is_fenced and reply.is_caught_up


def test_a_controlled_shutdown_runs_until_leaderships_are_gone_and_the_others_caught_up() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    other = _register(cluster, _request(2), 4)
    _unfenced(cluster, 1, epoch)
    records, _ = cluster.process_heartbeat(_heartbeat(2, other, 50), metadata_version=MV)
    _apply(cluster, records)
    effects = _Effects(leaderships=True)

    # it asks to shut down while it leads partitions: the change first, then leadership moves
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 60, want_shut_down=True), metadata_version=MV, partitions=effects)
    assert _kinds(records) == ["BrokerRegistrationChangeRecord", "effects:removed"]
    assert records[0] == (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, in_controlled_shutdown=1), 1)
    assert (reply.is_fenced, reply.in_controlled_shutdown, reply.should_shut_down) == (False, True, False)
    _apply(cluster, records[:1])
    cluster.controlled_shutdown_committed(1, 70)
    assert cluster.heartbeats is not None
    assert cluster.heartbeats.current_state(1) is BrokerControlState.CONTROLLED_SHUTDOWN

    # still leading: no new records
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 70, want_shut_down=True), metadata_version=MV, partitions=effects)
    assert records == [] and reply.in_controlled_shutdown and not reply.should_shut_down

    # leads nothing now, but broker 2 has not replayed the shutdown's batch yet
    effects.leaderships = False
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 70, want_shut_down=True), metadata_version=MV, partitions=effects)
    assert records == [] and reply.in_controlled_shutdown and not reply.should_shut_down

    # broker 2 reports offset 70: the shutting-down broker is fenced and told to stop
    cluster.process_heartbeat(_heartbeat(2, other, 70), metadata_version=MV)
    records, reply = cluster.process_heartbeat(_heartbeat(1, epoch, 70, want_shut_down=True), metadata_version=MV, partitions=effects)
    assert _kinds(records) == ["effects:removed", "BrokerRegistrationChangeRecord"]
    assert records[1][0].fenced == 1  # type: ignore[attr-defined]
    assert reply.is_fenced and reply.should_shut_down and not reply.in_controlled_shutdown


def test_entering_controlled_shutdown_again_writes_no_second_change() -> None:
    cluster = _active()
    cluster.replay(
        RegisterBrokerRecord(
            broker_id=1, incarnation_id=Uuid.from_longs(1, 1), broker_epoch=3, fenced=False, in_controlled_shutdown=True
        ),
        3,
    )
    records, reply = cluster.process_heartbeat(
        _heartbeat(1, 3, 3, want_shut_down=True), metadata_version=MV, partitions=_Effects(leaderships=True)
    )
    assert _kinds(records) == ["effects:removed"] and reply.in_controlled_shutdown


def test_before_3_3_iv3_controlled_shutdown_writes_no_registration_change() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1, log_dirs=[]), 3, mv=6)
    _unfenced(cluster, 1, epoch, mv=6)
    records, reply = cluster.process_heartbeat(
        _heartbeat(1, epoch, 5, want_shut_down=True), metadata_version=6, partitions=_Effects(leaderships=True)
    )
    assert reply.in_controlled_shutdown
    assert _kinds(records) == ["effects:removed"]


def test_the_controlled_shutdown_offset_is_kept_from_the_first_commit() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    _unfenced(cluster, 1, epoch)
    cluster.process_heartbeat(_heartbeat(1, epoch, 5, want_shut_down=True), metadata_version=MV, partitions=_Effects(True))
    cluster.controlled_shutdown_committed(1, 40)
    cluster.controlled_shutdown_committed(1, 90)
    cluster.controlled_shutdown_committed(7, 90)  # unknown brokers are ignored
    assert cluster.heartbeats is not None and cluster.heartbeats.states[1].controlled_shutdown_offset == 40
    cluster.deactivate()
    cluster.controlled_shutdown_committed(1, 100)  # nothing to update on a standby


def test_fencing_ends_a_controlled_shutdown() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    _unfenced(cluster, 1, epoch)
    cluster.process_heartbeat(_heartbeat(1, epoch, 5, want_shut_down=True), metadata_version=MV, partitions=_Effects(True))
    cluster.controlled_shutdown_committed(1, 6)
    assert cluster.heartbeats is not None
    cluster.heartbeats.touch(1, True, 6)
    assert cluster.heartbeats.current_state(1) is BrokerControlState.FENCED
    assert cluster.heartbeats.states[1].controlled_shutdown_offset == -1


def test_the_lowest_active_offset_skips_fenced_and_shutting_down_brokers() -> None:
    beats = BrokerHeartbeats(SESSION_MS)
    assert beats.lowest_active_offset() == 2**63 - 1
    for broker_id in (1, 2, 3, 4):
        beats.register(broker_id, fenced=False)
    beats.touch(1, False, 40)
    beats.touch(2, True, 5)  # fenced
    beats.touch(3, False, 30)
    beats.touch(4, False, 10)
    beats.update_controlled_shutdown_offset(4, 12)  # shutting down
    assert beats.lowest_active_offset() == 30


def test_a_change_of_fencing_keeps_the_reported_offset_and_a_repeat_forgets_it() -> None:
    beats = BrokerHeartbeats(SESSION_MS)
    beats.register(1, fenced=True)
    beats.touch(1, True, 25)
    beats.register(1, fenced=False)  # replay of its unfencing
    assert beats.states[1].metadata_offset == 25 and not beats.states[1].fenced
    beats.register(1, fenced=False)  # the same state again
    assert beats.states[1].metadata_offset == -1


def test_offline_directories_are_ignored_before_3_7_iv2_and_when_unknown() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1, log_dirs=[DIR_A, DIR_B]), 3)
    _unfenced(cluster, 1, epoch)
    effects = _Effects()
    records, _ = cluster.process_heartbeat(
        _heartbeat(1, epoch, 9, offline_log_dirs=[Uuid.from_longs(5, 5)]), metadata_version=MV, partitions=effects
    )
    assert records == []
    records, _ = cluster.process_heartbeat(_heartbeat(1, epoch, 9, offline_log_dirs=[DIR_A]), metadata_version=16, partitions=effects)
    assert records == [] and not [c for c in effects.calls if c[0] == "offline"]


def test_each_offline_directory_moves_its_partitions_before_the_change() -> None:
    cluster = _active()
    third = Uuid.from_longs(33, 333)
    epoch = _register(cluster, _request(1, log_dirs=[DIR_A, DIR_B, third]), 3)
    _unfenced(cluster, 1, epoch)
    effects = _Effects()
    records, _ = cluster.process_heartbeat(
        _heartbeat(1, epoch, 9, offline_log_dirs=[third, DIR_A]), metadata_version=MV, partitions=effects
    )
    assert _kinds(records) == ["effects:offline", "effects:offline", "BrokerRegistrationChangeRecord"]
    assert [c for c in effects.calls if c[0] == "offline"] == [("offline", 1, DIR_A), ("offline", 1, third)]
    assert records[-1] == (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, log_dirs=[DIR_B]), 2)


def test_cordoned_directories_need_4_3_iv0_and_a_reported_list() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1, log_dirs=[DIR_A, DIR_B]), 3)
    _unfenced(cluster, 1, epoch)
    records, _ = cluster.process_heartbeat(_heartbeat(1, epoch, 9, cordoned_log_dirs=[DIR_A]), metadata_version=29)
    assert records == []
    records, _ = cluster.process_heartbeat(_heartbeat(1, epoch, 9, cordoned_log_dirs=None), metadata_version=30)
    assert records == []
    records, _ = cluster.process_heartbeat(_heartbeat(1, epoch, 9, cordoned_log_dirs=[DIR_B, DIR_A]), metadata_version=30)
    assert records == [(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, cordoned_log_dirs=[DIR_B, DIR_A]), 3)]
    _apply(cluster, records)
    # the same set in another order is no change
    records, _ = cluster.process_heartbeat(_heartbeat(1, epoch, 9, cordoned_log_dirs=[DIR_A, DIR_B]), metadata_version=30)
    assert records == []


def test_heartbeats_need_an_active_controller() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    cluster.deactivate()
    with pytest.raises(RuntimeError, match="not active"):
        cluster.process_heartbeat(_heartbeat(1, epoch, 3), metadata_version=MV)
    with pytest.raises(RuntimeError, match="not active"):
        cluster.maybe_fence_stale_broker(0, metadata_version=MV)


def test_check_broker_epoch_messages() -> None:
    cluster = _active()
    with pytest.raises(ApiError, match="No broker registration found for broker id 4") as stale:
        cluster.check_broker_epoch(4, 1)
    assert stale.value.error == Errors.STALE_BROKER_EPOCH
    _register(cluster, _request(4), 8)
    cluster.check_broker_epoch(4, 8)
    with pytest.raises(ApiError, match="Expected broker epoch 8, but got broker epoch 9"):
        cluster.check_broker_epoch(4, 9)


@pytest.mark.parametrize(
    ("state", "fenced", "shut_down"),
    [
        (BrokerControlState.FENCED, True, False),
        (BrokerControlState.UNFENCED, False, False),
        (BrokerControlState.CONTROLLED_SHUTDOWN, False, False),
        (BrokerControlState.SHUTDOWN_NOW, True, True),
    ],
)
def test_each_state_s_answer(state: BrokerControlState, fenced: bool, shut_down: bool) -> None:
    assert (state.fenced, state.should_shut_down) == (fenced, shut_down)


# ---------------------------------------------------------------------- session expiry


def test_a_session_ends_only_once_the_timeout_has_fully_passed() -> None:
    beats = BrokerHeartbeats(SESSION_MS)
    beats.update_contact(1, 5, 1000)
    assert beats.has_valid_session(1, 5, 1000 + SESSION_MS)
    assert not beats.has_valid_session(1, 5, 1001 + SESSION_MS)
    assert not beats.has_valid_session(1, 6, 1000)  # another epoch has no session
    assert beats.has_valid_session(1, 5, 0)  # a contact "after now" never expires
    assert beats.remove_expired(1000 + SESSION_MS) is None
    assert beats.remove_expired(1001 + SESSION_MS) == (1, 5) and beats.contact_ms == {}


def test_stale_brokers_are_fenced_one_per_call_in_contact_order() -> None:
    cluster = _active()
    first = _register(cluster, _request(1), 3)
    second = _register(cluster, _request(2), 4)
    for broker_id, epoch in ((1, first), (2, second)):
        cluster.track_heartbeat(broker_id, epoch, 0)
        _unfenced(cluster, broker_id, epoch)
    now = SESSION_MS + 1
    effects = _Effects()
    one = cluster.maybe_fence_stale_broker(now, metadata_version=MV, partitions=effects)
    assert one is not None and _kinds(one) == ["effects:removed", "BrokerRegistrationChangeRecord"]
    assert one[1] == (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=first, fenced=1), 0)
    two = cluster.maybe_fence_stale_broker(now, metadata_version=MV, partitions=effects)
    assert two is not None and two[1] == (BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=second, fenced=1), 0)
    assert cluster.maybe_fence_stale_broker(now, metadata_version=MV) is None
    assert effects.calls == [("removed", 1), ("removed", 2)]
    assert cluster.heartbeats is not None and cluster.heartbeats.current_state(1) is BrokerControlState.FENCED


def test_an_expired_session_before_3_3_iv2_is_fenced_with_a_fence_broker_record() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1, log_dirs=[]), 3, mv=5)
    cluster.track_heartbeat(1, epoch, 0)
    _unfenced(cluster, 1, epoch, mv=5)
    assert cluster.maybe_fence_stale_broker(SESSION_MS + 1, metadata_version=5) == [(FenceBrokerRecord(id=1, epoch=epoch), 0)]


def test_the_session_of_an_unregistered_broker_expires_without_records() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    cluster.track_heartbeat(1, epoch, 0)
    _apply(cluster, cluster.unregister_broker(1))
    assert cluster.maybe_fence_stale_broker(SESSION_MS + 1, metadata_version=MV) == []
    assert cluster.heartbeats is not None and 1 not in cluster.heartbeats.states


# ---------------------------------------------------------------------- unregistration


def test_unregistration_moves_partitions_before_the_record() -> None:
    cluster = _active()
    epoch = _register(cluster, _request(1), 3)
    effects = _Effects()
    records = cluster.unregister_broker(1, effects)
    assert _kinds(records) == ["effects:unregistered", "UnregisterBrokerRecord"]
    assert records[-1] == (UnregisterBrokerRecord(broker_id=1, broker_epoch=epoch), 0)
    assert effects.calls == [("unregistered", 1)]


def test_a_standby_may_answer_unregistration_from_its_registrations() -> None:
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    cluster.replay(RegisterBrokerRecord(broker_id=2, broker_epoch=6), 6)
    assert cluster.unregister_broker(2) == [(UnregisterBrokerRecord(broker_id=2, broker_epoch=6), 0)]


# ---------------------------------------------------------------------- replay


def test_a_registration_record_maps_into_the_registration() -> None:
    record = RegisterBrokerRecord(
        broker_id=4, incarnation_id=Uuid.from_longs(4, 4), broker_epoch=77, rack=None, fenced=False,
        in_controlled_shutdown=True, log_dirs=[DIR_A], cordoned_log_dirs=[DIR_A],
    )
    registration = BrokerRegistration.from_record(record)
    assert registration == BrokerRegistration(
        broker_id=4, epoch=77, incarnation_id=Uuid.from_longs(4, 4), endpoints=(), features={}, rack=None,
        fenced=False, in_controlled_shutdown=True, log_dirs=(DIR_A,), cordoned_log_dirs=(DIR_A,),
    )
    assert BrokerRegistration.from_record(RegisterBrokerRecord(broker_id=4)).cordoned_log_dirs is None


def test_a_new_registration_record_replaces_the_old_one_and_its_directories() -> None:
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=5, log_dirs=[DIR_A, DIR_B]), 5)
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=9, log_dirs=[DIR_B]), 11)
    assert cluster.registrations[1].epoch == 9 and cluster.register_offsets == {1: 11}
    assert cluster.directory_to_broker == {DIR_B: 1}


@pytest.mark.parametrize(
    ("change", "fenced", "shutting_down", "log_dirs", "cordoned"),
    [
        (dict(fenced=0), True, False, (DIR_A, DIR_B), None),  # no change at all
        (dict(fenced=-1), False, False, (DIR_A, DIR_B), None),
        (dict(fenced=1), True, False, (DIR_A, DIR_B), None),
        (dict(in_controlled_shutdown=1), True, True, (DIR_A, DIR_B), None),
        (dict(log_dirs=[]), True, False, (DIR_A, DIR_B), None),  # an empty list changes nothing
        (dict(log_dirs=[DIR_B]), True, False, (DIR_B,), None),
        (dict(cordoned_log_dirs=[]), True, False, (DIR_A, DIR_B), ()),
        (dict(cordoned_log_dirs=[DIR_A]), True, False, (DIR_A, DIR_B), (DIR_A,)),
    ],
)
def test_a_registration_change_changes_only_the_fields_it_sets(
    change: dict[str, object], fenced: bool, shutting_down: bool, log_dirs: tuple[Uuid, ...], cordoned: tuple[Uuid, ...] | None
) -> None:
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=5, log_dirs=[DIR_A, DIR_B], rack="r"), 5)
    cluster.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, **change), 6)  # type: ignore[arg-type]
    registration = cluster.registrations[1]
    assert (registration.fenced, registration.in_controlled_shutdown) == (fenced, shutting_down)
    assert (registration.log_dirs, registration.cordoned_log_dirs, registration.rack) == (log_dirs, cordoned, "r")
    assert cluster.register_offsets == {1: 5}
    assert set(cluster.directory_to_broker) == set(log_dirs)


def test_the_old_fence_and_unfence_records_replay_by_id_and_epoch() -> None:
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=5), 5)
    cluster.replay(UnfenceBrokerRecord(id=1, epoch=5), 6)
    assert not cluster.registrations[1].fenced
    cluster.replay(FenceBrokerRecord(id=1, epoch=5), 7)
    assert cluster.registrations[1].fenced
    with pytest.raises(ReplayError, match="no broker registration with that epoch found"):
        cluster.replay(UnfenceBrokerRecord(id=1, epoch=4), 8)
    with pytest.raises(ReplayError, match="no broker registration found for that id"):
        cluster.replay(FenceBrokerRecord(id=2, epoch=5), 8)


@pytest.mark.parametrize("change", [dict(fenced=2), dict(fenced=-2), dict(in_controlled_shutdown=2), dict(in_controlled_shutdown=-1)])
def test_unknown_change_values_are_replay_errors(change: dict[str, int]) -> None:
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=5), 5)
    with pytest.raises(ReplayError, match="unknown value"):
        cluster.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, **change), 6)  # type: ignore[arg-type]
    assert cluster.registrations[1].fenced


def test_an_unregistration_of_an_unknown_broker_is_a_replay_error() -> None:
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    with pytest.raises(ReplayError, match="no broker registration found for that id"):
        cluster.replay(UnregisterBrokerRecord(broker_id=3, broker_epoch=1), 0)


def test_replay_on_the_active_controller_keeps_the_heartbeat_states() -> None:
    cluster = _active()
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=5, fenced=False), 5)
    assert cluster.heartbeats is not None
    assert cluster.heartbeats.current_state(1) is BrokerControlState.UNFENCED
    cluster.replay(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=5, fenced=1), 6)
    assert cluster.heartbeats.current_state(1) is BrokerControlState.FENCED
    cluster.replay(UnregisterBrokerRecord(broker_id=1, broker_epoch=5), 7)
    assert 1 not in cluster.heartbeats.states


def test_reset_forgets_every_registration() -> None:
    cluster = ClusterControlManager(CLUSTER, SESSION_MS)
    cluster.replay(RegisterBrokerRecord(broker_id=1, broker_epoch=5, log_dirs=[DIR_A]), 5)
    cluster.reset()
    assert (cluster.registrations, cluster.register_offsets, cluster.directory_to_broker) == ({}, {}, {})
