"""The replayed state of the metadata log and the controller's claim on it
(``server.controller.controller``, Kafka's ``QuorumController`` replay, ``FeatureControlManager``
and ``ClusterControlManager.registerController``)."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from kwire.wire import DecodeError
from messages.generated.abort_transaction_record import AbortTransactionRecord
from messages.generated.begin_transaction_record import BeginTransactionRecord
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.clear_elr_record import ClearElrRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.controller_registration_request import (
    ControllerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.end_transaction_record import EndTransactionRecord
from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.no_op_record import NoOpRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.producer_ids_record import ProducerIdsRecord
from messages.generated.register_controller_record import RegisterControllerRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from messages.generated.unfence_broker_record import UnfenceBrokerRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.generated.zk_migration_state_record import ZkMigrationStateRecord
from messages.metadata import encode_record
from server.controller.controller import (
    REPLAYED_KEY_BYTES,
    ControllerRegistration,
    ControlManagers,
)
from server.controller.errors import ApiError
from server.controller.image_writer import ImageLossError
from tests.controller.fixtures import (
    CLUSTER_ID,
    broker_record,
    controller_at,
    controller_record,
    feature_record,
    mv_record,
    replay_log,
    values,
)

TOPIC = Uuid.from_longs(0x70, 0x1C)


def _registration_request(controller_id: int = 3000, **overrides: object) -> ControllerRegistrationRequest:
    fields: dict[str, object] = dict(
        controller_id=controller_id,
        incarnation_id=Uuid.from_longs(controller_id, 42),
        zk_migration_ready=False,
        listeners=[
            Listener(name="CONTROLLER", host="c1", port=9093, security_protocol=0),
            Listener(name="CONTROLLER_SSL", host="c1", port=9094, security_protocol=1),
        ],
        features=[
            Feature(name="metadata.version", min_supported_version=1, max_supported_version=21),
            Feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
        ],
    )
    fields.update(overrides)
    return ControllerRegistrationRequest(**fields)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- replay: features


def test_feature_levels_are_replayed_by_name_and_the_last_one_wins() -> None:
    controller = controller_at(None)
    replay_log(controller, [mv_record(7), feature_record("group.version", 1), mv_record(21)])
    assert controller.feature_levels == {"metadata.version": 21, "group.version": 1}
    assert controller.metadata_version == 21


def test_a_feature_set_to_level_0_is_kept_as_0_and_metadata_version_0_is_none() -> None:
    controller = controller_at(None)
    replay_log(controller, [feature_record("group.version", 1), feature_record("group.version", 0)])
    assert controller.feature_levels == {"group.version": 0}
    assert controller.metadata_version is None
    replay_log(controller, [mv_record(0)])
    assert controller.metadata_version is None


# ---------------------------------------------------------------------- replay: what is kept, what is skipped


def test_the_broker_records_go_to_the_cluster_at_their_offsets() -> None:
    controller = controller_at(21)
    replay_log(controller, [(broker_record(1, 10, fenced=True), 3)], first_offset=10)
    assert controller.cluster.register_offsets == {1: 10}
    replay_log(controller, [(UnfenceBrokerRecord(id=1, epoch=10), 0)], first_offset=11)
    assert not controller.cluster.registrations[1].fenced
    replay_log(controller, [(FenceBrokerRecord(id=1, epoch=10), 0)], first_offset=12)
    assert controller.cluster.registrations[1].fenced
    replay_log(controller, [(BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=1), 1)], 13)
    assert controller.cluster.registrations[1].in_controlled_shutdown
    replay_log(controller, [(UnregisterBrokerRecord(broker_id=1, broker_epoch=10), 0)], first_offset=14)
    assert controller.cluster.registrations == {} and controller.cluster.register_offsets == {}


def test_the_topic_config_and_producer_id_records_go_to_the_image() -> None:
    controller = controller_at(21)
    replay_log(controller, [
        (TopicRecord(name="t", topic_id=TOPIC), 0),
        (PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2], isr=[1, 2], leader=1,
                         leader_epoch=0, partition_epoch=0), 0),
        (PartitionChangeRecord(partition_id=0, topic_id=TOPIC, isr=[1]), 0),
        (ConfigRecord(resource_type=2, resource_name="t", name="cleanup.policy", value="compact"), 0),
        (ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=5000), 0),
        (ClearElrRecord(topic_name=""), 0),
    ], first_offset=1)
    image = controller.replication
    assert image.topics[TOPIC].partitions[0].isr == (1,) and image.topics[TOPIC].partitions[0].partition_epoch == 1
    assert image.configs == {(2, "t"): {"cleanup.policy": "compact"}}
    assert image.next_producer_id == 5000
    replay_log(controller, [(RemoveTopicRecord(topic_id=TOPIC), 0)], first_offset=7)
    assert image.topics == {} and image.configs == {}


def test_a_controller_registration_is_kept_by_id_and_replaced_by_a_later_one() -> None:
    controller = controller_at(21, (controller_record(3001), 0), (controller_record(3000), 0))
    assert sorted(controller.controllers) == [3000, 3001]
    moved = controller_record(3001, endpoints=(("CONTROLLER", "elsewhere", 19093),))
    replay_log(controller, [(moved, 0)], first_offset=3)
    assert controller.controllers[3001].endpoints == (("CONTROLLER", "elsewhere", 19093, 0),)
    assert len(controller.controllers) == 2


@pytest.mark.parametrize(
    "record",
    [NoOpRecord(), ZkMigrationStateRecord(zk_migration_state=0)],
    ids=["NoOpRecord", "ZkMigrationStateRecord"],
)
def test_records_the_controller_does_not_keep_change_nothing(record: object) -> None:
    controller = controller_at(21, (broker_record(1, 1), 3))
    controller.replay(encode_record(record, 0), 2)  # type: ignore[arg-type]
    assert controller.feature_levels == {"metadata.version": 21} and not controller.transaction_open
    assert set(controller.cluster.registrations) == {1} and controller.replication.topics == {}


@pytest.mark.parametrize(
    "value",
    [
        bytes([1, 20, 0, 0xFF, 0xFF, 0xFF]),  # NoOpRecord with a body that does not decode
        bytes([1, 21, 0, 0xFF, 0xFF]),  # ZkMigrationStateRecord: not a record kwire keeps
        bytes([1, 6, 0]),  # AccessControlRecord
        bytes([1, 0xC8, 0x01, 0, 0xAA]),  # an api key of two varint bytes (200)
        None,  # a record without a value
        b"",
        b"\x01",
    ],
    ids=["noop-garbage", "zk-migration", "acl", "two-byte-key", "none", "empty", "one-byte"],
)
def test_records_of_other_types_are_skipped_by_api_key_without_decoding(value: bytes | None) -> None:
    controller = controller_at(21)
    controller.replay(value, 5)
    assert controller.feature_levels == {"metadata.version": 21}


def test_a_kept_record_that_does_not_decode_is_an_error() -> None:
    controller = controller_at(21)
    broken = encode_record(TopicRecord(name="t", topic_id=TOPIC), 0)[:-3]
    with pytest.raises(DecodeError):
        controller.replay(broken, 3)
    with pytest.raises(DecodeError):
        controller.replay(encode_record(mv_record(21)[0], 0) + b"\x00", 3)  # a trailing byte


# ---------------------------------------------------------------------- transactions


def test_a_transaction_is_open_from_begin_to_end() -> None:
    controller = controller_at(21)
    replay_log(controller, [(BeginTransactionRecord(name="Bootstrap records"), 0)])
    assert controller.transaction_open
    replay_log(controller, [(NoOpRecord(), 0), feature_record("group.version", 1)])
    assert controller.transaction_open and controller.feature_levels["group.version"] == 1
    replay_log(controller, [(EndTransactionRecord(), 0)])
    assert not controller.transaction_open


def test_an_abort_closes_the_transaction() -> None:
    controller = controller_at(21, (BeginTransactionRecord(name="x"), 0))
    assert controller.transaction_open
    replay_log(controller, [(AbortTransactionRecord(reason="Controller failover"), 0)], 2)
    assert not controller.transaction_open


def test_an_end_without_a_begin_leaves_no_transaction_open() -> None:
    controller = controller_at(21, (EndTransactionRecord(), 0))
    assert not controller.transaction_open


# ---------------------------------------------------------------------- reset from a snapshot


def test_reset_replaces_everything_with_the_snapshot_s_records() -> None:
    controller = controller_at(
        21,
        feature_record("group.version", 1),
        (broker_record(1, 1), 3),
        (controller_record(3000), 0),
        (TopicRecord(name="t", topic_id=TOPIC), 0),
        (ConfigRecord(resource_type=4, resource_name="", name="x", value="y"), 0),
        (ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=1000), 0),
        (BeginTransactionRecord(name="open"), 0),
    )
    assert controller.transaction_open
    controller.reset(values([mv_record(15), (broker_record(2, 7), 2)]), 99)
    assert controller.feature_levels == {"metadata.version": 15}
    assert not controller.transaction_open and controller.controllers == {}
    assert set(controller.cluster.registrations) == {2} and controller.cluster.register_offsets == {2: 99}
    assert controller.replication.topics == {} and controller.replication.configs == {}
    assert controller.replication.next_producer_id == 0 and not controller.replication.producer_ids_replayed


def test_reset_with_no_records_forgets_the_metadata_version() -> None:
    controller = controller_at(21, (controller_record(3000), 0))
    controller.reset([])
    assert controller.metadata_version is None and controller.controllers == {}


def test_reset_keeps_the_controller_s_leadership() -> None:
    controller = controller_at(21)
    controller.activate(4)
    controller.reset(values([mv_record(21)]), 10)
    assert controller.active_epoch == 4 and controller.cluster.heartbeats is not None


# ---------------------------------------------------------------------- snapshots of the image


def test_no_snapshot_inside_a_metadata_transaction() -> None:
    controller = controller_at(21, (BeginTransactionRecord(name="b"), 0))
    with pytest.raises(RuntimeError, match="inside a metadata transaction"):
        controller.snapshot_records()
    replay_log(controller, [(EndTransactionRecord(), 0)], 2)
    assert controller.snapshot_records() == [mv_record(21)]


def test_no_snapshot_without_a_metadata_version() -> None:
    controller = controller_at(None, feature_record("group.version", 1))
    with pytest.raises(ImageLossError):
        controller.snapshot_records()


def test_the_snapshot_holds_the_controller_registrations_as_records() -> None:
    registered = controller_record(3000, endpoints=(("CONTROLLER", "c0", 9093), ("OTHER", "c0", 9193)))
    controller = controller_at(21, (registered, 0))
    assert controller.snapshot_records() == [mv_record(21), (registered, 0)]


# ---------------------------------------------------------------------- ControllerRegistration


@pytest.mark.parametrize("level", [None, 1, 7, 14])
def test_controller_registration_needs_3_7_iv0(level: int | None) -> None:
    controller = controller_at(level)
    with pytest.raises(ApiError) as refused:
        controller.register_controller(_registration_request())
    assert refused.value.error == Errors.UNSUPPORTED_VERSION
    assert refused.value.message == "The current MetadataVersion is too old to support controller registrations."


@pytest.mark.parametrize("level", [15, 21, 30])
def test_controller_registration_writes_one_record_of_the_request(level: int) -> None:
    controller = controller_at(level)
    ((record, version),) = controller.register_controller(_registration_request(3002))
    assert version == 0 and isinstance(record, RegisterControllerRecord)
    assert (record.controller_id, record.incarnation_id, record.zk_migration_ready) == (3002, Uuid.from_longs(3002, 42), False)
    assert [(e.name, e.host, e.port, e.security_protocol) for e in record.end_points] == [
        ("CONTROLLER", "c1", 9093, 0), ("CONTROLLER_SSL", "c1", 9094, 1)
    ]
    assert [(f.name, f.min_supported_version, f.max_supported_version) for f in record.features] == [
        ("metadata.version", 1, 21), ("kraft.version", 0, 1)
    ]


def test_controller_registration_records_no_zookeeper_readiness_and_checks_no_features() -> None:
    controller = controller_at(21)
    request = _registration_request(
        zk_migration_ready=True,
        features=[Feature(name="metadata.version", min_supported_version=1, max_supported_version=3)],
    )
    ((record, _),) = controller.register_controller(request)
    assert record.zk_migration_ready is False  # type: ignore[attr-defined]
    assert [(f.name, f.max_supported_version) for f in record.features] == [("metadata.version", 3)]  # type: ignore[attr-defined]


def test_controller_registration_is_not_applied_until_replayed() -> None:
    controller = controller_at(21)
    records = controller.register_controller(_registration_request(3000))
    assert controller.controllers == {}
    replay_log(controller, records, 1)
    assert controller.controllers[3000].incarnation_id == Uuid.from_longs(3000, 42)


def test_a_controller_registration_round_trips_through_its_record() -> None:
    record = controller_record(
        3001,
        endpoints=(("CONTROLLER", "c1", 9093), ("SSL", "c1.example", 9094)),
        features=(("metadata.version", 7, 21), ("kraft.version", 0, 1), ("group.version", 0, 1)),
    )
    registration = ControllerRegistration.from_record(record)
    assert registration == ControllerRegistration(
        controller_id=3001,
        incarnation_id=Uuid.from_longs(4001, 1),
        endpoints=(("CONTROLLER", "c1", 9093, 0), ("SSL", "c1.example", 9094, 0)),
        features={"metadata.version": (7, 21), "kraft.version": (0, 1), "group.version": (0, 1)},
    )
    assert registration.to_record() == record
    assert ControllerRegistration.from_record(registration.to_record()) == registration


def test_a_registration_s_record_says_zookeeper_migration_is_not_ready() -> None:
    record = controller_record(3000)
    record.zk_migration_ready = True
    assert ControllerRegistration.from_record(record).to_record().zk_migration_ready is False


# ---------------------------------------------------------------------- activation


def test_activation_on_an_empty_log_writes_the_bootstrap() -> None:
    controller = ControlManagers(bootstrap=[mv_record(21)], cluster_id=CLUSTER_ID)
    activation = controller.activate(1, now_ms=0)
    assert activation is not None and not activation.atomic
    assert [type(r).__name__ for r, _ in activation.records] == [
        "BeginTransactionRecord", "FeatureLevelRecord", "ZkMigrationStateRecord", "EndTransactionRecord"
    ]


def test_activation_after_a_metadata_version_writes_nothing() -> None:
    controller = controller_at(21)
    activation = controller.activate(1)
    assert activation is not None and activation.records == ()


def test_a_log_of_only_other_records_is_still_empty_for_activation() -> None:
    controller = ControlManagers(bootstrap=[mv_record(11)])
    replay_log(controller, [(NoOpRecord(), 0), feature_record("group.version", 1)])
    activation = controller.activate(2)
    assert activation is not None and activation.atomic and activation.records == (mv_record(11),)


def test_activation_closes_a_transaction_a_failed_controller_left_open() -> None:
    controller = controller_at(21, (BeginTransactionRecord(name="x"), 0))
    activation = controller.activate(3)
    assert activation is not None
    assert activation.records == ((AbortTransactionRecord(reason="Controller failover"), 0),)


def test_activation_is_once_per_epoch_and_renouncing_allows_it_again() -> None:
    controller = controller_at(21)
    assert controller.activate(5) is not None and controller.active_epoch == 5
    assert controller.activate(5) is None
    assert controller.activate(6) is not None and controller.active_epoch == 6
    controller.renounce()
    assert controller.active_epoch is None and controller.cluster.heartbeats is None
    assert controller.activate(6) is not None


def test_activation_starts_broker_sessions_at_its_time() -> None:
    controller = controller_at(21, (broker_record(1, 1, fenced=False), 3), (broker_record(2, 2, fenced=True), 3))
    controller.activate(1, now_ms=70_000)
    heartbeats = controller.cluster.heartbeats
    assert heartbeats is not None
    assert set(heartbeats.states) == {1, 2}
    assert heartbeats.contact_ms == {(1, 1): 70_000}  # only the unfenced broker has a session


def test_a_standby_has_no_sessions() -> None:
    controller = controller_at(21, (broker_record(1, 1, fenced=False), 3))
    assert controller.active_epoch is None and controller.cluster.heartbeats is None


def test_the_controller_carries_its_cluster_id_and_session_timeout() -> None:
    controller = ControlManagers(bootstrap=[], cluster_id="abc", session_timeout_ms=1234, min_insync_replicas=3)
    assert (controller.cluster.cluster_id, controller.cluster.session_timeout_ms) == ("abc", 1234)
    assert controller.min_insync_replicas == 3 and controller.bootstrap == ()


def test_a_value_outside_the_replayed_key_bytes_is_one_replay_passes_over() -> None:
    """The host skips values whose second byte is not in REPLAYED_KEY_BYTES without calling
    replay: replay must do nothing with them, however malformed their bodies."""
    skipped = [key for key in range(256) if key not in REPLAYED_KEY_BYTES]
    assert NoOpRecord.API_KEY in skipped and ZkMigrationStateRecord.API_KEY in skipped
    assert PartitionRecord.API_KEY not in skipped and ConfigRecord.API_KEY not in skipped
    controller = ControlManagers(bootstrap=[])
    for key in skipped:
        controller.replay(bytes([1, key, 0, 0xFF, 0xFF]), 0)  # a body no decoder accepts
    with pytest.raises(DecodeError):
        controller.replay(bytes([1, ConfigRecord.API_KEY, 0, 0xFF, 0xFF]), 0)
    assert controller.feature_levels == {} and controller.replication.topics == {}
