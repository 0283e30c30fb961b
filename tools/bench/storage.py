"""Storage section: the metadata log against the machine's own limits, measured in the same run.

Rows:

* append + fsync of 8 KiB and 1 MiB KRaft data batches (``MetadataLog.append_as_leader`` then
  ``flush``), as bytes/s, against raw ``write`` + ``fdatasync`` of the same sizes to a plain file
  in the same directory;
* recovery time of a log (1 GiB; 64 MiB with ``--quick``) on open (``MetadataLog.open`` re-checks
  every batch's CRC and rebuilds the indexes, as Kafka does for the metadata log), against the
  time to read the same segment files and CRC-32C them (the ``crc32c`` package) in one pass.

Each side runs several rounds, kwire and reference alternating so that both meet the same disk
weather (fsync latency on shared or virtual disks drifts by an order of magnitude within minutes);
the table shows the median and, in parentheses, the best round. Ratios are kwire / reference as
throughputs (of the medians), so 1.0 means the physical limit. The log lives under
``KWIRE_BENCH_DIR`` (default: a temporary directory on the disk holding the working tree — never
tmpfs, where fsync costs nothing).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import crc32c

from kwire.topics import METADATA_PARTITION_DIR
from storage.control import build_data_batch
from storage.log import MetadataLog
from storage.segment import LogConfig
from tools.bench.core import Result

SECTION = "storage"
RECORD_BYTES = 1024
ROUNDS = 5  # per side; 2 with --quick
_CHUNK = 8 * 1024 * 1024


def _bench_dir() -> Path:
    base = os.environ.get("KWIRE_BENCH_DIR") or str(Path.cwd() / "build")
    Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="kwire-bench-", dir=base))


def _batch(base_offset: int, batch_bytes: int) -> tuple[bytes, int]:
    """A data batch of about ``batch_bytes`` and its record count. The values are framed-looking
    (KRaft data records must be non-empty); their content is opaque to the log."""
    count = max(1, batch_bytes // (RECORD_BYTES + 10))
    value = b"\x01\x14\x00" + b"x" * (RECORD_BYTES - 3)
    batch = build_data_batch([value] * count, base_offset=base_offset, partition_leader_epoch=1,
                             append_time_ms=int(time.time() * 1000))
    return batch, count


def _raw_write_fsync(path: Path, size: int, total: int) -> float:
    """Bytes/s of write + fdatasync in ``size``-byte chunks."""
    chunk = os.urandom(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        written = 0
        while written < total:
            os.write(fd, chunk)
            os.fdatasync(fd)
            written += size
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return written / elapsed


def _log_append_fsync(directory: Path, batch_bytes: int, total: int) -> tuple[float, int]:
    """Bytes/s of append_as_leader + flush per batch; returns (rate, batch size). The batches
    are built before the clock starts: the log stores bytes that arrive already encoded."""
    log = MetadataLog.open(directory)
    try:
        offset = log.log_end_offset
        batches: list[bytes] = []
        built = 0
        while built < total:
            batch, count = _batch(offset, batch_bytes)
            batches.append(batch)
            offset += count
            built += len(batch)
        start = time.perf_counter()
        for batch in batches:
            log.append_as_leader(batch, epoch=1)
            log.flush()
        elapsed = time.perf_counter() - start
        written, size = built, len(batches[-1])
    finally:
        log.close()
    return written / elapsed, size


def _fill_log(directory: Path, total: int) -> int:
    log = MetadataLog.open(directory, config=LogConfig(segment_bytes=256 * 1024 * 1024))
    try:
        offset = 0
        written = 0
        while written < total:
            batch, count = _batch(offset, 1024 * 1024)
            log.append_as_leader(batch, epoch=1)
            offset += count
            written += len(batch)
        log.flush()
    finally:
        log.close()
    return written


def _read_and_crc(directory: Path) -> float:
    """Seconds to read every segment file and CRC-32C it."""
    start = time.perf_counter()
    for path in sorted((directory / METADATA_PARTITION_DIR).glob("*.log")):
        with open(path, "rb") as f:
            crc = 0
            while chunk := f.read(_CHUNK):
                crc = crc32c.crc32c(chunk, crc)
    return time.perf_counter() - start


def _recover(directory: Path) -> float:
    start = time.perf_counter()
    log = MetadataLog.open(directory)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed


def run(args: Any) -> list[Result]:
    quick = bool(getattr(args, "quick", False))
    rounds = 2 if quick else ROUNDS
    root = _bench_dir()
    results: list[Result] = []
    try:
        for batch_bytes, total in ((8 * 1024, 4 * 1024 * 1024), (1024 * 1024, 64 * 1024 * 1024)):
            if quick:
                total //= 8
            rates: list[float] = []
            raws: list[float] = []
            size = 0
            for i in range(rounds):
                log_dir = root / f"append-{batch_bytes}-{i}"
                rate, size = _log_append_fsync(log_dir, batch_bytes, total)
                shutil.rmtree(log_dir)
                rates.append(rate)
                raws.append(_raw_write_fsync(root / "raw.bin", size, total))
            label = "8 KiB" if batch_bytes < 1024 * 1024 else "1 MiB"
            results.append(Result(
                section=SECTION, what=f"append+fsync {label} batches", unit="B/s",
                kwire=statistics.median(rates), reference=statistics.median(raws),
                kwire_best=max(rates), reference_best=max(raws), reference_name="write+fdatasync",
                conditions=f"{total} B in {size} B batches, one flush per batch, median of {rounds} "
                           f"alternating rounds; reference: write+fdatasync of {size} B chunks to a "
                           f"plain file, same directory",
                bytes_per_op=1,
            ))
        total = (64 if quick else 1024) * 1024 * 1024
        log_dir = root / "recovery"
        size = _fill_log(log_dir, total)
        _read_and_crc(log_dir)  # warm the page cache for both sides alike
        recover_runs: list[float] = []
        crc_runs: list[float] = []
        for _ in range(max(3, rounds)):
            recover_runs.append(_recover(log_dir))
            crc_runs.append(_read_and_crc(log_dir))
        results.append(Result(
            section=SECTION, what=f"recovery of a {size >> 20} MiB log", unit="s",
            kwire=statistics.median(recover_runs), reference=statistics.median(crc_runs),
            kwire_best=min(recover_runs), reference_best=min(crc_runs), reference_name="read+crc32c",
            conditions=f"{size} B in 1 MiB batches, page cache warm, median of {len(crc_runs)} "
                       f"alternating runs; reference: read the same .log files and CRC-32C them "
                       f"with the crc32c package",
            higher_is_better=False,
        ))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results
