"""The quorum bench section's pieces: Kafka TestRaftServer's line parsed, CPU read from /proc,
DevCluster's report interval passed through, tables with a failed side, and one tiny kwire run
(three ``kwire test-raft-server`` processes, 2 s windows: ~10-20 s on a loaded 2-core machine)
whose processes are all gone afterwards. Figures are never asserted on: benchmarks are not tests.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.bench import leftover_processes
from tools.bench import quorum
from tools.bench.core import Tail
from tools.local_cluster import DevCluster

KAFKA_FORMAT = "Throughput (bytes/second): %.2f, Latency (ms): %.1f p75 %.1f p99 %.1f p999"


def test_kafka_line_is_parsed() -> None:
    line = KAFKA_FORMAT % (5120000.5, 3.0, 27.5, 249.0)
    assert quorum.parse_kafka_line(line) == (5120000.5, 3.0, 27.5, 249.0)
    assert quorum.parse_kafka_line("[2026-11-21 02:15:30,777] WARN [RaftManager id=2] ...") is None


def test_cpu_seconds_reads_utime_and_stime_with_the_reaped_children_s() -> None:
    """A forked child's CPU counts once it is reaped, as a node's snapshot builders' does."""
    tick = 1 / os.sysconf("SC_CLK_TCK")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child burns 0.2 s of CPU and leaves
        start = time.process_time()
        while time.process_time() - start < 0.2:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
    times = os.times()
    measured = quorum.cpu_seconds([os.getpid()])
    own = times.user + times.system
    children = times.children_user + times.children_system
    assert children >= 0.2 - 2 * tick
    assert abs(measured - (own + children)) <= 4 * tick + 0.02


def test_tail_returns_only_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "out"
    tail = Tail(path)
    assert tail.lines() == []
    path.write_bytes(b"one\ntw")
    assert tail.lines() == ["one"]
    with path.open("ab") as f:
        f.write(b"o\nthree\n")
    assert tail.lines() == ["two", "three"]
    assert tail.lines() == []


def test_dev_cluster_passes_the_report_interval(tmp_path: Path) -> None:
    cluster = DevCluster.create(tmp_path / "c", 1, base_port=None, workload=(100, 256),
                                properties={quorum.LINGER_KEY: "0"}, stats_interval_ms=1234)
    command = cluster.command(1)
    assert command[command.index("--stats-interval-ms") + 1] == "1234"
    assert f"{quorum.LINGER_KEY}=0" in cluster.nodes[1].config_path.read_text().splitlines()
    reopened = DevCluster.open(tmp_path / "c", workload=(100, 256))
    assert "--stats-interval-ms" not in reopened.command(1)  # default: the tool's own interval


def test_kafka_configuration_is_a_static_quorum(tmp_path: Path) -> None:
    text = quorum.kafka_server_properties(2, 9001, "1@localhost:9000,2@localhost:9001", tmp_path, 0)
    lines = text.splitlines()
    assert "node.id=2" in lines and "listeners=CONTROLLER://localhost:9001" in lines
    assert "controller.quorum.voters=1@localhost:9000,2@localhost:9001" in lines
    assert f"metadata.log.dir={tmp_path}" in lines and f"{quorum.LINGER_KEY}=0" in lines


def test_tables_keep_kwire_rows_when_kafka_failed() -> None:
    rows = [
        quorum.Row("kwire", 25, p50=2.0, p75=3.0, p99=9.0, p999=12.0, records_per_s=19990.0,
                   offered_per_s=20000.0, skipped=0, cpu_s_per_million=40.0, window_s=30.0),
        quorum.Row("Kafka 4.4.0", 25, error="not run: no `java` on PATH"),
    ]
    text = quorum.format_rows(rows)
    assert "19,990" in text and "error: not run: no `java` on PATH" in text
    results = quorum.to_results(rows, quorum.FULL)
    assert [r.what for r in results] == [
        "commit latency p50, linger 25 ms", "commit latency p75, linger 25 ms",
        "commit latency p99, linger 25 ms", "committed records/s, linger 25 ms",
        "CPU-s per million records, linger 25 ms"]
    assert all(r.reference is None and r.section == "quorum" for r in results)
    assert results[3].higher_is_better and not results[2].higher_is_better


def test_tiny_kwire_run_over_tls_reports_and_leaves_no_process(tmp_path: Path) -> None:
    """On SSL listeners (``--tls``): the nodes replicate and report over TLS."""
    timing = quorum.Timing(2.0, 32.0, 90.0, "test: 2 s windows")
    row = quorum.run_kwire(0, timing, tmp_path, listener="SSL")
    assert row.error is None and row.implementation == "kwire" and row.linger_ms == 0
    assert row.listener == "SSL" and row.label == "kwire over TLS"
    assert row.p50 is not None and row.p75 is not None and row.p99 is not None
    assert row.p999 is not None and 0 <= row.p50 <= row.p75 <= row.p99 <= row.p999
    assert row.records_per_s is not None and row.records_per_s > 0
    assert row.skipped is not None and row.skipped >= 0
    assert row.cpu_s_per_million is not None and row.cpu_s_per_million > 0
    assert row.window_s is not None and row.window_s > 0
    assert leftover_processes(tmp_path) == []


def test_kafka_gets_the_same_tls_settings_last(tmp_path: Path) -> None:
    tls = quorum.tls_properties(tmp_path)
    assert (tmp_path / "pki" / "ca.pem").exists() and (tmp_path / "pki" / "server.pem").exists()
    lines = quorum.kafka_server_properties(1, 9000, "1@localhost:9000", tmp_path, 25, tls).splitlines()
    assert lines[-len(tls):] == [f"{k}={v}" for k, v in tls.items()]
    assert "listener.security.protocol.map=CONTROLLER:SSL" in lines
    assert quorum.tls_properties(tmp_path) == tls  # the authority is made once


def test_throughput_flag_parses_a_load_list() -> None:
    assert quorum.parse_loads(None) == (quorum.THROUGHPUT,)
    assert quorum.parse_loads(quorum.CURVE) == (1000, 5000, 10000, 20000, 40000, 80000, 160000)
    assert quorum.parse_loads("20k, 1.5k,20000") == (1500, 20000)
    for bad in ("0", "-5", "fast", ""):
        try:
            quorum.parse_loads(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


def _curve_row(name: str, linger: int, load: int, committed: float, skipped: int | None) -> quorum.Row:
    return quorum.Row(name, linger, load, p75=3.0, p99=9.0, p999=12.0, records_per_s=committed,
                      offered_per_s=float(load), skipped=skipped, cpu_s_per_million=40.0, window_s=30.0)


def test_load_curve_names_each_load_and_the_saturation_point() -> None:
    rows = [
        _curve_row("kwire", 0, 1000, 1000.0, 0),
        _curve_row("kwire", 0, 5000, 4990.0, 0),
        _curve_row("kwire", 0, 10000, 9000.0, 0),  # below 97 % committed: does not keep up
        _curve_row("kwire", 0, 20000, 19990.0, 0),  # keeps up again, but the curve broke below it
        _curve_row("Kafka 4.4.0", 0, 1000, 1000.0, None),
        _curve_row("Kafka 4.4.0", 0, 5000, 5000.0, None),
        _curve_row("Kafka 4.4.0", 0, 10000, 10000.0, None),
        _curve_row("Kafka 4.4.0", 0, 20000, 20000.0, None),
        _curve_row("kwire", 25, 1000, 1000.0, 12),  # skipped load: does not keep up
    ]
    assert quorum.saturation(rows, "kwire", 0) == 5000
    assert quorum.saturation(rows, "Kafka 4.4.0", 0) == 20000
    assert quorum.saturation(rows, "kwire", 25) is None
    text = quorum.format_rows(rows)
    assert ("kwire, linger 0 ms: keeps up (no skipped records, >= 97% committed) up to 5,000 rec/s "
            "(not at the next measured load)") in text
    assert ("Kafka 4.4.0, linger 0 ms: keeps up (no skipped records, >= 97% committed) up to 20,000 rec/s, "
            "the highest measured (its saturation point lies above)") in text
    assert "kwire, linger 25 ms: keeps up (no skipped records, >= 97% committed) up to no measured load" in text
    whats = [r.what for r in quorum.to_results(rows, quorum.FULL)]
    assert "commit latency p99, linger 0 ms at 5,000 rec/s" in whats
    assert "commit latency p99, linger 0 ms" in whats  # the 20,000 rec/s headline keeps its name
    assert len(whats) == len(set(whats))
