"""The storage command-line tools: `kwire dump-log` and `kwire storage`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.leader_change_message import LeaderChangeMessage, Voter
from messages.metadata import encode_record
from server.config import KRaftConfig
from storage.control import build_control_batch, build_data_batch, build_kraft_batch
from storage.log import MetadataLog
from storage.meta_properties import read_meta_properties
from tools import dump_log, storage_cmd
from tools.cli import main as cli_main

FEATURE = encode_record(FeatureLevelRecord(name="metadata.version", feature_level=21), 0)


def _log(tmp_path: Path) -> Path:
    log = MetadataLog.open(tmp_path / "meta")
    log.initialize_leader_epoch(1)
    log.append_as_leader(
        build_control_batch(
            [LeaderChangeMessage(leader_id=1, voters=[Voter(1)], granting_voters=[Voter(1)])],
            base_offset=0, partition_leader_epoch=1, append_time_ms=5,
        ),
        epoch=1,
    )
    for i in range(30):
        log.append_as_leader(
            build_data_batch([FEATURE] * 10, base_offset=log.log_end_offset, partition_leader_epoch=1,
                             append_time_ms=100 + i),
            epoch=1,
        )
    log.close()
    return tmp_path / "meta" / "__cluster_metadata-0"


def _dump(files: list[str], **kwargs: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = dump_log.dump_files(files, out=out, err=err, **kwargs)  # type: ignore[arg-type]
    return status, out.getvalue(), err.getvalue()


def test_dump_log_text(tmp_path: Path, fsyncs: list[int]) -> None:
    part = _log(tmp_path)
    segment = str(part / "00000000000000000000.log")
    status, out, err = _dump([segment], cluster_metadata_decoder=True)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 5 size: 91 magic: 2 "
        "compresscodec: none crc: "
    )
    assert lines[2].endswith(" isvalid: true")
    assert lines[3] == (
        '| offset: 0 CreateTime: 5 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] '
        'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}'
    )
    assert lines[5] == (
        '| offset: 1 CreateTime: 100 keySize: -1 valueSize: 23 sequence: -1 headerKeys: [] payload: '
        '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":21}}'
    )
    assert len(lines) == 2 + 31 + 301
    _, legacy, _ = _dump([segment], deep_iteration=True, leader_change_as_type=True)
    assert legacy.splitlines()[3].endswith("headerKeys: [] controlType: LEADER_CHANGE(2)")
    _, shallow, _ = _dump([segment])
    assert len(shallow.splitlines()) == 2 + 31


def test_dump_log_indexes_and_torn_tail(tmp_path: Path, fsyncs: list[int]) -> None:
    part = _log(tmp_path)
    status, out, err = _dump([str(part / "00000000000000000000.index"), str(part / "00000000000000000000.timeindex")])
    assert status == 0 and err == ""
    assert any(line.startswith("offset: ") and " position: " in line for line in out.splitlines())
    assert out.splitlines()[-1] == "timestamp: 129 offset: 300"
    # a wrong index entry is reported as Kafka's tool does
    index = part / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[3] += 1
    index.write_bytes(bytes(data))
    _, _, err = _dump([str(index)])
    assert err.startswith(f"Mismatches in :{index}\n  Index offset: ")
    segment = part / "00000000000000000000.log"
    with open(segment, "ab") as f:
        f.write(b"\x00" * 10)
    _, out, _ = _dump([str(segment)])
    assert out.splitlines()[-1] == "Found 10 invalid bytes at the end of 00000000000000000000.log"
    with open(segment, "ab") as f:
        f.write(b"\x00" * 20)
    status, _, err = _dump([str(segment)])
    assert status == 1 and "smaller than minimum record overhead" in err


def test_dump_log_json_and_errors(tmp_path: Path, fsyncs: list[int]) -> None:
    part = _log(tmp_path)
    bad = tmp_path / "00000000000000000000.log"
    bad.write_bytes(build_kraft_batch([(None, b"\x01\x63\x00")], base_offset=0, partition_leader_epoch=0,
                                      append_time_ms=1, is_control=False))
    status, out, _ = _dump([str(part / "00000000000000000000.log"), str(bad), str(tmp_path / "x.txt")],
                           cluster_metadata_decoder=True, as_json=True)
    objects = [json.loads(line) for line in out.splitlines()]
    assert objects[0] == {"type": "file", "file": str(part / "00000000000000000000.log"), "kind": "log", "startOffset": 0}
    assert objects[2]["control"]["data"]["leaderId"] == 1
    assert objects[4]["payload"] == {"type": "FEATURE_LEVEL_RECORD", "version": 0,
                                     "data": {"name": "metadata.version", "featureLevel": 21}}
    assert objects[-1] == {"type": "file", "file": str(tmp_path / "x.txt"), "kind": "unknown"}
    undecodable = [o for o in objects if o["type"] == "record" and isinstance(o.get("payload"), str)]
    assert undecodable and undecodable[0]["payload"].startswith("Error at 0, skipping.")
    assert status == 0


def test_dump_log_cli_accepts_comma_lists(tmp_path: Path, fsyncs: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    part = _log(tmp_path)
    files = f"{part / '00000000000000000000.log'},{part / 'leader-epoch-checkpoint'}"
    assert cli_main(["dump-log", "--files", files]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("Dumping ") == 2
    assert f"Ignoring unknown file {part / 'leader-epoch-checkpoint'}" in captured.err


def _config(tmp_path: Path, **extra: str) -> KRaftConfig:
    props = {
        "process.roles": "controller",
        "node.id": "1",
        "listeners": "CONTROLLER://:9093",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.bootstrap.servers": "localhost:9093",
        "log.dirs": str(tmp_path / "data"),
        "metadata.log.dir": str(tmp_path / "meta"),
    }
    props.update(extra)
    return KRaftConfig.from_properties(props)


def test_storage_format_and_info(tmp_path: Path, fsyncs: list[int]) -> None:
    config = _config(tmp_path)
    with pytest.raises(storage_cmd.CommandError, match="you must specify one of the following"):
        storage_cmd.format_command(config, cluster_id="abc")
    out = io.StringIO()
    assert storage_cmd.format_command(config, cluster_id="abc", standalone=True, out=out) == 0
    assert out.getvalue().splitlines() == [
        f"Formatting data directory {tmp_path / 'data'} with metadata.version 3.9-IV0.",
        f"Formatting dynamic metadata voter directory {tmp_path / 'meta'} with metadata.version 3.9-IV0.",
    ]
    meta = read_meta_properties(tmp_path / "meta")
    assert meta is not None and meta.cluster_id == "abc" and meta.node_id == 1
    info = io.StringIO()
    assert storage_cmd.info_command(config, info) == 0
    assert info.getvalue() == (
        f"Found log directories:\n  {tmp_path / 'data'}\n  {tmp_path / 'meta'}\n\n"
        f"Found metadata: {{cluster.id=abc, directory.id={read_meta_properties(tmp_path / 'data').directory_id}, "  # type: ignore[union-attr]
        "node.id=1, version=1}\n\n"
    )


def test_storage_info_reports_problems(tmp_path: Path, fsyncs: list[int]) -> None:
    config = _config(tmp_path)
    (tmp_path / "meta").mkdir()
    out = io.StringIO()
    assert storage_cmd.info_command(config, out) == 1
    assert out.getvalue() == (
        f"Found log directory:\n  {tmp_path / 'meta'}\n\n"
        f"Found problems:\n  {tmp_path / 'data'} does not exist\n  {tmp_path / 'meta'} is not formatted.\n\n"
    )


def test_storage_initial_controllers_and_release_version(tmp_path: Path, fsyncs: list[int]) -> None:
    config = _config(tmp_path, **{"inter.broker.protocol.version": "3.8"})
    out = io.StringIO()
    storage_cmd.format_command(
        config, cluster_id="abc", initial_controllers="1@localhost:9093:J8aAPcfLQt2bqs1JT_rMgQ", out=out
    )
    assert "with metadata.version 3.8-IV0." in out.getvalue()
    assert str(read_meta_properties(tmp_path / "meta").directory_id) == "J8aAPcfLQt2bqs1JT_rMgQ"  # type: ignore[union-attr]
    with pytest.raises(storage_cmd.CommandError, match="Unknown release version"):
        storage_cmd.format_command(config, cluster_id="abc", no_initial_controllers=True, release_version="2.1")
    with pytest.raises(storage_cmd.CommandError, match="feature=level"):
        storage_cmd.format_command(config, cluster_id="abc", no_initial_controllers=True, features=["x"])


def test_storage_cli(tmp_path: Path, fsyncs: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "process.roles=controller\nnode.id=2\nlisteners=CONTROLLER://:9093\n"
        "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=2@localhost:9093\n"
        f"log.dirs={tmp_path / 'logs'}\n"
    )
    assert cli_main(["storage", "random-uuid"]) == 0
    assert len(capsys.readouterr().out.strip()) == 22
    assert cli_main(["storage", "format", "--config", str(props), "-t", "xyz"]) == 0
    assert capsys.readouterr().out == f"Formatting metadata directory {tmp_path / 'logs'} with metadata.version 3.9-IV0.\n"
    assert cli_main(["storage", "format", "--config", str(props), "-t", "xyz"]) == 1
    assert "is already formatted" in capsys.readouterr().err
    assert cli_main(["storage", "info", "-c", str(props)]) == 0
