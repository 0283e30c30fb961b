"""The scale section (``tools.bench.scale``) at a size a test can afford: every figure is
measured, and the snapshot it writes is one kwire loads back whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.snapshot_format import read_snapshot_content
from tools.bench.scale import PARTITIONS_PER_TOPIC, measure_point, start_on_snapshot


def test_a_small_point_reports_every_figure_and_writes_a_whole_snapshot(tmp_path: Path) -> None:
    partitions = PARTITIONS_PER_TOPIC + 500  # a full topic and a partial one
    point = measure_point(partitions, 6, tmp_path)
    assert point["topics"] == 2
    # (the image's bytes are an RSS difference: at this size freed arenas can hide them)
    assert point["replay_records_per_s"] > 0 and point["load_s"] > 0 and point["build_s"] > 0
    # broker 3 of 6 is in the ISR of about half of the partitions (RF 3): one change each
    assert partitions // 4 < point["fence_records"] < partitions * 3 // 4
    data = Path(point["snapshot_path"]).read_bytes()
    assert len(data) == point["snapshot_bytes"]
    records = read_snapshot_content(data).data_records()
    # metadata.version, six brokers, two topics and their partitions
    assert len(records) == 1 + 6 + 2 + partitions


def test_a_kwire_controller_started_on_the_snapshot_serves_its_topics(tmp_path: Path) -> None:
    point = measure_point(PARTITIONS_PER_TOPIC + 10, 3, tmp_path / "point")
    started = start_on_snapshot("kwire", Path(point["snapshot_path"]), point["topics"], tmp_path / "started")
    assert 0 < started < 120
    assert "loaded snapshot" in (tmp_path / "started" / "kwire.out").read_text()


def test_a_controller_that_did_not_load_the_snapshot_is_caught(tmp_path: Path) -> None:
    point = measure_point(PARTITIONS_PER_TOPIC + 10, 3, tmp_path / "point")
    with pytest.raises(RuntimeError, match="did not load the snapshot"):  # it names a topic the image lacks
        start_on_snapshot("kwire", Path(point["snapshot_path"]), point["topics"] + 1, tmp_path / "started")
