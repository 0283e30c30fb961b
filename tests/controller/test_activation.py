"""Activation records (``ActivationRecordsGenerator``) by metadata.version, and the
controller's replay of feature levels and metadata transactions. The layouts were read off stock
3.9.2 and 4.4.0 controllers; ``compat/test_controller_activation.py`` compares with them live."""

from __future__ import annotations

import pytest

from messages.generated.abort_transaction_record import AbortTransactionRecord
from messages.generated.begin_transaction_record import BeginTransactionRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.end_transaction_record import EndTransactionRecord
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.no_op_record import NoOpRecord
from messages.generated.zk_migration_state_record import ZkMigrationStateRecord
from messages.metadata import encode_record
from server.controller.activation import activation_records
from server.controller.controller import ControlManagers


def _mv(level: int, **features: int) -> list[tuple[FeatureLevelRecord, int]]:
    records = [(FeatureLevelRecord(name="metadata.version", feature_level=level), 0)]
    for name, value in sorted(features.items()):
        records.append((FeatureLevelRecord(name=name.replace("_", "."), feature_level=value), 0))
    return records


def _types(records: tuple[tuple[object, int], ...]) -> list[str]:
    return [type(m).__name__ for m, _ in records]


@pytest.mark.parametrize("level", [4, 8, 11, 12])
def test_before_metadata_transactions_the_bootstrap_is_one_atomic_batch(level: int) -> None:
    result = activation_records(
        metadata_version_replayed=False, transaction_open=False, bootstrap=_mv(level), min_insync_replicas=1
    )
    assert result.atomic
    assert result.records == tuple(_mv(level))


@pytest.mark.parametrize("level", [13, 15, 21])
def test_3_6_to_3_9_wraps_the_bootstrap_with_a_zk_migration_state_of_none(level: int) -> None:
    result = activation_records(
        metadata_version_replayed=False, transaction_open=False, bootstrap=_mv(level), min_insync_replicas=1
    )
    assert not result.atomic
    assert result.records[0] == (BeginTransactionRecord(name="Bootstrap records"), 0)
    assert result.records[1:-2] == tuple(_mv(level))
    assert result.records[-2] == (ZkMigrationStateRecord(zk_migration_state=0), 0)
    assert result.records[-1] == (EndTransactionRecord(), 0)


def test_4x_with_eligible_leader_replicas_adds_the_cluster_min_insync_replicas() -> None:
    bootstrap = _mv(33, eligible_leader_replicas_version=1, group_version=1, transaction_version=2)
    result = activation_records(
        metadata_version_replayed=False, transaction_open=False, bootstrap=bootstrap, min_insync_replicas=2
    )
    assert _types(result.records) == [
        "BeginTransactionRecord", *["FeatureLevelRecord"] * 4, "ConfigRecord", "EndTransactionRecord"
    ]
    assert result.records[-2] == (
        ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="2"), 0
    )


def test_4x_without_eligible_leader_replicas_writes_only_the_bootstrap_in_a_transaction() -> None:
    result = activation_records(
        metadata_version_replayed=False, transaction_open=False, bootstrap=_mv(25, group_version=1),
        min_insync_replicas=1,
    )
    assert _types(result.records) == [
        "BeginTransactionRecord", "FeatureLevelRecord", "FeatureLevelRecord", "EndTransactionRecord"
    ]


def test_an_open_transaction_is_aborted_first() -> None:
    empty = activation_records(
        metadata_version_replayed=False, transaction_open=True, bootstrap=_mv(21), min_insync_replicas=1
    )
    assert empty.records[0] == (AbortTransactionRecord(reason="Controller failover"), 0)
    assert empty.records[1] == (BeginTransactionRecord(name="Bootstrap records"), 0)
    later = activation_records(
        metadata_version_replayed=True, transaction_open=True, bootstrap=_mv(21), min_insync_replicas=1
    )
    assert later.records == ((AbortTransactionRecord(reason="Controller failover"), 0),)


def test_a_log_with_metadata_version_and_no_open_transaction_gets_nothing() -> None:
    result = activation_records(
        metadata_version_replayed=True, transaction_open=False, bootstrap=_mv(21), min_insync_replicas=1
    )
    assert result.records == ()


def test_bootstrap_without_metadata_version_is_refused() -> None:
    with pytest.raises(ValueError, match="metadata.version"):
        activation_records(
            metadata_version_replayed=False, transaction_open=False,
            bootstrap=[(FeatureLevelRecord(name="group.version", feature_level=1), 0)], min_insync_replicas=1,
        )


def test_the_controller_replays_levels_and_transactions_and_activates_once_per_epoch() -> None:
    controller = ControlManagers(bootstrap=_mv(21))
    first = controller.activate(1)
    assert first is not None and _types(first.records)[0] == "BeginTransactionRecord"
    assert controller.activate(1) is None  # already active in epoch 1
    for message, version in first.records[:-1]:  # replayed up to, not including, the End
        controller.replay(encode_record(message, version))
    controller.replay(encode_record(NoOpRecord(), 0))
    assert controller.metadata_version == 21 and controller.transaction_open
    controller.renounce()
    again = controller.activate(2)  # a failover left the bootstrap transaction open
    assert again is not None and again.records == ((AbortTransactionRecord(reason="Controller failover"), 0),)
    controller.replay(encode_record(*again.records[0]))
    assert not controller.transaction_open
    controller.reset([encode_record(FeatureLevelRecord(name="metadata.version", feature_level=7), 0), None])
    assert controller.feature_levels == {"metadata.version": 7} and controller.metadata_version == 7
    controller.reset([])
    assert controller.metadata_version is None
