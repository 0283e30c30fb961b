"""The records a new active controller appends before anything else (Kafka's
``ActivationRecordsGenerator``, called from ``QuorumController``'s claim of leadership).

A log is *empty* for activation when no metadata.version FeatureLevelRecord was replayed (Kafka
4.x's rule; 3.9 asked whether anything at all was replayed, which would leave a log of NoOps
without a metadata.version for ever). Then the controller appends the formatted bootstrap
records, laid out by their metadata.version, as stock Kafka writes them (checked against 3.9.2
and 4.4.0 by ``compat/test_controller_activation.py``):

=========================  ==================================================================
metadata.version           records
=========================  ==================================================================
< 3.6-IV1 (level 13)       the bootstrap records alone, in one atomic batch
3.6-IV1 .. 3.9-IV0 (21)    BeginTransaction("Bootstrap records"), the bootstrap records,
                           ZkMigrationState(NONE), EndTransaction (3.9's records)
>= 4.0-IV0 (22)            BeginTransaction("Bootstrap records"), the bootstrap records,
                           ConfigRecord(BROKER, "", min.insync.replicas) when
                           eligible.leader.replicas.version > 0, EndTransaction (4.4's records)
=========================  ==================================================================

A metadata transaction left open by a failed controller (a BeginTransaction without its End or
Abort) is closed first with AbortTransaction("Controller failover"). A non-empty log with no
open transaction gets nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from messages.generated.abort_transaction_record import AbortTransactionRecord
from messages.generated.begin_transaction_record import BeginTransactionRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.end_transaction_record import EndTransactionRecord
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.zk_migration_state_record import ZkMigrationStateRecord
from server.controller.result import Record

__all__ = [
    "BOOTSTRAP_TRANSACTION_NAME",
    "BROKER_RESOURCE_TYPE",
    "ELIGIBLE_LEADER_REPLICAS_FEATURE",
    "FAILOVER_ABORT_REASON",
    "LAST_3_9_LEVEL",
    "METADATA_TRANSACTIONS_LEVEL",
    "METADATA_VERSION_FEATURE",
    "MIN_INSYNC_REPLICAS_CONFIG",
    "ActivationRecords",
    "activation_records",
]

METADATA_VERSION_FEATURE = "metadata.version"
ELIGIBLE_LEADER_REPLICAS_FEATURE = "eligible.leader.replicas.version"
MIN_INSYNC_REPLICAS_CONFIG = "min.insync.replicas"
BOOTSTRAP_TRANSACTION_NAME = "Bootstrap records"
FAILOVER_ABORT_REASON = "Controller failover"
BROKER_RESOURCE_TYPE = 4  # ConfigResource.Type.BROKER
METADATA_TRANSACTIONS_LEVEL = 13  # 3.6-IV1: MetadataVersion.isMetadataTransactionSupported
LAST_3_9_LEVEL = 21  # 3.9-IV0, the 3.9 line's LATEST_PRODUCTION
_ZK_MIGRATION_NONE = 0

"""A metadata record and the version to write it at."""


@dataclass(frozen=True, slots=True)
class ActivationRecords:
    """What to append on activation: ``records`` in order, and whether they must land in one
    batch (``atomic``, Kafka's ``ControllerResult.atomic``)."""

    records: tuple[Record, ...]
    atomic: bool


def _bootstrap_level(bootstrap: Sequence[Record], name: str) -> int:
    level = 0
    for message, _ in bootstrap:
        if isinstance(message, FeatureLevelRecord) and message.name == name:
            level = message.feature_level
    return level


def activation_records(
    *,
    metadata_version_replayed: bool,
    transaction_open: bool,
    bootstrap: Sequence[Record],
    min_insync_replicas: int,
) -> ActivationRecords:
    """The activation records for a log whose replay found a metadata.version or not
    (``metadata_version_replayed``) and left a metadata transaction open or not
    (``transaction_open``). ``bootstrap`` is the formatted bootstrap metadata (its
    metadata.version FeatureLevelRecord first); ``min_insync_replicas`` the node's
    ``min.insync.replicas``. Raises ValueError for bootstrap records without metadata.version.
    """
    abort: tuple[Record, ...] = (
        ((AbortTransactionRecord(reason=FAILOVER_ABORT_REASON), 0),) if transaction_open else ()
    )
    if metadata_version_replayed:
        return ActivationRecords(abort, atomic=False)
    level = _bootstrap_level(bootstrap, METADATA_VERSION_FEATURE)
    if level <= 0:
        raise ValueError("the bootstrap metadata has no metadata.version FeatureLevelRecord")
    records = tuple(bootstrap)
    if level < METADATA_TRANSACTIONS_LEVEL:
        # no metadata transactions before 3.6-IV1: one atomic batch (nothing can be open)
        return ActivationRecords(records, atomic=True)
    extra: tuple[Record, ...] = ()
    if level <= LAST_3_9_LEVEL:
        extra = ((ZkMigrationStateRecord(zk_migration_state=_ZK_MIGRATION_NONE), 0),)
    elif _bootstrap_level(bootstrap, ELIGIBLE_LEADER_REPLICAS_FEATURE) > 0:
        extra = (
            (
                ConfigRecord(
                    resource_type=BROKER_RESOURCE_TYPE,
                    resource_name="",
                    name=MIN_INSYNC_REPLICAS_CONFIG,
                    value=str(min_insync_replicas),
                ),
                0,
            ),
        )
    return ActivationRecords(
        abort
        + ((BeginTransactionRecord(name=BOOTSTRAP_TRANSACTION_NAME), 0),)
        + records
        + extra
        + ((EndTransactionRecord(), 0),),
        atomic=False,
    )
