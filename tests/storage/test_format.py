"""meta.properties, bootstrap.checkpoint, and formatting directories as kafka-storage does."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from kwire.uuid import Uuid
from messages.generated.feature_level_record import FeatureLevelRecord
from storage.batch_scan import iter_batches
from storage.bootstrap import decode_bootstrap_checkpoint, read_bootstrap_checkpoint
from storage.control import ControlRecordType
from storage.errors import FormatError
from storage.features import (
    DEFAULT_RELEASE_VERSION,
    LATEST_PRODUCTION,
    METADATA_VERSIONS,
    default_feature_level,
    metadata_version_from_level,
    metadata_version_from_string,
)
from storage.format import (
    DirectoryType,
    DynamicVoter,
    check_formatted,
    format_directories,
    parse_dynamic_voters,
    voters_record,
)
from storage.meta_properties import (
    MetaProperties,
    decode_meta_properties,
    encode_meta_properties,
    generate_directory_id,
    java17_properties_order,
    read_meta_properties,
)
from storage.snapshots import read_snapshot_content

DIR_ID = Uuid.from_string("J8aAPcfLQt2bqs1JT_rMgQ")
STAMP = datetime.datetime(2024, 11, 20, 23, 1, 2, tzinfo=datetime.UTC)


def test_meta_properties_file_bytes() -> None:
    meta = MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qg", 1, DIR_ID)
    assert encode_meta_properties(meta, STAMP) == (
        b"#\n#Wed Nov 20 23:01:02 UTC 2024\nnode.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\n"
        b"version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n"
    )
    assert decode_meta_properties(encode_meta_properties(meta, STAMP)) == meta
    assert java17_properties_order(["version", "cluster.id", "broker.id"]) == ["broker.id", "version", "cluster.id"]


def test_meta_properties_parsing() -> None:
    # any order, Java escapes, version 0 with broker.id, missing version means 0
    assert decode_meta_properties(b"cluster.id=a\\=b\nversion=1\nnode.id=3\n") == MetaProperties(1, "a=b", 3, None)
    assert decode_meta_properties(b"broker.id=4\ncluster.id=x\n") == MetaProperties(0, "x", 4, None)
    for bad in (b"version=2\nnode.id=1\n", b"version=1\ncluster.id=x\n", b"version=1\nnode.id=one\n",
                b"version=1\nnode.id=1\ndirectory.id=nope\n"):
        with pytest.raises(FormatError):
            decode_meta_properties(bad)


def test_directory_ids_are_never_reserved() -> None:
    ids = {generate_directory_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(not (u.most_significant_bits == 0 and u.least_significant_bits < 100) for u in ids)
    assert all(not str(u).startswith("-") for u in ids)


def test_metadata_versions() -> None:
    assert metadata_version_from_string("3.9").level == 21
    assert metadata_version_from_string("3.7").name == "3.7-IV4"
    assert metadata_version_from_string("3.3-IV0").level == 4
    assert metadata_version_from_level(22).name == "4.0-IV0"
    assert DEFAULT_RELEASE_VERSION.name == "3.9-IV0"
    assert metadata_version_from_string("4.4").name == "4.4-IV2" and LATEST_PRODUCTION.level == 33
    assert [mv.name for mv in METADATA_VERSIONS if not mv.production] == ["4.5-IV0"]
    assert [mv.level for mv in METADATA_VERSIONS] == list(range(1, 35))
    with pytest.raises(ValueError):
        metadata_version_from_string("2.8")
    with pytest.raises(ValueError):
        metadata_version_from_string("bogus")


def test_dynamic_voter_syntax() -> None:
    voters = parse_dynamic_voters("0@example.com:8082:JEXY6aqzQY-32P5TStzaFg, 1@[::1]:8083:MvDxzVmcRsaTz33bUuRU6A")
    assert voters == [
        DynamicVoter(0, "example.com", 8082, Uuid.from_string("JEXY6aqzQY-32P5TStzaFg")),
        DynamicVoter(1, "::1", 8083, Uuid.from_string("MvDxzVmcRsaTz33bUuRU6A")),
    ]
    assert str(voters[1]) == "1@[::1]:8083:MvDxzVmcRsaTz33bUuRU6A"
    for bad, message in (
        ("1example.com:1:JEXY6aqzQY-32P5TStzaFg", "No @"),
        ("@h:1:JEXY6aqzQY-32P5TStzaFg", "beginning"),
        ("x@h:1:JEXY6aqzQY-32P5TStzaFg", "node id"),
        ("-1@h:1:JEXY6aqzQY-32P5TStzaFg", "negative"),
        ("1@[::1:1:JEXY6aqzQY-32P5TStzaFg", "right bracket"),
        ("1@h:70000:JEXY6aqzQY-32P5TStzaFg", "Invalid port"),
        ("1@h:1:notauuid", "directory ID"),
        ("1@h:1", "No colon following port"),
        ("1@h:1:JEXY6aqzQY-32P5TStzaFg,1@g:2:MvDxzVmcRsaTz33bUuRU6A", "more than once"),
    ):
        with pytest.raises(FormatError, match=message):
            parse_dynamic_voters(bad)


def test_format_static(tmp_path: Path, fsyncs: list[int]) -> None:
    meta_dir, data_dir = str(tmp_path / "meta"), str(tmp_path / "data")
    lines: list[str] = []
    result = format_directories(
        cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1, directories=[data_dir, meta_dir],
        metadata_log_dir=meta_dir, controller_listener_name="CONTROLLER", now_ms=lambda: 5, out=lines.append,
    )
    assert lines == [
        f"Formatting data directory {data_dir} with metadata.version 3.9-IV0.",
        f"Formatting metadata directory {meta_dir} with metadata.version 3.9-IV0.",
    ]
    assert result.kraft_version == 0
    assert sorted(os.listdir(meta_dir)) == ["bootstrap.checkpoint", "meta.properties"]
    meta = read_meta_properties(meta_dir)
    assert meta is not None and (meta.version, meta.cluster_id, meta.node_id) == (1, "MkU3OEVBNTcwNTJENDM2Qg", 1)
    assert meta.directory_id != read_meta_properties(data_dir).directory_id  # type: ignore[union-attr]
    boot = read_bootstrap_checkpoint(meta_dir)
    assert boot is not None and boot.metadata_version_level == 21
    assert boot.records == [(FeatureLevelRecord(name="metadata.version", feature_level=21), 0)]
    raw = (Path(meta_dir) / "bootstrap.checkpoint").read_bytes()
    batches = list(iter_batches(raw))
    assert [(b.base_offset, b.is_control, b.partition_leader_epoch) for b in batches] == [(0, True, 0), (1, False, 0), (2, True, 0)]
    assert all(b.max_timestamp == 5 for b in batches)
    assert read_snapshot_content(raw).last_contained_log_timestamp == 0
    assert check_formatted(meta_dir, 1, [data_dir]) == meta

    # formatting again: refused, or skipped with --ignore-formatted
    with pytest.raises(FormatError, match="already formatted"):
        format_directories(cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1, directories=[meta_dir],
                           metadata_log_dir=meta_dir, controller_listener_name="CONTROLLER", out=lines.append)
    again = format_directories(cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1, directories=[meta_dir, data_dir],
                               metadata_log_dir=meta_dir, controller_listener_name="CONTROLLER",
                               ignore_formatted=True, out=lines.append)
    assert again.lines == ["All of the log directories are already formatted."]
    with pytest.raises(FormatError, match="Invalid cluster.id"):
        format_directories(cluster_id="other", node_id=1, directories=[meta_dir], metadata_log_dir=meta_dir,
                           controller_listener_name="CONTROLLER", ignore_formatted=True, out=lines.append)
    with pytest.raises(FormatError, match="doesn't match previous node id"):
        check_formatted(meta_dir, 2)


def test_format_standalone_writes_the_bootstrap_snapshot(tmp_path: Path, fsyncs: list[int]) -> None:
    meta_dir = str(tmp_path / "meta")
    voter = DynamicVoter(1, "localhost", 9093, DIR_ID)
    result = format_directories(
        cluster_id="c1", node_id=1, directories=[meta_dir], metadata_log_dir=meta_dir,
        controller_listener_name="controller", initial_controllers=[voter], now_ms=lambda: 1234, out=lambda _: None,
    )
    assert result.lines == [f"Formatting dynamic metadata voter directory {meta_dir} with metadata.version 3.9-IV0."]
    assert result.kraft_version == 1
    assert read_meta_properties(meta_dir).directory_id == DIR_ID  # type: ignore[union-attr]
    part = Path(meta_dir) / "__cluster_metadata-0"
    assert os.listdir(part) == ["00000000000000000000-0000000000.checkpoint"]
    content = read_snapshot_content((part / "00000000000000000000-0000000000.checkpoint").read_bytes())
    assert content.last_contained_log_timestamp == 1234 and content.has_footer
    assert [r.type for r in content.control_records()] == [
        ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.KRAFT_VERSION,
        ControlRecordType.KRAFT_VOTERS, ControlRecordType.SNAPSHOT_FOOTER,
    ]
    assert content.kraft_version == 1
    assert content.voters == voters_record([voter], "controller")
    endpoint = content.voters.voters[0].endpoints[0]  # type: ignore[union-attr]
    assert (endpoint.name, endpoint.host, endpoint.port) == ("CONTROLLER", "localhost", 9093)
    # bootstrap.checkpoint never carries kraft.version
    boot = decode_bootstrap_checkpoint((Path(meta_dir) / "bootstrap.checkpoint").read_bytes())
    assert "kraft.version" not in boot.feature_levels


def test_format_non_voter_gets_a_random_directory_id(tmp_path: Path, fsyncs: list[int]) -> None:
    meta_dir = str(tmp_path / "meta")
    result = format_directories(
        cluster_id="c1", node_id=4, directories=[meta_dir], metadata_log_dir=meta_dir,
        controller_listener_name="CONTROLLER", initial_controllers=parse_dynamic_voters("1@h:1:J8aAPcfLQt2bqs1JT_rMgQ"),
        out=lambda _: None,
    )
    dtype, meta = result.formatted[meta_dir]
    assert dtype is DirectoryType.DYNAMIC_METADATA_NON_VOTER_DIRECTORY and meta.directory_id != DIR_ID
    assert (Path(meta_dir) / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").exists()


def test_format_argument_errors(tmp_path: Path, fsyncs: list[int]) -> None:
    d = str(tmp_path / "m")
    base = dict(cluster_id="c", node_id=1, directories=[d], metadata_log_dir=d, controller_listener_name="C",
                out=lambda _: None)
    cases = [
        (dict(node_id=-1), "non-negative node ID"),
        (dict(cluster_id=None), "cluster id"),
        (dict(directories=[]), "at least one directory"),
        (dict(controller_listener_name=None), "controller listener"),
        (dict(metadata_log_dir=str(tmp_path / "x")), "was not one of the given directories"),
        (dict(release_version=metadata_version_from_level(2)), "too old"),
        (dict(release_version=metadata_version_from_level(34)), "not yet stable"),
        (dict(features={"share.version": 3}), "No feature:share.version with feature level 3"),
        (dict(features={"eligible.leader.replicas.version": 1}),
         "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"),
        (dict(features={"bogus.version": 1}), "Unsupported feature"),
        (dict(features={"kraft.version": 1}), "unless KIP-853"),
        (dict(features={"kraft.version": 0}, initial_controllers=[DynamicVoter(1, "h", 1, DIR_ID)]), "if KIP-853"),
        (dict(features={"metadata.version": 21}, release_version=DEFAULT_RELEASE_VERSION), "avoid ambiguity"),
    ]
    for override, message in cases:
        with pytest.raises(FormatError, match=message):
            format_directories(**{**base, **override})  # type: ignore[arg-type]
    assert not os.path.exists(d)
    with pytest.raises(FormatError, match="No meta.properties found"):
        check_formatted(d, 1)
    # metadata.version through --feature, and extra features in bootstrap.checkpoint sorted by name
    result = format_directories(**{**base, "features": {"metadata.version": 20, "transaction.version": 2,  # type: ignore[arg-type]
                                                       "group.version": 1}})
    assert result.metadata_version.level == 20
    boot = read_bootstrap_checkpoint(d)
    assert boot is not None
    assert [(m.name, m.feature_level) for m, _ in boot.records] == [  # type: ignore[attr-defined]
        ("metadata.version", 20), ("group.version", 1), ("transaction.version", 2),
    ]


def test_release_version_sets_feature_defaults(tmp_path: Path, fsyncs: list[int]) -> None:
    """Formatter.calculateEffectiveFeatureLevels: features not given take the release version's
    default (Feature.defaultLevel), given ones win, kraft.version never reaches the file."""
    assert default_feature_level("share.version", metadata_version_from_string("4.2-IV0")) == 1
    assert default_feature_level("share.version", metadata_version_from_string("4.4-IV0")) == 2
    assert default_feature_level("transaction.version", metadata_version_from_string("4.0-IV1")) == 0
    assert default_feature_level("group.version", metadata_version_from_level(4)) == 0

    def formatted(name: str, **kwargs: object) -> list[tuple[str, int]]:
        d = str(tmp_path / name)
        format_directories(cluster_id="c", node_id=1, directories=[d], metadata_log_dir=d,
                           controller_listener_name="C", out=lambda _: None, **kwargs)  # type: ignore[arg-type]
        boot = read_bootstrap_checkpoint(d)
        assert boot is not None
        return [(m.name, m.feature_level) for m, _ in boot.records]  # type: ignore[attr-defined]

    assert formatted("latest", release_version=LATEST_PRODUCTION) == [
        ("metadata.version", 33), ("eligible.leader.replicas.version", 1), ("group.version", 1),
        ("share.version", 2), ("streams.version", 1), ("transaction.version", 2),
    ]
    assert formatted("given", release_version=metadata_version_from_string("4.1"),
                     features={"group.version": 0, "share.version": 1}) == [
        ("metadata.version", 27), ("eligible.leader.replicas.version", 1), ("share.version", 1),
        ("transaction.version", 2),
    ]
    assert formatted("old", release_version=metadata_version_from_string("3.9")) == [("metadata.version", 21)]
