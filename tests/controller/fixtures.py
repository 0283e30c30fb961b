"""Builders shared by the controller tests: metadata records as a log or a snapshot holds
them, and controllers that have replayed them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kwire.uuid import Uuid
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from messages.generated.register_controller_record import (
    ControllerEndpoint,
    ControllerFeature,
    RegisterControllerRecord,
)
from messages.metadata import encode_record
from messages.runtime import Message
from server.controller.cluster import ClusterControlManager
from server.controller.controller import ControlManagers

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def mv_record(level: int) -> tuple[FeatureLevelRecord, int]:
    """The metadata.version FeatureLevelRecord at ``level``, as bootstrap metadata holds it."""
    return FeatureLevelRecord(name="metadata.version", feature_level=level), 0


def feature_record(name: str, level: int) -> tuple[FeatureLevelRecord, int]:
    """A FeatureLevelRecord of ``name`` at ``level`` (v0)."""
    return FeatureLevelRecord(name=name, feature_level=level), 0


def values(records: Iterable[tuple[Message, int]]) -> list[bytes]:
    """The framed values of ``(record, version)`` pairs, in order."""
    return [encode_record(record, version) for record, version in records]


def replay_log(controller: ControlManagers, records: Sequence[tuple[Message, int]], first_offset: int = 0) -> int:
    """Replay ``records`` as consecutive log offsets from ``first_offset``; the next offset."""
    for offset, value in enumerate(values(records), first_offset):
        controller.replay(value, offset)
    return first_offset + len(records)


def controller_at(level: int | None, *records: tuple[Message, int], cluster_id: str = CLUSTER_ID) -> ControlManagers:
    """A standby controller whose log held metadata.version ``level`` (none for None) and then
    ``records``, one offset each from 0."""
    bootstrap = [mv_record(level if level is not None else 21)]
    controller = ControlManagers(bootstrap=bootstrap, cluster_id=cluster_id)
    replay_log(controller, ([mv_record(level)] if level is not None else []) + list(records))
    return controller


def broker_record(
    broker_id: int,
    epoch: int,
    *,
    fenced: bool = True,
    log_dirs: Sequence[Uuid] = (),
    rack: str | None = None,
    port: int | None = None,
    features: Sequence[tuple[str, int, int]] = (("metadata.version", 1, 21),),
    in_controlled_shutdown: bool = False,
) -> RegisterBrokerRecord:
    """A RegisterBrokerRecord of ``broker_id`` at ``epoch`` with one PLAINTEXT endpoint."""
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=Uuid.from_longs(broker_id, epoch),
        broker_epoch=epoch,
        end_points=[
            BrokerEndpoint(name="PLAINTEXT", host=f"b{broker_id}", port=port or 9092 + broker_id, security_protocol=0)
        ],
        features=[
            BrokerFeature(name=name, min_supported_version=low, max_supported_version=high) for name, low, high in features
        ],
        rack=rack,
        fenced=fenced,
        in_controlled_shutdown=in_controlled_shutdown,
        log_dirs=list(log_dirs),
    )


def controller_record(
    controller_id: int,
    endpoints: Sequence[tuple[str, str, int]] = (("CONTROLLER", "localhost", 9093),),
    features: Sequence[tuple[str, int, int]] = (("metadata.version", 1, 21), ("kraft.version", 0, 1)),
) -> RegisterControllerRecord:
    """A RegisterControllerRecord of ``controller_id`` with ``(listener, host, port)`` endpoints."""
    return RegisterControllerRecord(
        controller_id=controller_id,
        incarnation_id=Uuid.from_longs(1000 + controller_id, 1),
        zk_migration_ready=False,
        end_points=[
            ControllerEndpoint(name=name, host=host, port=port, security_protocol=0) for name, host, port in endpoints
        ],
        features=[
            ControllerFeature(name=name, min_supported_version=low, max_supported_version=high)
            for name, low, high in features
        ],
    )


def broker_epoch(broker_id: int) -> int:
    """The broker epoch :func:`active_cluster` registers ``broker_id`` at (not its id, so that a
    test cannot mix the two up)."""
    return 100 + broker_id


def directory(broker_id: int, index: int = 1) -> Uuid:
    """Log directory ``index`` of ``broker_id``."""
    return Uuid.from_longs(broker_id, index)


def active_cluster(
    *broker_ids: int,
    fenced: Iterable[int] = (),
    shutting_down: Iterable[int] = (),
    log_dirs: Mapping[int, Sequence[Uuid]] | None = None,
) -> ClusterControlManager:
    """An active ClusterControlManager with ``broker_ids`` registered at :func:`broker_epoch`: the
    ``fenced`` ones fenced, the ``shutting_down`` ones in controlled shutdown, each with its
    first :func:`directory` unless ``log_dirs`` names its directories."""
    cluster = ClusterControlManager(CLUSTER_ID, 9000)
    fenced, shutting_down = set(fenced), set(shutting_down)
    for broker_id in broker_ids:
        dirs = (directory(broker_id),) if log_dirs is None or broker_id not in log_dirs else log_dirs[broker_id]
        record = broker_record(
            broker_id, broker_epoch(broker_id), fenced=broker_id in fenced,
            in_controlled_shutdown=broker_id in shutting_down, log_dirs=dirs,
        )
        cluster.replay(record, broker_id)
    cluster.activate(0)
    return cluster


def partition_record(
    topic_id: Uuid, index: int, replicas: Sequence[int], isr: Sequence[int], leader: int, **fields: object
) -> PartitionRecord:
    """A PartitionRecord at leader and partition epoch 0, each replica in its first
    :func:`directory`; ``fields`` override any field."""
    values: dict[str, object] = dict(
        partition_id=index, topic_id=topic_id, replicas=list(replicas), isr=list(isr), leader=leader,
        leader_epoch=0, partition_epoch=0, directories=[directory(b) for b in replicas],
    )
    values.update(fields)
    return PartitionRecord(**values)  # type: ignore[arg-type]


class RecordingLog:
    """A ``ControllerLog`` that keeps each line as formatted; ERROR lines start ``"ERROR "``."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: object) -> None:
        self.lines.append(msg % args)

    def error(self, msg: str, *args: object) -> None:
        self.lines.append("ERROR " + msg % args)
