"""kwire reads the metadata log and snapshots of a stock Kafka controller that ran for a while.

For the newest pinned release (every one in ``make nightly``,
:func:`compat.kafka.newest_or_every_release`), a stock standalone controller (``kafka.Kafka`` from the jars, on a
directory formatted by stock ``kafka-storage format --standalone``) runs with settings that make
it write NoOp records every 20 ms, roll a segment every few KiB and snapshot every few KiB of new
records (``QuorumController`` / ``SnapshotGenerator``, KIP-630). Once it has written several
segments and several snapshots it is stopped, and then:

* stock DumpLogSegments with ``--cluster-metadata-decoder`` prints exactly what ``kwire
  dump-log --cluster-metadata-decoder`` prints for every segment, index, producer snapshot and
  snapshot checkpoint (and ``--json`` carries the same batches and records, field for field);
* every snapshot checkpoint reads through kwire (header first, footer last, KRaft's record
  rules, every data record decoded as a metadata record);
* kwire's ``MetadataLog`` opens the directory with nothing to repair: every batch valid, the
  same snapshots, the same leader-epoch cache.

Cost: about 20-30 s per release (one controller JVM for ~10 s plus two DumpLogSegments JVMs).
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from compat import kafka as k
from compat.harness import (
    CLUSTER_ID,
    PARTITION,
    KafkaRelease,
    assert_dumps_match,
    free_port,
    run_stock_controller,
)
from compat.kafka import newest_or_every_release
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import decode_record
from storage.control import read_kraft_batch
from storage.leader_epoch import decode_checkpoint
from storage.log import MetadataLog
from storage.records import RecordBatch
from storage.snapshots import BOOTSTRAP_SNAPSHOT_ID, parse_snapshot_path, read_snapshot_content
from tools import dump_log

pytestmark = [pytest.mark.compat, pytest.mark.slow]

SEGMENT_BYTES = 8 * 1024
MIN_SEGMENTS = 4
MIN_SNAPSHOTS = 3


def _properties(kafka: KafkaRelease, path: Path, data: Path, port: int) -> Path:
    """A standalone controller that snapshots and rolls often. Segment size: 3.9 lowers the
    floor with ``metadata.log.segment.min.bytes``; 4.x dropped that key and reads
    ``internal.metadata.log.segment.bytes`` (``MetadataLogConfig``) instead."""
    if kafka.at_least(4, 0):
        segment = f"internal.metadata.log.segment.bytes={SEGMENT_BYTES}\n"
    else:
        segment = f"metadata.log.segment.min.bytes={SEGMENT_BYTES}\nmetadata.log.segment.bytes={SEGMENT_BYTES}\n"
    path.write_text(
        "process.roles=controller\n"
        "node.id=1\n"
        f"controller.quorum.bootstrap.servers=localhost:{port}\n"
        "controller.listener.names=CONTROLLER\n"
        f"listeners=CONTROLLER://localhost:{port}\n"
        f"log.dirs={data}\n"
        "metadata.max.idle.interval.ms=20\n"
        "metadata.log.max.record.bytes.between.snapshots=4096\n"
        "metadata.log.max.snapshot.interval.ms=2000\n"
        + segment,
        encoding="utf-8",
    )
    return path


def _snapshots(part: Path) -> list[Path]:
    """Frozen snapshot checkpoints other than the bootstrap (0, 0) one, oldest first."""
    found = []
    for p in part.glob("*.checkpoint"):
        parsed = parse_snapshot_path(p)
        if parsed is not None and parsed.snapshot_id != BOOTSTRAP_SNAPSHOT_ID:
            found.append((parsed.snapshot_id, p))
    return [p for _, p in sorted(found)]


# -- kwire --json against the stock text --------------------------------------------------------

_FIELD = re.compile(r"(\w+): (\S+)")
_RECORD = re.compile(
    r"^\| offset: (-?\d+) (\w+): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) "
    r"sequence: (-?\d+) headerKeys: \[([^\]]*)\](.*)$"
)
_CONTROL_LABEL = re.compile(r"^ (SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters|LeaderChange:) (\{.*\})$")
_LABEL_TYPES = {
    "SnapshotHeader": "SNAPSHOT_HEADER", "SnapshotFooter": "SNAPSHOT_FOOTER",
    "KRaftVersion": "KRAFT_VERSION", "KRaftVoters": "KRAFT_VOTERS", "LeaderChange:": "LEADER_CHANGE",
}


def _parse_stock(text: str) -> list[dict[str, Any]]:
    """Stock DumpLogSegments' text for .log and .checkpoint files, read back into the shape of
    kwire's JSON objects (only the information the text carries)."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith("Dumping "):
            out.append({"type": "file", "file": line[len("Dumping "):]})
        elif line.startswith("Log starting offset: "):
            out[-1].update(kind="log", startOffset=int(line.split(": ")[1]))
        elif line.startswith("Snapshot end offset: "):
            m = re.fullmatch(r"Snapshot end offset: (\d+), epoch: (\d+)", line)
            assert m, line
            out[-1].update(kind="snapshot", endOffset=int(m[1]), epoch=int(m[2]))
        elif line == "KRaft bootstrap snapshot":
            out[-1].update(kind="bootstrap")
        elif line.startswith("baseOffset: "):
            f = dict(_FIELD.findall(line))
            ts_type = "CreateTime" if "CreateTime" in f else "LogAppendTime"
            horizon = f["deleteHorizonMs"]
            out.append({
                "type": "batch",
                **{k: int(f[k]) for k in ("baseOffset", "lastOffset", "count", "baseSequence", "lastSequence",
                                          "producerId", "producerEpoch", "partitionLeaderEpoch", "position",
                                          "size", "magic", "crc")},
                "isTransactional": f["isTransactional"] == "true", "isControl": f["isControl"] == "true",
                "deleteHorizonMs": None if horizon == "OptionalLong.empty" else int(horizon[len("OptionalLong["):-1]),
                "timestampType": ts_type, "maxTimestamp": int(f[ts_type]),
                "compressCodec": f["compresscodec"], "isValid": f["isvalid"] == "true",
            })
        elif line.startswith("| offset: "):
            m = _RECORD.match(line)
            assert m, line
            record: dict[str, Any] = {
                "type": "record", "offset": int(m[1]), "timestamp": int(m[3]), "keySize": int(m[4]),
                "valueSize": int(m[5]), "sequence": int(m[6]), "headerKeys": [k for k in m[7].split(",") if k],
            }
            rest = m[8]
            if rest.startswith(" payload: "):
                record["payload"] = json.loads(rest[len(" payload: "):])
            elif rest == " controlType: LEADER_CHANGE(2)":
                record["control"] = {"type": "LEADER_CHANGE", "typeId": 2}
            else:
                c = _CONTROL_LABEL.match(rest)
                assert c, f"unexpected record text: {line}"
                record["control"] = {"type": _LABEL_TYPES[c[1]], "data": json.loads(c[2])}
            out.append(record)
        else:
            pytest.fail(f"unexpected line in a stock dump of logs and snapshots: {line!r}")
    return out


def _logs_and_snapshots(text: str) -> str:
    """The part of a dump's text about .log and .checkpoint files."""
    keep = False
    lines = []
    for line in text.splitlines():
        if line.startswith("Dumping "):
            keep = line.endswith((".log", ".checkpoint"))
        if keep:
            lines.append(line)
    return "\n".join(lines)


def _project(obj: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    """``obj`` restricted to the keys ``like`` has (nested one level for ``control``)."""
    out = {k: obj.get(k) for k in like}
    if "control" in like and isinstance(obj.get("control"), dict):
        out["control"] = {k: obj["control"].get(k) for k in like["control"]}
    return out


def _assert_json_agrees(kafka: KafkaRelease, files: list[Path], stock_text: str) -> int:
    """``kwire dump-log --json --cluster-metadata-decoder`` has one object per stock line, with
    the same values; returns how many objects were compared."""
    out = io.StringIO()
    old = k.version_tuple(kafka.tool_release("dump-log")) < (4, 1)  # as KafkaRelease.kwire_dump decides
    status = dump_log.dump_files([str(f) for f in files], cluster_metadata_decoder=True, as_json=True,
                                 leader_change_as_type=old, out=out, err=io.StringIO())
    assert status == 0
    mine = [json.loads(line) for line in out.getvalue().splitlines()]
    stock = _parse_stock(stock_text)
    assert [o["type"] for o in mine] == [o["type"] for o in stock]
    for a, b in zip(mine, stock, strict=True):
        assert _project(a, b) == b
    return len(stock)


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kafka_version", newest_or_every_release())
def test_kwire_reads_a_long_running_stock_controller(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    props = _properties(each_kafka, tmp_path / "c.properties", data, port)
    each_kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, "--standalone"])
    part = data / PARTITION

    def enough(batches: list[RecordBatch]) -> bool:
        return len(list(part.glob("*.log"))) >= MIN_SEGMENTS and len(_snapshots(part)) >= MIN_SNAPSHOTS

    run_stock_controller(each_kafka, props, part, tmp_path / "logs", enough, timeout_s=90.0)
    shutil.rmtree(tmp_path / "logs", ignore_errors=True)
    snapshots = _snapshots(part)
    segments = sorted(part.glob("*.log"))
    assert len(segments) >= MIN_SEGMENTS and len(snapshots) >= MIN_SNAPSHOTS

    # 1. the two dump tools agree on every file the controller left, before kwire touches it
    checkpoints = sorted(part.glob("*.checkpoint"))
    bootstrap = [data / "bootstrap.checkpoint"] if (data / "bootstrap.checkpoint").exists() else []
    files = segments + sorted(part.glob("*.index")) + sorted(part.glob("*.timeindex")) + \
        sorted(part.glob("*.snapshot")) + checkpoints + bootstrap
    text = assert_dumps_match(each_kafka, files, cluster_metadata_decoder=True)
    assert "isvalid: false" not in text and "invalid bytes" not in text and "Error at" not in text
    assert text.count("Snapshot end offset:") == len(checkpoints)
    assert '"type":"NO_OP_RECORD"' in text and '"type":"FEATURE_LEVEL_RECORD"' in text
    mine, errors = each_kafka.kwire_dump(segments + checkpoints, deep_iteration=True)
    assert errors == ""
    # ... and kwire's JSON lines carry the same batches and records as the stock text
    compared = _assert_json_agrees(each_kafka, segments + checkpoints + bootstrap, _logs_and_snapshots(text))
    assert compared > 100

    # 2. every snapshot reads through kwire: header, footer, KRaft rules, metadata records
    for path in snapshots:
        content = read_snapshot_content(path.read_bytes())
        assert content.has_footer and content.kraft_version == 1 and content.voters is not None
        records = [decode_record(v)[0] for v in content.data_records()]
        assert any(isinstance(r, FeatureLevelRecord) and r.name == "metadata.version" for r in records)
        assert not any(isinstance(r, NoOpRecord) for r in records)  # snapshots hold state, not no-ops

    # 3. kwire's log opens it: nothing to repair, every batch valid by KRaft's rules
    stock_epochs = decode_checkpoint((part / "leader-epoch-checkpoint").read_bytes())
    log = MetadataLog.open(data)
    try:
        report = log.open_report
        assert report.error is None and report.truncated_bytes == 0 and report.deleted_segments == []
        assert report.segments == len(segments)
        batches = list(log.iter_batches())
        assert report.batches == len(batches) > 50
        kraft = [read_kraft_batch(b) for b in batches]
        assert sum(len(b.records) for b in kraft) == log.log_end_offset - log.log_start_offset
        assert [str(s) for s in log.snapshots] == [
            str(parse_snapshot_path(p).snapshot_id) for p in checkpoints  # type: ignore[union-attr]
        ]
        assert log.latest_snapshot_id is not None and log.latest_snapshot_id.end_offset <= log.log_end_offset
        assert log.leader_epoch_cache.entries == stock_epochs
    finally:
        log.close()
