"""The quorum section's report (``tools.bench.quorum_report``), drawn from rows as the section
keeps them (no cluster is started): the page names every side and load, and every image it
names exists as a PNG of the size the page gives it. Figures are never asserted on."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

from tools.bench import core, quorum, quorum_report
from tools.bench.failover import FailoverRow, Round

LOADS = (1_000, 20_000, 160_000)


def _rows() -> list[quorum.Row]:
    rows = []
    for linger in quorum.LINGERS_MS:
        for n, load in enumerate(LOADS):
            rows.append(quorum.Row("kwire", linger, load, p50=2.0 + n, p75=3.0 + n, p99=9.0 + n, p999=20.0,
                                   records_per_s=load * 0.99, offered_per_s=float(load), skipped=0,
                                   cpu_s_per_million=5.0 - n, window_s=30.0, note="leader 1"))
            if load == LOADS[-1] and linger == 0:  # a side without figures at one load
                rows.append(quorum.Row(f"Kafka {quorum.KAFKA_VERSION}", linger, load,
                                       error="QuorumRunError: no usable TestRaftServer line"))
                continue
            rows.append(quorum.Row(f"Kafka {quorum.KAFKA_VERSION}", linger, load, p75=4.0 + n, p99=12.0 + n,
                                   p999=30.0, records_per_s=float(load), offered_per_s=float(load),
                                   cpu_s_per_million=6.0 - n, window_s=32.0, note="no p50"))
    return rows


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", path
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _check_page(index: Path) -> str:
    page = index.read_text(encoding="utf-8")
    images = re.findall(r'<img src="([^"]+)" width="(\d+)" height="(\d+)"', page)
    assert len(images) == len(quorum_report.PLOTS), images
    for name, width, height in images:
        assert _png_size(index.parent / name) == (int(width), int(height)), name
    for load in LOADS:
        assert f"<td>{load:,}</td>" in page
    assert "kwire" in page and f"Kafka {quorum.KAFKA_VERSION}" in page
    return page


def test_the_report_draws_every_plot_the_page_names(tmp_path: Path) -> None:
    failovers = [FailoverRow("kwire", [Round("SIGTERM", 1, 2, 2, 3, 180)])]
    quorum_report.save(tmp_path, [asdict(r) for r in _rows()], [asdict(f) for f in failovers],
                       environment="test machine", command="python -m tools.bench quorum --throughput")
    page = _check_page(quorum_report.write_report(tmp_path))
    assert "no usable TestRaftServer line" in page  # the side without figures says why
    assert "SIGTERM 180" in page


def test_the_report_draws_the_rows_of_a_json_run(tmp_path: Path) -> None:
    """``--from-json``: the rows come back out of the runner's results (each figure's extra)."""
    results = quorum.to_results(_rows(), quorum.QUICK)
    out = tmp_path / "bench.json"
    core.write_json(str(out), core.environment(), results)
    assert quorum_report.main([str(tmp_path / "report"), "--from-json", str(out)]) == 0
    kept = json.loads((tmp_path / "report" / quorum_report.ROWS_FILE).read_text(encoding="utf-8"))["rows"]
    # every kwire row comes back; a Kafka row without figures is kept beside its kwire row
    assert sorted((r["implementation"], r["linger_ms"], r["load"]) for r in kept) == sorted(
        (r.implementation, r.linger_ms, r.load) for r in _rows())
    _check_page(tmp_path / "report" / "index.html")
