"""Smoke test of the ``audit`` bench section on a tiny data set: the generated directories are
real KRaft logs, both scans count every row written, the result row is well-formed and the data
is removed afterwards. Figures are never asserted on: benchmarks are not tests.

Cost: about 1 MiB of data; runs on the shared Spark session (tests/audit/session.py), so a few
seconds when the audit tests already started it."""

from __future__ import annotations

import math
from argparse import Namespace
from pathlib import Path

import pytest

from tests.audit.session import shared_spark
from tools.audit.scan import parse_node_dirs, plan_file_parts, read_rows
from tools.bench import audit

pytestmark = pytest.mark.spark


def test_generated_logs_are_valid_kraft_segments(tmp_path: Path) -> None:
    data = audit.generate(tmp_path, 600_000)
    assert [Path(d).name for d in data["dirs"]] == list(audit.NODES)
    rows = [r for p in plan_file_parts(parse_node_dirs(data["dirs"])) for r in read_rows(p)]
    assert len(rows) == data["rows"]
    assert all(r[10] and r[19] is None for r in rows)  # crc_valid, no decode error
    per_node = len(rows) // 3
    node1 = rows[:per_node]
    assert [r[7] for r in node1] == list(range(per_node))  # contiguous offsets
    assert [r[8] for r in node1] == sorted(r[8] for r in node1)  # epochs non-decreasing
    assert {r[8] for r in node1} == set(range(1, audit.EPOCHS + 1))
    controls = [r for r in node1 if r[11]]
    assert [r[12] for r in controls][:3] == [2, 5, 6]  # LeaderChange, KRaftVersion, Voters
    assert sum(1 for r in controls if r[12] == 2) == audit.EPOCHS
    api_keys = {r[13] for r in node1 if not r[11]}
    assert {0, 3, 5, 2, 20} <= api_keys  # broker, partition, partition change, topic, no-op
    assert rows[per_node:2 * per_node] != [] and [r[7] for r in rows[per_node:2 * per_node]] == [
        r[7] for r in node1]


def test_section_counts_the_same_rows_on_both_sides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KWIRE_BENCH_DIR", str(tmp_path))
    spark = shared_spark()
    [result] = audit.run(Namespace(quick=True, runs=1, audit_bytes=1 << 20))
    assert result.section == "audit" and result.unit == "rows/s"
    assert result.reference_name == "scan_rows_python (1 process)"
    for value in (result.kwire, result.reference, result.ratio):
        assert value is not None and math.isfinite(value) and value > 0
    extra = result.extra
    assert extra["rows"] > 1000 and extra["bytes"] > (1 << 20) * 0.9
    assert len(extra["spark_s"]) == len(extra["python_s"]) == 1
    assert extra["partitions"] >= 3 and extra["json_chars"] > extra["rows"]
    assert list(tmp_path.iterdir()) == []  # the generated logs are gone
    assert not spark.sparkContext._jsc.sc().isStopped()  # a session it did not start stays up
