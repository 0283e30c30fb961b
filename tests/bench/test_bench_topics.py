"""Smoke run of the topics section (``tools.bench.topics``): a tiny run on each side gives every
figure with every topic created, and no process is left. Figures are never asserted on:
benchmarks are not tests."""

from __future__ import annotations

from pathlib import Path

from compat.kafka import require_kafka
from tests.bench import leftover_processes
from tools.bench import topics


def test_tiny_runs_report_every_figure_and_leave_no_process(tmp_path: Path) -> None:
    require_kafka(topics.KAFKA_VERSION)
    load = topics.Load(5, "test: 5 topics")
    for kind in ("kwire", "kafka"):
        row = topics.run_side(kind, kind, load, tmp_path, nodes=1)  # the 3-node quorums are the bench's
        assert row.error is None, row.error
        assert row.errors == 0
        assert row.wall_s is not None and row.wall_s > 0
        assert row.p50_ms is not None and row.p99_ms is not None and 0 < row.p50_ms <= row.p99_ms
        assert row.cpu_s_per_100 is not None and row.cpu_s_per_100 >= 0
    assert leftover_processes(tmp_path) == []
