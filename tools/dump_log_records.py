"""The batch and record printers of ``kwire dump-log`` (``kafka.tools.DumpLogSegments``).

:class:`RecordPrinter` writes one line per batch (``baseOffset: ... crc: ... isvalid: ...``) and,
with deep iteration, one ``| offset: ...`` line per record, decoding control records
(``storage.control``) and, with ``--cluster-metadata-decoder``, metadata records
(``messages.metadata``), as Kafka's ``DumpLogSegments`` and its ``RecordBatch``/``Record``
``toString`` do; ``--json`` turns each line into one JSON object. The command that walks files,
indexes and snapshots is :mod:`tools.dump_log`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TextIO

from kwire.wire import DecodeError
from messages.metadata import decode_record, record_type_name
from storage.control import (
    ControlRecordType,
    EndTransactionMarker,
    decode_control_value,
)
from storage.record_codec import Record
from storage.records import RecordBatch

__all__ = ["RECORD_INDENT", "DumpOptions", "DumpReport", "RecordPrinter"]

RECORD_INDENT = "|"
_CONTROL_LABELS = {
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
    ControlRecordType.LEADER_CHANGE: "LeaderChange",
}


def _compact(value: Any) -> str:
    # Jackson's JsonNode.toString(): no spaces, non-ASCII as is.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass
class DumpOptions:
    """The flags of one ``kwire dump-log`` run (``DumpLogSegments``' options), already combined:
    ``deep`` is ``--deep-iteration`` or printing contents; sizes are bytes."""

    print_contents: bool
    deep: bool
    cluster_metadata: bool
    skip_record_metadata: bool
    verify_only: bool
    index_sanity_only: bool
    max_message_size: int
    max_bytes: int
    leader_change_as_type: bool
    scala_report: bool
    json: bool


@dataclass
class DumpReport:
    """What the index checks found, per file name: (indexed, found) offset pairs, printed at the
    end as ``DumpLogSegments`` does; ``failed`` makes the exit status 1."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    failed: bool = False

class RecordPrinter:
    """Prints batches and records of a log or snapshot to ``out``, problems to ``err``.

    Holds the options and the index report shared with the dumper of :mod:`tools.dump_log`; an
    undecodable record is reported through :meth:`error`, which makes the exit status 1.
    """

    def __init__(self, options: DumpOptions, out: TextIO, err: TextIO) -> None:
        self.o = options
        self.out = out
        self.err = err
        self.report = DumpReport()

    # -- output helpers

    def text(self, line: str) -> None:
        """Write ``line`` and a newline to ``out`` unless the run prints JSON."""
        if not self.o.json:
            self.out.write(line + "\n")

    def obj(self, line_type: str, /, **fields: Any) -> None:
        """Write ``{"type": line_type, **fields}`` as one compact JSON line when the run prints JSON."""
        if self.o.json:
            self.out.write(_compact({"type": line_type, **fields}) + "\n")

    def error(self, message: str) -> None:
        """Report ``message`` on ``err`` (and as a JSON ``error`` line); the exit status becomes 1."""
        self.report.failed = True
        if self.o.json:
            self.obj("error", message=message)
        self.err.write(message + "\n")

    def print_batch(self, batch: RecordBatch, position: int) -> None:
        """Print one batch header line (``baseOffset: ... isvalid: ...``) at byte ``position``."""
        horizon = batch.delete_horizon_ms
        valid = batch.is_valid()
        self.text(
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {str(batch.is_transactional).lower()} "
            f"isControl: {str(batch.is_control).lower()} "
            f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'} "
            f"position: {position} {batch.timestamp_type.label}: {batch.max_timestamp} "
            f"size: {batch.size_in_bytes} magic: {batch.magic} "
            f"compresscodec: {batch.compression.codec_name} crc: {batch.crc} isvalid: {str(valid).lower()}"
        )
        self.obj(
            "batch",
            baseOffset=batch.base_offset, lastOffset=batch.last_offset, count=batch.records_count,
            baseSequence=batch.base_sequence, lastSequence=batch.last_sequence,
            producerId=batch.producer_id, producerEpoch=batch.producer_epoch,
            partitionLeaderEpoch=batch.partition_leader_epoch,
            isTransactional=batch.is_transactional, isControl=batch.is_control,
            deleteHorizonMs=horizon, position=position, timestampType=batch.timestamp_type.label,
            maxTimestamp=batch.max_timestamp, size=batch.size_in_bytes, magic=batch.magic,
            compressCodec=batch.compression.codec_name, crc=batch.crc, isValid=valid,
        )

    def print_record(self, batch: RecordBatch, record: Record) -> None:
        """Print one ``| offset: ...`` line for ``record`` of ``batch`` (deep iteration)."""
        parts: list[str] = []
        prefix = f"{RECORD_INDENT} "
        fields: dict[str, Any] = {
            "offset": record.offset, "timestamp": record.timestamp, "keySize": record.key_size,
            "valueSize": record.value_size, "sequence": record.sequence,
            "headerKeys": [h.key for h in record.headers],
        }
        if not self.o.skip_record_metadata:
            parts.append(
                f"{prefix}offset: {record.offset} {batch.timestamp_type.label}: {record.timestamp} "
                f"keySize: {record.key_size} valueSize: {record.value_size}"
            )
            prefix = " "
            parts.append(f" sequence: {record.sequence} headerKeys: [{','.join(h.key for h in record.headers)}]")
            if batch.is_control:
                text, control = self.describe_control(record)
                parts.append(text)
                fields["control"] = control
        if self.o.print_contents and not batch.is_control:
            key, payload, payload_json = self.parse_data(record)
            if key is not None:
                parts.append(f"{prefix}key: {key}")
                prefix = " "
                fields["key"] = key
            if payload is not None:
                parts.append(f" payload: {payload}")
                fields["payload"] = payload_json if payload_json is not None else payload
        self.text("".join(parts))
        self.obj("record", **fields)

    def describe_control(self, record: Record) -> tuple[str, dict[str, Any]]:
        """The text suffix and JSON fields of a control record: ``endTxnMarker``, the decoded
        KRaft control record (``LeaderChange: {...}``) or ``controlType: NAME(id)``."""
        key = record.key or b""
        if len(key) < 4 or int.from_bytes(key[:2], "big", signed=True) < 0:
            self.report.failed = True
            self.err.write(f"Invalid control record key at offset {record.offset}\n")
            return " controlType: INVALID", {"type": "INVALID"}
        type_id = int.from_bytes(key[2:4], "big", signed=True)
        control_type = ControlRecordType.from_type_id(type_id)
        info: dict[str, Any] = {"type": control_type.name, "typeId": type_id}
        value = record.value or b""
        if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            try:
                marker = EndTransactionMarker.deserialize(control_type, value)
            except DecodeError as exc:
                return self._control_error(record, control_type, exc, info)
            info["coordinatorEpoch"] = marker.coordinator_epoch
            return f" endTxnMarker: {control_type.name} coordinatorEpoch: {marker.coordinator_epoch}", info
        label = _CONTROL_LABELS.get(control_type)
        if label is None or (control_type is ControlRecordType.LEADER_CHANGE and self.o.leader_change_as_type):
            if control_type is ControlRecordType.LEADER_CHANGE:
                self._attach_data(record, control_type, value, info)
            return f" controlType: {control_type.name}({type_id})", info
        try:
            message = decode_control_value(control_type, value)
        except DecodeError as exc:
            return self._control_error(record, control_type, exc, info)
        data = message.to_json(0)
        info["data"] = data
        # KAFKA-19069 printed the new LeaderChange case with a colon after the label
        separator = ": " if control_type is ControlRecordType.LEADER_CHANGE else " "
        return f" {label}{separator}{_compact(data)}", info

    def _attach_data(self, record: Record, control_type: ControlRecordType, value: bytes, info: dict[str, Any]) -> None:
        try:
            info["data"] = decode_control_value(control_type, value).to_json(0)
        except DecodeError as exc:
            info["error"] = str(exc)

    def _control_error(
        self, record: Record, control_type: ControlRecordType, exc: Exception, info: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        self.report.failed = True
        self.err.write(f"Cannot decode the {control_type.name} control record at offset {record.offset}: {exc}\n")
        info["error"] = str(exc)
        return f" controlType: {control_type.name}({int(control_type)})", info

    def parse_data(self, record: Record) -> tuple[str | None, str | None, Any]:
        """``(key, payload, json_node)`` of a data record as ``--print-data-log`` shows it; with
        ``--cluster-metadata-decoder`` the payload is the decoded metadata record."""
        if self.o.cluster_metadata:
            if record.value is None:
                return None, None, None
            try:
                message, version = decode_record(record.value)
                node = {
                    "type": record_type_name(message.API_KEY or 0),
                    "version": version,
                    "data": message.to_json(version),
                }
                return None, _compact(node), node
            except DecodeError as exc:
                return None, f"Error at {record.offset}, skipping. {exc}", None
        key = None if record.key is None else record.key.decode("utf-8", "replace")
        payload = None if record.value is None else record.value.decode("utf-8", "replace")
        return key, payload, None

    # -- indexes
