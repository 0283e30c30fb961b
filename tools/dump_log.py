"""``kwire dump-log``: print log segments, indexes and snapshots as ``kafka-dump-log.sh`` does.

Mirrors ``kafka.tools.DumpLogSegments`` (Kafka 3.9; ``org.apache.kafka.tools.DumpLogSegments``
in 4.3+). Files are dispatched by suffix: ``.log`` and ``.checkpoint`` (snapshots and
``bootstrap.checkpoint``) print batches, and with ``--deep-iteration`` / ``--print-data-log`` /
``--cluster-metadata-decoder`` their records; ``.index`` and ``.timeindex`` print entries and
check them against the log; ``.snapshot`` prints producer state; anything else is ignored::

    Dumping 00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1
    producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true
    deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1747299887693 size: 174 magic: 2
    compresscodec: none crc: 3714449884 isvalid: true
    | offset: 0 CreateTime: 1747299887693 keySize: 4 valueSize: 19 sequence: -1 headerKeys: []
    LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}

(each batch and record is one line). A LeaderChange record is decoded as Kafka 4.1+ does
(KAFKA-19069); ``--leader-change-as-type`` prints 3.9's ``controlType: LEADER_CHANGE(2)``
instead. The index report on stderr names the time index whose offsets were not found, as the
Java tool of Kafka 4.3+ does; ``--scala-report`` prints the Scala tool's (Kafka 3.9 to 4.2)
``... not found in the log.`` instead. ``--json`` prints one JSON object per line (file, batch, record, index entry) instead
of text. Problems Kafka's tool would die on (a corrupt size field, an undecodable record) are
reported on stderr and make the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from kwire.wire import DecodeError
from storage.batch_layout import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    OFFSET_AND_LENGTH,
    RECORD_OVERHEAD_V0,
)
from storage.bootstrap import BOOTSTRAP_FILE
from storage.errors import CorruptRecordError
from storage.index import OFFSET_ENTRY, TIME_ENTRY
from storage.producer_snapshot import decode_producer_snapshot
from storage.records import RecordBatch
from storage.snapshots import parse_snapshot_path
from tools.dump_log_records import DumpOptions, RecordPrinter  # the batch and record printers

__all__ = ["add_parser", "dump_files", "run"]

INT_MAX = 2**31 - 1


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "dump-log",
        help="print log segments and snapshots, as kafka-dump-log.sh",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--files", required=True, nargs="+", metavar="FILE",
        help="data, index and snapshot files to dump (comma-separated and/or several)",
    )
    parser.add_argument("--print-data-log", action="store_true", help="print record contents")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record")
    parser.add_argument(
        "--cluster-metadata-decoder", action="store_true",
        help="decode record values as cluster metadata records (implies --print-data-log)",
    )
    parser.add_argument("--skip-record-metadata", action="store_true", help="omit per-record metadata")
    parser.add_argument("--verify-index-only", action="store_true", help="check indexes without printing them")
    parser.add_argument("--index-sanity-check", action="store_true", help="only run the index sanity check")
    parser.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024, help="largest batch to read")
    parser.add_argument("--max-bytes", type=int, default=INT_MAX, help="read at most this many bytes of a log")
    parser.add_argument(
        "--leader-change-as-type", action="store_true",
        help="print LeaderChange records as 'controlType: LEADER_CHANGE(2)' (Kafka 3.9's form)",
    )
    parser.add_argument(
        "--scala-report", action="store_true",
        help="word the index report as Kafka 3.9-4.2's Scala tool ('... not found in the log.')",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of text")
    return parser


class _Dumper(RecordPrinter):
    # -- dispatch

    def dump(self, path: str) -> None:
        self.text(f"Dumping {path}")
        name = os.path.basename(path)
        suffix = name[name.rfind(".") :] if "." in name else ""
        try:
            if suffix in (".log", ".checkpoint"):
                self.dump_log(path, name)
            elif suffix == ".index":
                self.dump_index(path, name)
            elif suffix == ".timeindex":
                self.dump_time_index(path, name)
            elif suffix == ".snapshot":
                self.dump_producer_snapshot(path)
            elif suffix == ".txnindex":
                self.obj("file", file=path, kind="txnindex")
                self.dump_txn_index(path)
            else:
                self.obj("file", file=path, kind="unknown")
                self.err.write(f"Ignoring unknown file {path}\n")
        except BrokenPipeError:
            raise
        except OSError as exc:
            self.error(f"Error reading {path}: {exc}")

    # -- logs and snapshots

    def dump_log(self, path: str, name: str) -> None:
        if name.endswith(".log"):
            start = int(name.split(".")[0])
            self.text(f"Log starting offset: {start}")
            self.obj("file", file=path, kind="log", startOffset=start)
        elif name == BOOTSTRAP_FILE:
            self.text("KRaft bootstrap snapshot")
            self.obj("file", file=path, kind="bootstrap")
        else:
            parsed = parse_snapshot_path(Path(name))
            if parsed is None:
                self.error(f"{path} is not named like a snapshot")
                return
            sid = parsed.snapshot_id
            self.text(f"Snapshot end offset: {sid.end_offset}, epoch: {sid.epoch}")
            self.obj("file", file=path, kind="snapshot", endOffset=sid.end_offset, epoch=sid.epoch)
        with open(path, "rb") as f:
            data = f.read(self.o.max_bytes)
        view = memoryview(data)
        valid = 0
        last_offset = -1
        end = len(data)
        while True:
            # FileLogInputStream.nextBatch
            if valid >= end - HEADER_SIZE_UP_TO_MAGIC:
                break
            size = OFFSET_AND_LENGTH.unpack_from(view, valid)[1]
            if size < RECORD_OVERHEAD_V0:
                self.error(
                    f"Found record size {size} smaller than minimum record overhead "
                    f"({RECORD_OVERHEAD_V0}) in file {path}."
                )
                break
            if valid > end - LOG_OVERHEAD - size:
                break
            try:
                batch = RecordBatch(view[valid : valid + LOG_OVERHEAD + size])
            except CorruptRecordError as exc:
                self.error(f"Unreadable batch at position {valid} of {path}: {exc}")
                break
            self.print_batch(batch, valid)
            if self.o.deep:
                try:
                    records = batch.records()
                except DecodeError as exc:
                    self.error(f"Cannot read the records of the batch at position {valid} of {path}: {exc}")
                    break
                for record in records:
                    if last_offset != -1 and record.offset != last_offset + 1:
                        self.report.non_consecutive.setdefault(os.path.abspath(path), []).append(
                            (last_offset, record.offset)
                        )
                    last_offset = record.offset
                    self.print_record(batch, record)
            valid += batch.size_in_bytes
        trailing = end - valid
        if trailing > 0 and self.o.max_bytes == INT_MAX:
            self.text(f"Found {trailing} invalid bytes at the end of {name}")
            self.obj("invalid_bytes", file=path, count=trailing)


    def _log_path(self, path: str) -> str:
        name = os.path.basename(path)
        return os.path.join(os.path.dirname(os.path.abspath(path)), name.split(".")[0] + ".log")

    def _first_batch_last_offset(self, log: bytes, position: int) -> int | None:
        if position + 27 > len(log):
            return None
        base, _ = OFFSET_AND_LENGTH.unpack_from(log, position)
        return base + int.from_bytes(log[position + 23 : position + 27], "big", signed=True)

    def dump_index(self, path: str, name: str) -> None:
        base = int(name.split(".")[0])
        with open(path, "rb") as f:
            data = f.read()
        with open(self._log_path(path), "rb") as f:
            log = f.read()
        entries = len(data) // OFFSET_ENTRY.size
        self.obj("file", file=path, kind="index", baseOffset=base)
        if entries == 0:
            self.text(f"{path} is empty.")
            return
        if self.o.index_sanity_only:
            last = base + OFFSET_ENTRY.unpack_from(data, (entries - 1) * OFFSET_ENTRY.size)[0]
            if last < base or len(data) % OFFSET_ENTRY.size:
                self.error(f"Corrupt index found, index file ({path}) has non-zero size but the last offset is {last} which is less than the base offset {base}.")
                return
            self.text(f"{path} passed sanity check.")
            return
        for slot in range(entries):
            relative, position = OFFSET_ENTRY.unpack_from(data, slot * OFFSET_ENTRY.size)
            offset = base + relative
            if offset == base and slot > 0:
                return
            found = self._first_batch_last_offset(log, position)
            if found != offset:
                self.report.index_mismatches.setdefault(os.path.abspath(path), []).append(
                    (offset, -1 if found is None else found)
                )
            if not self.o.verify_only:
                self.text(f"offset: {offset} position: {position}")
                self.obj("index_entry", offset=offset, position=position)

    def dump_time_index(self, path: str, name: str) -> None:
        base = int(name.split(".")[0])
        with open(path, "rb") as f:
            data = f.read()
        log_path = self._log_path(path)
        with open(log_path, "rb") as f:
            log = f.read()
        index_path = log_path[: -len(".log")] + ".index"
        try:
            with open(index_path, "rb") as f:
                index = f.read()
        except FileNotFoundError:
            index = b""
        self.obj("file", file=path, kind="timeindex", baseOffset=base)
        entries = len(data) // TIME_ENTRY.size
        if self.o.index_sanity_only:
            if entries:
                first_ts = TIME_ENTRY.unpack_from(data, 0)[0]
                last_ts, last_rel = TIME_ENTRY.unpack_from(data, (entries - 1) * TIME_ENTRY.size)
                if last_ts < first_ts or len(data) % TIME_ENTRY.size:
                    self.error(f"Corrupt time index found, time index file ({path}) has non-zero size but the last timestamp is {last_ts} which is less than the first timestamp {first_ts}")
                    return
            self.text(f"{path} passed sanity check.")
            return
        index_entries = [
            (base + OFFSET_ENTRY.unpack_from(index, i * 8)[0], OFFSET_ENTRY.unpack_from(index, i * 8)[1])
            for i in range(len(index) // 8)
        ]
        previous = -1
        key = os.path.abspath(path)
        for slot in range(entries):
            timestamp, relative = TIME_ENTRY.unpack_from(data, slot * TIME_ENTRY.size)
            offset = base + relative
            if offset == base and slot > 0:
                return
            position = 0
            for idx_offset, idx_position in index_entries:
                if idx_offset <= offset:
                    position = idx_position
            found = self._find_batch(log, position, offset)
            if found is None:
                self.report.time_not_found.setdefault(key, []).append((offset, -1))
            elif found.last_offset != offset:
                self.report.time_not_found.setdefault(key, []).append((offset, found.last_offset))
            else:
                max_ts = max((r.timestamp for r in found.records()), default=-1)
                if max_ts != timestamp:
                    self.report.time_mismatches.setdefault(key, []).append((timestamp, max_ts))
                if previous >= timestamp:
                    self.report.time_out_of_order.setdefault(key, []).append((timestamp, previous))
            if not self.o.verify_only:
                self.text(f"timestamp: {timestamp} offset: {offset}")
                self.obj("time_index_entry", timestamp=timestamp, offset=offset)
            previous = timestamp

    def _find_batch(self, log: bytes, position: int, offset: int) -> RecordBatch | None:
        view = memoryview(log)
        while position + 27 <= len(log):
            size = OFFSET_AND_LENGTH.unpack_from(view, position)[1] + LOG_OVERHEAD
            if size < RECORD_OVERHEAD_V0 or position + size > len(log):
                return None
            batch = RecordBatch(view[position : position + size])
            if batch.last_offset >= offset:
                return batch
            position += size
        return None

    # -- producer state and transaction indexes

    def dump_producer_snapshot(self, path: str) -> None:
        self.obj("file", file=path, kind="producer_snapshot")
        with open(path, "rb") as f:
            data = f.read()
        try:
            entries = decode_producer_snapshot(data)
        except CorruptRecordError as exc:
            self.err.write(f"{exc}\n")
            return
        for e in entries:
            self.text(
                f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: "
                f"{e.coordinator_epoch} currentTxnFirstOffset: "
                f"{'OptionalLong.empty' if e.current_txn_first_offset < 0 else f'OptionalLong[{e.current_txn_first_offset}]'} "
                f"lastTimestamp: {e.timestamp} firstSequence: "
                f"{max(0, e.last_sequence - e.offset_delta)} lastSequence: {e.last_sequence} "
                f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
            )
            self.obj(
                "producer_entry", producerId=e.producer_id, producerEpoch=e.epoch,
                coordinatorEpoch=e.coordinator_epoch, currentTxnFirstOffset=e.current_txn_first_offset,
                lastSequence=e.last_sequence, lastOffset=e.last_offset, offsetDelta=e.offset_delta,
                timestamp=e.timestamp,
            )

    def dump_txn_index(self, path: str) -> None:
        with open(path, "rb") as f:
            data = f.read()
        # AbortedTxn entries: version int16, producerId int64, firstOffset int64, lastOffset
        # int64, lastStableOffset int64 (TransactionIndex)
        for pos in range(0, len(data) - len(data) % 34, 34):
            version = int.from_bytes(data[pos : pos + 2], "big", signed=True)
            pid, first, last, lso = (
                int.from_bytes(data[pos + 2 + 8 * i : pos + 10 + 8 * i], "big", signed=True) for i in range(4)
            )
            self.text(
                f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} "
                f"lastStableOffset: {lso}"
            )

    # -- the summary on stderr

    def finish(self) -> None:
        for name, items in self.report.index_mismatches.items():
            self.err.write(f"Mismatches in :{name}\n")
            for index_offset, log_offset in items:
                self.err.write(f"  Index offset: {index_offset}, log offset: {log_offset}\n")
        for name, items in self.report.time_mismatches.items():
            self.err.write(f"Found timestamp mismatch in :{name}\n")
            for index_ts, log_ts in items:
                self.err.write(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
        for name, items in self.report.time_out_of_order.items():
            self.err.write(f"Found out of order timestamp in :{name}\n")
            for index_ts, previous in items:
                self.err.write(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {previous}\n")
        for name, items in self.report.time_not_found.items():
            # DumpLogSegments.scala: "... in the log."; the Java port (4.3+) names the file
            where = "the log." if self.o.scala_report else f":{name}"
            self.err.write(f"The following indexed offsets are not found in {where}\n")
            for indexed, found in items:
                self.err.write(f"Indexed offset: {indexed}, found log offset: {found}\n")
        for name, items in self.report.non_consecutive.items():
            self.err.write(f"Non-consecutive offsets in {name}\n")
            for first, second in items:
                self.err.write(f"  {first} is followed by {second}\n")


def dump_files(
    files: list[str],
    *,
    print_data_log: bool = False,
    deep_iteration: bool = False,
    cluster_metadata_decoder: bool = False,
    skip_record_metadata: bool = False,
    verify_index_only: bool = False,
    index_sanity_check: bool = False,
    max_message_size: int = 5 * 1024 * 1024,
    max_bytes: int = INT_MAX,
    leader_change_as_type: bool = False,
    scala_report: bool = False,
    as_json: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Dump ``files`` to ``out`` (default stdout); returns the exit status."""
    print_contents = print_data_log or cluster_metadata_decoder
    options = DumpOptions(
        print_contents=print_contents,
        deep=deep_iteration or print_contents,
        cluster_metadata=cluster_metadata_decoder,
        skip_record_metadata=skip_record_metadata,
        verify_only=verify_index_only,
        index_sanity_only=index_sanity_check,
        max_message_size=max_message_size,
        max_bytes=max_bytes,
        leader_change_as_type=leader_change_as_type,
        scala_report=scala_report,
        json=as_json,
    )
    dumper = _Dumper(options, out or sys.stdout, err or sys.stderr)
    for path in files:
        dumper.dump(path)
    dumper.finish()
    return 1 if dumper.report.failed else 0


def run(args: argparse.Namespace) -> int:
    files = [part for item in args.files for part in item.split(",") if part]
    try:
        return _run(args, files)
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): stop quietly, as a pipeline expects
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace, files: list[str]) -> int:
    return dump_files(
        files,
        print_data_log=args.print_data_log,
        deep_iteration=args.deep_iteration,
        cluster_metadata_decoder=args.cluster_metadata_decoder,
        skip_record_metadata=args.skip_record_metadata,
        verify_index_only=args.verify_index_only,
        index_sanity_check=args.index_sanity_check,
        max_message_size=args.max_message_size,
        max_bytes=args.max_bytes,
        leader_change_as_type=args.leader_change_as_type,
        scala_report=args.scala_report,
        as_json=args.json,
    )
