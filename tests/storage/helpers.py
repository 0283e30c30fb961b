"""Builders shared by the storage tests."""

from __future__ import annotations

from storage.control import build_data_batch
from storage.log import MetadataLog
from storage.segment import LogConfig

SMALL = LogConfig(segment_bytes=8 * 1024, index_interval_bytes=4096)


def data_batch(base_offset: int, epoch: int = 1, records: int = 3, value_size: int = 50, ts: int = 1000) -> bytes:
    values = [bytes([65 + (base_offset + i) % 26]) * value_size for i in range(records)]
    return build_data_batch(values, base_offset=base_offset, partition_leader_epoch=epoch, append_time_ms=ts)


def fill(log: MetadataLog, batches: int, epoch: int = 1, records: int = 3, value_size: int = 50) -> list[bytes]:
    """Append `batches` single-batch sets; return their bytes."""
    out = []
    for _ in range(batches):
        raw = data_batch(log.log_end_offset, epoch, records, value_size, ts=1000 + log.log_end_offset)
        log.append_as_follower(raw)
        out.append(raw)
    return out


def all_batches(log: MetadataLog) -> list[bytes]:
    return [b.to_bytes() for b in log.iter_batches()]
