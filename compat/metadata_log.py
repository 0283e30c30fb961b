"""The metadata partition's log in the compat tests: its segments, batches and records, a stock
controller run until its log holds something, and stock DumpLogSegments against ``kwire dump-log``.

Part of the harness (:mod:`compat.harness` re-exports it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat.kafka import stop_processes
from compat.stock_release import KafkaRelease
from messages.metadata import decode_record
from messages.runtime import Message
from storage.batch_scan import scan_batches
from storage.records import RecordBatch

__all__ = [
    "PARTITION",
    "assert_dumps_match",
    "batches_below",
    "log_batches",
    "metadata_records",
    "run_stock_controller",
    "segment_files",
]

PARTITION = "__cluster_metadata-0"


# -- logs -------------------------------------------------------------------------------------

def segment_files(part: Path) -> list[Path]:
    """The ``.log`` segments of a partition directory, oldest first."""
    return sorted(part.glob("*.log"))


def log_batches(part: Path) -> list[RecordBatch]:
    """Every batch of a partition directory's segments, in order."""
    batches: list[RecordBatch] = []
    for segment in segment_files(part):
        batches += scan_batches(segment.read_bytes()).batches
    return batches


def metadata_records(data: Path) -> Iterator[tuple[Message, int]]:
    """Every data record of the metadata log under the log directory ``data``, in offset
    order, decoded as ``(message, version)`` (control batches left out)."""
    for batch in log_batches(data / PARTITION):
        if not batch.is_control:
            for value in batch.iter_values():
                assert value is not None
                yield decode_record(value)


def batches_below(data: Path, high_watermark: int) -> list[bytes]:
    """The bytes of each metadata-log batch under the log directory ``data`` that ends below
    ``high_watermark``."""
    return [b.to_bytes() for b in log_batches(data / PARTITION) if b.last_offset < high_watermark]


def run_stock_controller(
    kafka: KafkaRelease, props: Path, part: Path, logs: Path, done: Callable[[list[RecordBatch]], bool],
    while_running: Callable[[], None] | None = None, timeout_s: float = 180.0,
) -> None:
    """Start a stock controller, wait until ``done`` holds for its log in ``part`` (then call
    ``while_running``), stop it gracefully. Its output goes to ``logs``."""
    logs.mkdir(exist_ok=True)
    with open(logs / "stdout.txt", "ab") as out, open(logs / "stderr.txt", "ab") as err:
        proc = kafka.start("kafka.Kafka", [props], logs_dir=logs, stdout=out.fileno(), stderr=err.fileno())
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                batches = log_batches(part) if part.exists() else []
                if done(batches):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (logs / "stderr.txt").read_text(errors="replace")[-3000:]
                    server_log = logs / "server.log"
                    if server_log.exists():
                        tail += server_log.read_text(errors="replace")[-3000:]
                    pytest.fail(f"stock controller {kafka.version} did not get there (exit {proc.poll()}):\n{tail}")
                time.sleep(0.2)  # poll interval
            if while_running is not None:
                while_running()
        finally:
            stop_processes([proc])


_REPORT_PREFIXES = (
    "Mismatches in", "  Index offset", "Found timestamp mismatch", "  Index timestamp",
    "Found out of order", "The following indexed offsets", "Indexed offset", "Non-consecutive",
)


def assert_dumps_match(kafka: KafkaRelease, files: list[Path], **flags: bool) -> str:
    """Stock DumpLogSegments and kwire dump-log print the same lines, and report the same index
    problems on stderr; returns the stock output. ``flags`` are dump-log's options, e.g.
    ``cluster_metadata_decoder=True``."""
    args = [f"--{name.replace('_', '-')}" for name, on in flags.items() if on]
    stock = kafka.run_tool("dump-log", [*args, "--files", ",".join(map(str, files))])
    mine, errors = kafka.kwire_dump(files, **flags)
    assert mine.splitlines() == stock.stdout.splitlines()
    lines = stock.stderr.splitlines()
    stock_report = []
    for i, line in enumerate(lines):
        # The Java DumpLogSegments (4.3+) reports every file that does not start at offset 0 as
        # "-1 is followed by <first offset>" (it lost 3.9's first-record check); kwire keeps 3.9's.
        if line.startswith("Non-consecutive") and i + 1 < len(lines) and lines[i + 1].startswith("  -1 is followed by"):
            continue
        if line.startswith(_REPORT_PREFIXES) or (line.startswith("  ") and " is followed by " in line and "-1 is" not in line):
            stock_report.append(line)
    assert errors.splitlines() == stock_report
    return stock.stdout
