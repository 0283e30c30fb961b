"""``tools.bench.log_tail.LogTail``: each read returns the whole batches appended since the one
before, a segment deleted by retention loses nothing already read, and a tail made while a batch
was half written starts at the next batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storage.control import build_data_batch
from tools.bench.log_tail import LogTail


def _batch(base_offset: int) -> bytes:
    return build_data_batch([b"v%d" % base_offset], base_offset=base_offset, partition_leader_epoch=1,
                            append_time_ms=base_offset)


def _bases(batches: list[Any]) -> list[int]:
    return [b.base_offset for b in batches]


def test_each_read_returns_what_was_appended_since_the_last(tmp_path: Path) -> None:
    first = tmp_path / "00000000000000000000.log"
    first.write_bytes(_batch(0) + _batch(1))
    tail = LogTail(tmp_path)
    assert tail.read() == []
    with first.open("ab") as log:
        log.write(_batch(2))
    second = tmp_path / "00000000000000000003.log"
    second.write_bytes(_batch(3))
    assert _bases(tail.read()) == [2, 3]
    assert tail.read() == []
    first.unlink()  # retention
    with second.open("ab") as log:
        log.write(_batch(4) + _batch(5)[:20])  # the next one half written
    assert _bases(tail.read()) == [4]
    with second.open("ab") as log:
        log.write(_batch(5)[20:])
    assert _bases(tail.read()) == [5]


def test_a_tail_made_mid_batch_starts_at_the_next_whole_batch(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    whole = _batch(0) + _batch(1)
    segment.write_bytes(whole[: len(_batch(0)) + 10])  # batch 1 half written
    tail = LogTail(tmp_path)
    with segment.open("ab") as log:
        log.write(whole[len(_batch(0)) + 10:] + _batch(2))
    assert _bases(tail.read()) == [1, 2]
    assert tail.read() == []
