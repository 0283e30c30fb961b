"""The controller workload's checker (``compat/faults/cluster.py``) on made-up histories: it
passes a clean one, names each kind of violation, and reads the events it follows from a
metadata log segment."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compat.faults.cluster import (
    DATA_TOPIC,
    MOVES_TOPIC,
    TOPIC_CONFIG,
    TOPIC_RESOURCE,
    VISIBLE_BOUND_S,
    AdminOp,
    ClusterVerdict,
    Event,
    check_cluster,
    committed_events,
    live_topics,
)
from compat.harness import PARTITION
from kwire.uuid import Uuid
from messages.generated.config_record import ConfigRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from messages.metadata import encode_record
from storage.batch_builder import build_batch
from storage.record_codec import SimpleRecord


def _op(kind: str, topic: str, value: Any, invoked: float, completed: float, outcome: str = "ok",
        visible_s: float | None = 0.2) -> AdminOp:
    return AdminOp(kind, topic, value, 101, invoked, completed, outcome,
                   visible_s=visible_s if kind == "create" and outcome == "ok" else None)


def _log(*entries: tuple[str, str, Any]) -> list[Event]:
    base = [Event(0, "create", DATA_TOPIC), Event(1, "create", MOVES_TOPIC)]
    return base + [Event(n, kind, topic, value) for n, (kind, topic, value) in enumerate(entries, start=2)]


HISTORY = [
    _op("create", "w-00000", None, 0.0, 1.0),
    _op("config", MOVES_TOPIC, 9, 1.5, 2.0),
    _op("reassign", MOVES_TOPIC, (101, 102), 2.5, 3.0),
    _op("create", "w-00001", None, 3.5, 4.0, outcome="unknown"),
    _op("delete", "w-00000", None, 4.5, 5.0),
]
LOG = _log(("create", "w-00000", None), ("config", MOVES_TOPIC, 9), ("reassign", MOVES_TOPIC, (101, 102)),
           ("create", "w-00001", None), ("delete", "w-00000", None))
LIVE = {DATA_TOPIC, MOVES_TOPIC, "w-00001"}


def _check(ops: Sequence[AdminOp] = HISTORY, events: Sequence[Event] = LOG, *, brokers: set[str] | None = None,
           replicas: Sequence[int] | None = (101, 102), acked: Sequence[str] = ("a-0", "a-1"),
           back: Counter[str] | None = None, nodes: dict[int, Sequence[Event]] | None = None) -> ClusterVerdict:
    return check_cluster(
        ops, nodes or {1: events, 2: events, 3: events},
        broker_topics={101: LIVE if brokers is None else brokers, 102: LIVE, 103: LIVE},
        moves_target=replicas, acked_records=acked, read_back=back or Counter({"a-0": 1, "a-1": 1}))


def test_a_clean_history_passes() -> None:
    verdict = _check()
    assert verdict.ok, verdict
    assert (verdict.acknowledged, verdict.failed, verdict.unknown, verdict.records_acknowledged) == (4, 0, 1, 2)
    assert live_topics(LOG) == LIVE


def test_an_acknowledged_request_missing_from_a_voter_is_lost() -> None:
    short = LOG[:-1]
    verdict = _check(nodes={1: LOG, 2: LOG, 3: short})
    assert verdict.lost == ["delete w-00000 (node 3)"] and verdict.diverged == [3]


def test_reassignments_are_counted_per_target() -> None:
    again = [*HISTORY, _op("reassign", MOVES_TOPIC, (102, 103), 6.0, 6.5),
             _op("reassign", MOVES_TOPIC, (101, 102), 7.0, 7.5)]
    once = [*LOG, Event(9, "reassign", MOVES_TOPIC, (102, 103))]
    assert _check(again, once).lost == [f"reassign moves (101, 102) (node {n})" for n in (1, 2, 3)]
    assert _check(again, [*once, Event(10, "reassign", MOVES_TOPIC, (101, 102))]).ok
    assert _check(events=[*LOG, Event(9, "reassign", MOVES_TOPIC, (103, 101))]).phantom == [
        "reassign moves (103, 101)"]


def test_a_deleted_topic_created_again_reappears() -> None:
    verdict = _check(events=[*LOG, Event(9, "create", "w-00000")], brokers=LIVE | {"w-00000"})
    assert verdict.reappeared == ["w-00000 (node 1)", "w-00000 (node 2)", "w-00000 (node 3)"]
    assert verdict.final and "w-00000" in verdict.final[0]


def test_a_record_no_request_carried_is_a_phantom() -> None:
    failed = [*HISTORY, _op("create", "w-00002", None, 6.0, 6.5, outcome="failed")]
    verdict = _check(failed, [*LOG, Event(9, "create", "w-00002"), Event(10, "config", MOVES_TOPIC, 77)],
                     brokers=LIVE | {"w-00002"})
    assert verdict.phantom == ["config moves 77", "create w-00002"]


def test_requests_committed_against_real_time_order_are_reordered() -> None:
    swapped = _log(("config", MOVES_TOPIC, 9), ("create", "w-00000", None), ("reassign", MOVES_TOPIC, (101, 102)),
                   ("create", "w-00001", None), ("delete", "w-00000", None))
    assert _check(events=swapped).reordered == [("create w-00000", "config moves 9")]


def test_a_topic_not_described_in_time_is_invisible() -> None:
    ops = [_op("create", "w-00000", None, 0.0, 1.0, visible_s=VISIBLE_BOUND_S + 1),
           _op("create", "w-00001", None, 1.0, 2.0, visible_s=None)]
    verdict = _check(ops, _log(("create", "w-00000", None), ("create", "w-00001", None)),
                     brokers={DATA_TOPIC, MOVES_TOPIC, "w-00000", "w-00001"})
    assert verdict.invisible == ["w-00000", "w-00001"]


def test_final_replicas_must_be_the_last_acknowledged_reassignment_or_a_later_unknown_one() -> None:
    assert _check(replicas=(103, 101)).final == [
        "moves-0 moves to (103, 101), not one of [(101, 102)]"]
    later = [*HISTORY, _op("reassign", MOVES_TOPIC, (102, 103), 6.0, 7.0, outcome="unknown")]
    assert _check(later, replicas=(102, 103)).ok


def test_acknowledged_records_read_back_other_than_once_are_named() -> None:
    verdict = _check(back=Counter({"a-0": 2, "z-9": 2}))
    assert verdict.records == ["a-0 read 2 times", "a-1 read 0 times", "z-9 read 2 times"]


def test_events_are_read_from_a_metadata_log_segment(tmp_path: Path) -> None:
    part = tmp_path / PARTITION
    part.mkdir()
    topic_id, moves_id = Uuid.random(), Uuid.random()
    messages = [
        TopicRecord(name="w-00000", topic_id=topic_id),
        ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=MOVES_TOPIC, name=TOPIC_CONFIG, value="9"),
        ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="other", name=TOPIC_CONFIG, value="8"),
        RemoveTopicRecord(topic_id=topic_id),
        TopicRecord(name=MOVES_TOPIC, topic_id=moves_id),
        PartitionRecord(topic_id=moves_id, partition_id=0, replicas=[102, 103], isr=[102, 103], leader=102),
        # a move to 101 and 102 starts, is replaced by one back to 102 and 103 (adding left
        # as it was, as Kafka leaves it), then one to 103 and 101 completes
        PartitionChangeRecord(topic_id=moves_id, partition_id=0, replicas=[101, 102, 103], removing_replicas=[103],
                              adding_replicas=[101]),
        PartitionChangeRecord(topic_id=moves_id, partition_id=0, replicas=[102, 103, 101], removing_replicas=[101]),
        PartitionChangeRecord(topic_id=moves_id, partition_id=0, isr=[102, 103, 101]),
        PartitionChangeRecord(topic_id=moves_id, partition_id=0, replicas=[103, 101, 102], removing_replicas=[102],
                              adding_replicas=[]),
        PartitionChangeRecord(topic_id=moves_id, partition_id=0, replicas=[103, 101], removing_replicas=[],
                              isr=[103, 101]),
    ]
    batch = build_batch([SimpleRecord(value=encode_record(m, 0), timestamp=0) for m in messages], base_offset=0)
    (part / "00000000000000000000.log").write_bytes(batch)
    assert committed_events(tmp_path, 4) == [
        Event(0, "create", "w-00000"), Event(1, "config", MOVES_TOPIC, 9), Event(3, "delete", "w-00000")]
    assert committed_events(tmp_path, 100)[3:] == [
        Event(4, "create", MOVES_TOPIC), Event(6, "reassign", MOVES_TOPIC, (101, 102)),
        Event(7, "reassign", MOVES_TOPIC, (102, 103)), Event(9, "reassign", MOVES_TOPIC, (103, 101))]
