"""The metadata log as a benchmark watches it from outside: the batches a controller appended
since a moment (:class:`LogTail`, read from its segment files while it runs), and which of them
gave partitions new leaders (:func:`leader_moves`), to time a failover by the append times the
controller itself stamped (``PartitionChangeRecord``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["LogTail", "leader_moves"]


class LogTail:
    """The batches appended to the metadata log under ``segment_dir`` since this was made, a
    read at a time: each :meth:`read` returns only what was appended since the one before, so
    nothing is read twice (the log is 100+ MB at 10^6 partitions) and what a caller found stays
    found after retention deletes its segment."""

    def __init__(self, segment_dir: Path) -> None:
        self.segment_dir = segment_dir
        self._read_to = {segment: segment.stat().st_size for segment in segment_dir.glob("*.log")}

    def read(self) -> list[Any]:
        """The whole batches appended since the last read, in segment order. A segment whose
        end at creation was not a batch boundary (read mid-write) is read from its start, and
        the batches wholly before that end are left out."""
        from storage.batch_scan import scan_batches

        batches: list[Any] = []
        for segment in sorted(self.segment_dir.glob("*.log")):
            start = self._read_to.get(segment, 0)
            try:
                with segment.open("rb") as log:
                    log.seek(start)
                    data = log.read()
            except FileNotFoundError:  # deleted by retention since the glob
                continue
            scan = scan_batches(data)
            if start and data and not scan.batches:
                whole = scan_batches(segment.read_bytes())
                position = 0
                for batch in whole.batches:
                    position += batch.size_in_bytes
                    if position > start:
                        batches.append(batch)
                self._read_to[segment] = whole.valid_bytes
            else:
                batches.extend(scan.batches)
                self._read_to[segment] = start + scan.valid_bytes
        return batches


def leader_moves(batches: list[Any], topic_id: Any, victim: int) -> tuple[dict[int, int], int | None]:
    """Of metadata log ``batches`` (:meth:`LogTail.read`): partition of topic ``topic_id`` ->
    append time, ms, of the first batch that gave it a leader other than ``victim``; and the
    append time of the last batch that moved any partition's leader to another broker, None
    when none did."""
    from messages.generated.partition_change_record import PartitionChangeRecord
    from messages.metadata import decode_record

    key = PartitionChangeRecord.API_KEY
    moved: dict[int, int] = {}
    last_move: int | None = None
    for batch in batches:
        if batch.is_control:
            continue
        for value in batch.iter_values():
            if value is None or len(value) < 2 or value[1] != key:
                continue
            message, _ = decode_record(value)
            assert isinstance(message, PartitionChangeRecord)
            if message.leader in (-2, -1, victim):  # -2: no leader change; -1: none
                continue
            last_move = batch.max_timestamp if last_move is None else max(last_move, batch.max_timestamp)
            if message.topic_id == topic_id:
                moved.setdefault(message.partition_id, batch.max_timestamp)
    return moved, last_move
