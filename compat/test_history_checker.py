"""The history checker of the fault tests (``compat/faults/history.py``) on made-up histories:
it passes a clean one and names each kind of violation, and reads the workload's values from
a metadata log segment."""

from __future__ import annotations

from pathlib import Path

from compat.faults.history import (
    BROKER_RESOURCE,
    CONFIG_NAME,
    FIRST_VALUE,
    Op,
    check,
    committed_values,
)
from compat.harness import PARTITION
from messages.generated.config_record import ConfigRecord
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import encode_record
from messages.runtime import Message
from storage.batch_builder import build_batch
from storage.record_codec import SimpleRecord

V = FIRST_VALUE


def _ops(*spec: tuple[int, float, float, str]) -> list[Op]:
    """(value offset, invoked, completed, outcome) -> ops."""
    return [Op(value=V + n, node=1, invoked_s=a, completed_s=b, outcome=o) for n, a, b, o in spec]


def _same(*values: int) -> dict[int, list[int]]:
    return {node: [V + v for v in values] for node in (1, 2, 3)}


def test_a_clean_history_passes() -> None:
    ops = _ops((0, 0.0, 1.0, "ok"), (1, 1.5, 2.0, "failed"), (2, 2.5, 9.0, "unknown"), (3, 3.0, 4.0, "ok"))
    verdict = check(ops, _same(0, 2, 3))
    assert verdict.ok, verdict
    assert (verdict.acknowledged, verdict.failed, verdict.unknown, verdict.unknown_committed) == (2, 1, 1, 1)
    assert check(ops, _same(0, 3)).ok  # an unknown write may also be missing


def test_a_lost_acknowledged_write_is_named() -> None:
    ops = _ops((0, 0.0, 1.0, "ok"), (1, 1.5, 2.0, "ok"))
    verdict = check(ops, _same(0))
    assert not verdict.ok and verdict.lost == [V + 1]


def test_writes_committed_against_real_time_order_are_named() -> None:
    ops = _ops((0, 0.0, 1.0, "ok"), (1, 2.0, 3.0, "ok"))
    assert check(ops, _same(1, 0)).reordered == [(V + 0, V + 1)]
    overlapping = _ops((0, 0.0, 3.0, "ok"), (1, 1.0, 2.0, "ok"))
    assert check(overlapping, _same(1, 0)).ok  # concurrent writes may commit in either order


def test_a_failed_or_unknown_value_committed_is_a_phantom() -> None:
    ops = _ops((0, 0.0, 1.0, "failed"))
    assert check(ops, _same(0)).phantom == [V]
    assert check(ops, _same(7)).phantom == [V + 7]


def test_duplicates_and_diverged_voters_are_named() -> None:
    ops = _ops((0, 0.0, 1.0, "ok"), (1, 1.5, 2.0, "ok"))
    assert check(ops, _same(0, 1, 1)).duplicated == [V + 1]
    split = {1: [V, V + 1], 2: [V, V + 1], 3: [V + 1, V]}
    assert check(ops, split).diverged == [3]


def test_committed_values_reads_the_workload_records_below_the_high_watermark(tmp_path: Path) -> None:
    def value(record: Message) -> SimpleRecord:
        return SimpleRecord(value=encode_record(record, 0), timestamp=0)

    def config(n: int, name: str = CONFIG_NAME) -> SimpleRecord:
        return value(ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="", name=name, value=str(V + n)))

    first = build_batch([config(0), value(NoOpRecord()), config(1, "log.cleaner.threads")], base_offset=0)
    second = build_batch([config(2), config(3)], base_offset=3)
    (tmp_path / PARTITION).mkdir()
    (tmp_path / PARTITION / f"{0:020d}.log").write_bytes(first + second)
    assert committed_values(tmp_path, high_watermark=4) == [V + 0, V + 2]
    assert committed_values(tmp_path, high_watermark=5) == [V + 0, V + 2, V + 3]
