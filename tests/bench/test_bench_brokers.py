"""Smoke run of the brokers section (``tools.bench.brokers``): a tiny load on each side gives
every figure, and no process is left. Figures are never asserted on: benchmarks are not tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.kafka import require_kafka
from tests.bench import leftover_processes
from tools.bench import brokers


@pytest.mark.slow
def test_tiny_runs_report_every_figure_and_leave_no_process(tmp_path: Path) -> None:
    require_kafka(brokers.KAFKA_VERSION)
    load = brokers.Load(
        5, 0.5, 2.5, "test: 5 brokers", controllers=1, session_timeout_ms=1500, heartbeat_interval_ms=250
    )
    for kind in ("kwire", "kafka"):
        row = brokers.run_side(kind, kind, load, tmp_path)
        assert row.error is None, row.error
        assert row.p50 is not None and row.p99 is not None and row.max_ms is not None
        assert 0 < row.p50 <= row.p99 <= row.max_ms
        assert row.heartbeats_per_s is not None and row.heartbeats_per_s > 0
        assert row.all_unfenced_s is not None and row.all_unfenced_s > 0
        assert row.cpu_s_per_1000 is not None and row.cpu_s_per_1000 >= 0
        assert row.kill_to_new_leaders_s is not None and row.kill_to_new_leaders_s > 0
        # the session ends a timeout (1.5 s) after the last answered heartbeat, sent at most an
        # interval (0.25 s) before the kill: after the kill, and before the new leaders
        assert row.expiry_to_new_leaders_s is not None
        assert -0.1 < row.expiry_to_new_leaders_s < row.kill_to_new_leaders_s
        assert row.errors == 0
    assert leftover_processes(tmp_path) == []
