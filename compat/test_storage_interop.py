"""kwire's storage against stock Kafka's tools and controllers, for every pinned release.

* DumpLogSegments prints exactly what ``kwire dump-log`` prints for segments, indexes, producer
  snapshots, KRaft snapshots and bootstrap files that kwire wrote -- including batches in every
  compression codec, so Kafka's Java codecs decode kwire's encodings.
* Directories formatted by ``kafka-storage format`` are read by kwire (meta.properties,
  bootstrap metadata, the voter snapshot) and dump identically through both tools; for 3.9 the
  files kwire's formatter writes are the same bytes once timestamps are equal.
* A stock controller starts on a kwire-formatted directory, writes its log and stops; kwire
  opens that log (and refuses to while the JVM holds ``.lock``), validates every batch by
  KRaft's rules, rebuilds the same index files, reads quorum-state and the epoch checkpoint;
  kwire then appends a new epoch, and the stock controller starts again on top of it.
* storage.bootstrap's metadata.version and feature tables equal what each release's
  ``MetadataVersion`` and ``Feature`` enums say (a small Java program prints them, ~2 s), and
  ``kwire storage format --release-version <LATEST_PRODUCTION>`` writes the same bootstrap records
  as ``kafka-storage format`` with that release version.
"""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from compat import kafka as k
from compat.harness import (
    CLUSTER_ID,
    DIR_ID,
    PARTITION,
    KafkaRelease,
    assert_dumps_match,
    controller_properties,
    free_port,
    log_batches,
    run_stock_controller,
    segment_files,
)
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.leader_change_message import Voter as LcVoter
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import decode_record, encode_record
from messages.runtime import Message
from server.config import load_config
from storage.batch_scan import iter_batches
from storage.bootstrap import (
    decode_bootstrap_checkpoint,
    encode_bootstrap_checkpoint,
    read_bootstrap_checkpoint,
)
from storage.compression import CompressionType
from storage.control import (
    ControlRecordType,
    build_control_batch,
    build_data_batch,
    build_kraft_batch,
    read_kraft_batch,
)
from storage.errors import FormatError, LogDirectoryLockedError
from storage.features import (
    FEATURES,
    LATEST_PRODUCTION,
    METADATA_VERSIONS,
    default_feature_level,
    metadata_version_from_level,
    metadata_version_from_string,
)
from storage.format import DynamicVoter, check_formatted, format_directories, voters_record
from storage.leader_epoch import decode_checkpoint
from storage.log import MetadataLog
from storage.meta_properties import read_meta_properties
from storage.quorum_state import FileQuorumStateStore, StoredElectionState
from storage.segment import LogConfig
from storage.snapshots import SnapshotId, read_snapshot_content
from tools import storage_cmd
from tools.raft_load_records import record_template, workload_value

pytestmark = pytest.mark.compat

FEATURE = encode_record(FeatureLevelRecord(name="metadata.version", feature_level=21), 0)
NO_OP = encode_record(NoOpRecord(), 0)
WORKLOAD_NO_OP = workload_value(record_template(256, "no-op"), 1, 7, 1)
"""``kwire test-raft-server --record-type no-op``'s record: a NoOpRecord with a payload in a tag
it does not define."""


# ---------------------------------------------------------------------------------------------


def _kwire_directory(root: Path) -> Path:
    """A standalone-formatted directory whose log holds a start-of-epoch batch, data batches in
    every codec (enough for index entries) and a second segment."""
    data = root / "data"
    format_directories(
        cluster_id=CLUSTER_ID, node_id=1, directories=[str(data)], metadata_log_dir=str(data),
        controller_listener_name="CONTROLLER", initial_controllers=[DynamicVoter(1, "localhost", 9093, DIR_ID)],
        now_ms=lambda: 1_700_000_000_000, out=lambda _: None,
    )
    log = MetadataLog.open(data, config=LogConfig(segment_bytes=6 * 1024))
    log.initialize_leader_epoch(1)
    start = build_control_batch(
        [
            LeaderChangeMessage(leader_id=1, voters=[LcVoter(1)], granting_voters=[LcVoter(1)]),
            KRaftVersionRecord(kraft_version=1),
            voters_record([DynamicVoter(1, "localhost", 9093, DIR_ID)], "CONTROLLER"),
        ],
        base_offset=0, partition_leader_epoch=1, append_time_ms=1_700_000_000_100,
    )
    log.append_as_leader(start, epoch=1)
    codecs = list(CompressionType)
    for i in range(60):
        log.append_as_leader(
            build_data_batch(
                [FEATURE, NO_OP, FEATURE] * (1 + i % 4) + [WORKLOAD_NO_OP] * (i % 10 == 3), base_offset=log.log_end_offset, partition_leader_epoch=1,
                append_time_ms=1_700_000_000_200 + i, compression=codecs[i % len(codecs)],
            ),
            epoch=1,
        )
    assert len(log.segments) >= 2
    log.close()
    return data


def test_dump_log_output_matches(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    data = _kwire_directory(tmp_path)
    part = data / PARTITION
    files = sorted(p for p in part.iterdir() if p.suffix in (".log", ".index", ".timeindex", ".snapshot", ".checkpoint"))
    files.append(data / "bootstrap.checkpoint")
    out = assert_dumps_match(each_kafka, files, cluster_metadata_decoder=True)
    assert "isvalid: false" not in out
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        assert f"compresscodec: {codec}" in out
    assert '"kRaftVersion":1' in out and "KRaftVoters" in out
    assert_dumps_match(each_kafka, files)  # shallow: batches only


def test_kafka_formatted_directories_read_by_kwire(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    data = tmp_path / "data"
    props = controller_properties(tmp_path / "c.properties", data, 19093)
    each_kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, "--standalone"])
    meta = read_meta_properties(data)
    assert meta is not None and (meta.version, meta.cluster_id, meta.node_id) == (1, CLUSTER_ID, 1)
    assert check_formatted(str(data), 1) == meta
    snapshot = data / PARTITION / "00000000000000000000-0000000000.checkpoint"
    content = read_snapshot_content(snapshot.read_bytes())
    assert content.has_footer and content.kraft_version == 1
    voters = content.voters
    assert voters is not None and [(v.voter_id, v.voter_directory_id) for v in voters.voters] == [(1, meta.directory_id)]
    assert [(e.name, e.host, e.port) for e in voters.voters[0].endpoints] == [("CONTROLLER", "localhost", 19093)]
    files = [snapshot]
    if (data / "bootstrap.checkpoint").exists():
        boot = decode_bootstrap_checkpoint((data / "bootstrap.checkpoint").read_bytes())
        files.append(data / "bootstrap.checkpoint")
    else:  # 4.2+ (KIP-1170): the bootstrap records live in the 0-0 snapshot
        records = [decode_record(v) for v in content.data_records()]
        boot = decode_bootstrap_checkpoint(
            encode_bootstrap_checkpoint(records, 0)  # the same records, as a bootstrap file
        )
    assert boot.metadata_version_level >= 21
    assert_dumps_match(each_kafka, files, cluster_metadata_decoder=True)
    # kwire's log opens a stock-formatted directory
    log = MetadataLog.open(data)
    assert log.snapshots == [SnapshotId(0, 0)] and log.log_end_offset == 0
    log.close()


def test_kwire_format_writes_kafka_39_bytes(tmp_path: Path) -> None:
    version = k.PINNED_VERSIONS[0]
    k.require_kafka(version)
    kafka = KafkaRelease(version)
    spec = f"1@localhost:19093:{DIR_ID}"
    theirs, mine = tmp_path / "theirs", tmp_path / "mine"
    props = controller_properties(tmp_path / "c.properties", theirs, 19093)
    kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, "--initial-controllers", spec])
    format_directories(
        cluster_id=CLUSTER_ID, node_id=1, directories=[str(mine)], metadata_log_dir=str(mine),
        controller_listener_name="CONTROLLER", initial_controllers=[DynamicVoter(1, "localhost", 19093, DIR_ID)],
        out=lambda _: None,
    )
    # meta.properties: the same lines in the same (Java 17 hash) order, apart from the date
    def body(path: Path) -> list[str]:
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0] == "#" and lines[1].startswith("#")
        return lines[2:]

    assert body(mine / "meta.properties") == body(theirs / "meta.properties")
    # bootstrap.checkpoint and the voter snapshot: the same batches with the same records, and
    # each stock batch is exactly what kwire's encoder makes of its records and timestamp
    name = "00000000000000000000-0000000000.checkpoint"
    for relative in ("bootstrap.checkpoint", f"{PARTITION}/{name}"):
        stock = list(iter_batches((theirs / relative).read_bytes()))
        ours = list(iter_batches((mine / relative).read_bytes()))
        shape = [(b.base_offset, b.last_offset, b.partition_leader_epoch, b.attributes) for b in stock]
        assert [(b.base_offset, b.last_offset, b.partition_leader_epoch, b.attributes) for b in ours] == shape
        for a, b in zip(stock, ours, strict=True):
            assert [(r.key, r.value) for r in a.records()] == [(r.key, r.value) for r in b.records()] or (
                relative != "bootstrap.checkpoint" and a.is_control  # SnapshotHeader carries the time
                and read_kraft_batch(a).records[1:] == read_kraft_batch(b).records[1:]
            )
            rebuilt = build_kraft_batch(
                [(r.key, r.value) for r in a.records()], base_offset=a.base_offset,
                partition_leader_epoch=a.partition_leader_epoch, append_time_ms=a.max_timestamp,
                is_control=a.is_control,
            )
            assert rebuilt == a.to_bytes()
    assert sorted(p.name for p in (mine / PARTITION).iterdir()) == sorted(p.name for p in (theirs / PARTITION).iterdir())


def test_stock_controller_runs_on_a_kwire_directory(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    props = controller_properties(tmp_path / "c.properties", data, port)
    format_directories(
        cluster_id=CLUSTER_ID, node_id=1, directories=[str(data)], metadata_log_dir=str(data),
        controller_listener_name="CONTROLLER", initial_controllers=[DynamicVoter(1, "localhost", port, DIR_ID)],
        out=lambda _: None,
    )
    part = data / PARTITION

    def locked_out() -> None:
        with pytest.raises(LogDirectoryLockedError):
            MetadataLog.open(data)

    # 1. the stock controller formats nothing, elects itself, writes, stops
    run_stock_controller(each_kafka, props, part, tmp_path / "logs1", lambda b: sum(x.records_count for x in b) >= 8, locked_out)
    stock_segments = {p.name: p.read_bytes() for p in part.iterdir() if p.suffix in (".log", ".index", ".timeindex")}
    stock_epochs = decode_checkpoint((part / "leader-epoch-checkpoint").read_bytes())
    state = FileQuorumStateStore.in_partition_dir(part).read_election_state()
    assert state is not None and state.leader_id == 1 and state.epoch >= 1

    # 2. kwire opens it: nothing to repair, every batch valid by KRaft's rules, same indexes
    log = MetadataLog.open(data)
    assert log.open_report.error is None and log.open_report.truncated_bytes == 0
    batches = list(log.iter_batches())
    assert batches and all(read_kraft_batch(b) for b in batches)
    assert log.leader_epoch_cache.entries == stock_epochs
    epoch = state.epoch + 1
    log.close()
    # Where the stock controller closed its segment (trimmed indexes, as 3.9 does on shutdown),
    # kwire's rebuilt and closed indexes are the same bytes; 4.x may leave them pre-sized.
    trimmed = {
        n: b for n, b in stock_segments.items()
        if n.endswith(".log") or len(b) < 10 * 1024 * 1024 - 12
    }
    if each_kafka.version.startswith("3."):
        assert len(trimmed) == len(stock_segments)
    assert {n: (part / n).read_bytes() for n in trimmed} == trimmed

    # 3. kwire appends a new epoch and records the election as the controller would
    log = MetadataLog.open(data)
    end_before = log.log_end_offset
    log.initialize_leader_epoch(epoch)
    log.append_as_leader(
        build_control_batch(
            [LeaderChangeMessage(leader_id=1, voters=[LcVoter(1)], granting_voters=[LcVoter(1)])],
            base_offset=end_before, partition_leader_epoch=epoch, append_time_ms=int(time.time() * 1000),
        ),
        epoch=epoch,
    )
    log.append_as_leader(
        build_data_batch([NO_OP] * 3, base_offset=end_before + 1, partition_leader_epoch=epoch,
                         append_time_ms=int(time.time() * 1000)),
        epoch=epoch,
    )
    log.flush()
    kwire_end = log.log_end_offset
    kwire_bytes = b"".join(b.to_bytes() for b in log.iter_batches())
    log.close()
    data_version = FileQuorumStateStore.in_partition_dir(part).read_data_version()
    assert data_version == 1
    FileQuorumStateStore.in_partition_dir(part).write_election_state(StoredElectionState(epoch=epoch, leader_id=1), 1)

    # 4. the stock controller starts on top of it and writes a later epoch after kwire's batches
    run_stock_controller(
        each_kafka, props, part, tmp_path / "logs2",
        lambda b: any(x.partition_leader_epoch > epoch and not x.is_control for x in b),
    )
    final = b"".join(b.to_bytes() for b in log_batches(part))
    assert final.startswith(kwire_bytes)
    later = [b for b in log_batches(part) if b.base_offset >= kwire_end]
    assert later and later[0].base_offset == kwire_end and all(b.partition_leader_epoch > epoch for b in later)
    assert any(
        r.type is ControlRecordType.LEADER_CHANGE for b in later if b.is_control for r in read_kraft_batch(b).records  # type: ignore[union-attr]
    )
    files = segment_files(part) + sorted(part.glob("*.index")) + sorted(part.glob("*.timeindex"))
    # Deep iteration, not the metadata decoder: the stock controller also writes record types
    # (e.g. BeginTransactionRecord around the bootstrap records) whose decoding is the
    # messages package's concern, not the log's.
    out = assert_dumps_match(each_kafka, files, deep_iteration=True)
    assert "isvalid: false" not in out
    shutil.rmtree(tmp_path / "logs1", ignore_errors=True)


def test_stock_index_checks_pass_on_kwire_indexes(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    """DumpLogSegments' --verify-index-only and --index-sanity-check accept kwire's .index and
    .timeindex files (``DumpLogSegments.scala``: each offset-index entry must name the last offset
    of the batch at its position)."""
    data = _kwire_directory(tmp_path)
    part = data / PARTITION
    indexes = sorted(p for p in part.iterdir() if p.suffix in (".index", ".timeindex"))
    assert len(indexes) >= 4
    files = ",".join(map(str, indexes))
    for flag in ("--verify-index-only", "--index-sanity-check"):
        result = each_kafka.run_tool("dump-log", [flag, "--files", files])
        report = (result.stdout + result.stderr).lower()
        assert result.returncode == 0, report
        for problem in ("mismatch", "failed", "corrupt", "invalid", "exception"):
            assert problem not in report, f"{flag}: {report}"
        if flag == "--index-sanity-check":
            assert report.count("passed sanity check") == len(indexes), report


def test_no_initial_controllers_directory_read_by_kwire(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    """A directory formatted by stock kafka-storage with --no-initial-controllers (a static,
    kraft.version 0 metadata directory: no voter snapshot) opens in kwire."""
    data = tmp_path / "data"
    props = controller_properties(tmp_path / "c.properties", data, 19094)
    each_kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, "--no-initial-controllers"])
    meta = read_meta_properties(data)
    assert meta is not None and (meta.cluster_id, meta.node_id) == (CLUSTER_ID, 1)
    assert check_formatted(str(data), 1) == meta
    log = MetadataLog.open(data)
    try:
        assert log.log_end_offset == 0
        if each_kafka.version.startswith("3."):
            assert log.snapshots == []
        else:  # 4.2+ (KIP-1170) keeps the bootstrap records in a 0-0 snapshot, without voters
            assert log.snapshots == [SnapshotId(0, 0)]
            snapshot = data / PARTITION / "00000000000000000000-0000000000.checkpoint"
            content = read_snapshot_content(snapshot.read_bytes())
            assert content.has_footer and content.voters is None
    finally:
        log.close()


# ---------------------------------------------------------------------------------------------
# metadata.version and feature levels: storage.bootstrap's tables against the jars

_FEATURE_PROBE = """\
import java.lang.reflect.Method;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.server.common.FeatureVersion;
import org.apache.kafka.server.common.MetadataVersion;

/** Prints MetadataVersion and the production features of the Kafka release on the classpath. */
public class KwireFeatureProbe {
    public static void main(String[] args) throws Exception {
        for (MetadataVersion mv : MetadataVersion.values()) {
            System.out.println("MV " + mv.version() + " " + mv.featureLevel() + " " + mv.isProduction());
        }
        System.out.println("LATEST_PRODUCTION " + MetadataVersion.LATEST_PRODUCTION.version());
        Class<?> features;
        try {
            features = Class.forName("org.apache.kafka.server.common.Feature");  // 4.0+
        } catch (ClassNotFoundException e) {
            features = Class.forName("org.apache.kafka.server.common.Features");  // 3.9
        }
        Method defaultLevel;
        try {
            defaultLevel = features.getMethod("defaultLevel", MetadataVersion.class);
        } catch (NoSuchMethodException e) {
            defaultLevel = features.getMethod("defaultValue", MetadataVersion.class);
        }
        List<?> production = (List<?>) features.getField("PRODUCTION_FEATURES").get(null);
        for (Object f : production) {
            String name = (String) features.getMethod("featureName").invoke(f);
            StringBuilder line = new StringBuilder("FEATURE " + name + " " + features.getMethod("latestProduction").invoke(f));
            for (Object o : (Object[]) features.getMethod("featureVersions").invoke(f)) {
                FeatureVersion fv = (FeatureVersion) o;
                line.append(" ").append(fv.featureLevel()).append("/").append(fv.bootstrapMetadataVersion().featureLevel());
                for (Map.Entry<String, Short> dep : new TreeMap<>(fv.dependencies()).entrySet()) {
                    line.append("/").append(dep.getKey()).append("=").append(dep.getValue());
                }
            }
            System.out.println(line);
            StringBuilder defaults = new StringBuilder("DEFAULTS " + name);
            for (MetadataVersion mv : MetadataVersion.values()) {
                if (mv.featureLevel() > 0) defaults.append(" ").append(mv.featureLevel()).append("=").append(defaultLevel.invoke(f, mv));
            }
            System.out.println(defaults);
        }
    }
}
"""


@dataclass(frozen=True)
class _JarFeatures:
    metadata_versions: dict[int, tuple[str, bool]]  # level -> (name, production)
    latest_production: str
    features: dict[str, list[tuple[int, int, tuple[tuple[str, int], ...]]]]  # production features
    defaults: dict[str, dict[int, int]]  # feature -> metadata.version level -> default level


def _jar_features(kafka: KafkaRelease, tmp_path: Path) -> _JarFeatures:
    """What MetadataVersion and Feature(s) of ``kafka``'s jars say, printed by a small Java
    program run from source against its classpath (about 2 s)."""
    source = tmp_path / "KwireFeatureProbe.java"
    source.write_text(_FEATURE_PROBE, encoding="utf-8")
    result = subprocess.run(
        [k.java_executable(), *k.TOOL_JVM_FLAGS, "-cp", kafka.classpath, str(source)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    mvs: dict[int, tuple[str, bool]] = {}
    latest = ""
    features: dict[str, list[tuple[int, int, tuple[tuple[str, int], ...]]]] = {}
    defaults: dict[str, dict[int, int]] = {}
    for line in result.stdout.splitlines():
        kind, *rest = line.split()
        if kind == "MV" and int(rest[1]) > 0:  # 3.9 also lists pre-KRaft IBPs at level -1
            mvs[int(rest[1])] = (rest[0], rest[2] == "true")
        elif kind == "LATEST_PRODUCTION":
            latest = rest[0]
        elif kind == "FEATURE":
            levels = []
            for item in rest[2:]:
                level, boot, *deps = item.split("/")
                levels.append((int(level), int(boot), tuple((d.split("=")[0], int(d.split("=")[1])) for d in deps)))
            features[rest[0]] = levels
        elif kind == "DEFAULTS":
            defaults[rest[0]] = {int(a): int(b) for a, b in (x.split("=") for x in rest[1:])}
    assert mvs and latest and features
    return _JarFeatures(mvs, latest, features, defaults)


def test_metadata_versions_and_features_match_kafka(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    """storage.bootstrap's METADATA_VERSIONS and FEATURES are Kafka's: every level a pinned
    release knows has the same name there, nothing production in a release is unstable in
    kwire, and for the newest pinned release (the table's source) everything from its minimum
    up -- levels, names, production, LATEST_PRODUCTION, each feature's levels, bootstrap
    versions, dependencies and defaults -- is exactly the same."""
    jar = _jar_features(each_kafka, tmp_path)
    ours = {mv.level: (mv.name, mv.production) for mv in METADATA_VERSIONS}
    for level, (name, production) in jar.metadata_versions.items():
        assert level in ours and ours[level][0] == name, (level, name)
        assert ours[level][1] or not production, f"{name} is production in {each_kafka.version}"
    newest = each_kafka.version == k.PINNED_VERSIONS[-1]
    for name, by_level in jar.defaults.items():
        for level, default in by_level.items():
            if jar.metadata_versions[level][1] or newest:
                mv = metadata_version_from_level(level)
                assert default_feature_level(name, mv) == default, (name, mv.name)
    for name, levels in jar.features.items():
        if not newest:  # an older release's production levels exist in kwire's table
            assert {lv for lv, _, _ in levels} <= {v.level for v in FEATURES[name]}, name
            continue
        assert [(v.level, v.bootstrap_metadata_level, v.dependencies) for v in FEATURES[name]] == levels, name
    if newest:
        minimum = min(jar.metadata_versions)
        assert {lv: v for lv, v in ours.items() if lv >= minimum} == jar.metadata_versions
        assert LATEST_PRODUCTION.name == jar.latest_production
        assert sorted(FEATURES) == sorted(jar.features)


def _stock_bootstrap_records(directory: Path) -> list[tuple[Message, int]]:
    """The bootstrap records ``kafka-storage format`` wrote in ``directory``: 3.9 keeps them in
    bootstrap.checkpoint, 4.2+ in the 0-0 checkpoint (KIP-1170)."""
    if (directory / "bootstrap.checkpoint").exists():
        return list(decode_bootstrap_checkpoint((directory / "bootstrap.checkpoint").read_bytes()).records)
    content = read_snapshot_content((directory / PARTITION / "00000000000000000000-0000000000.checkpoint").read_bytes())
    return [decode_record(v) for v in content.data_records()]


def test_kwire_format_writes_kafkas_bootstrap_records(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    """``kwire storage format --release-version <the release's LATEST_PRODUCTION>`` writes the
    same bootstrap records (metadata.version and every other feature's default level) as
    ``kafka-storage format`` with the same release version. 4.2+ keeps them in the 0-0
    checkpoint rather than bootstrap.checkpoint (KIP-1170; see compat/DEVIATIONS.md)."""
    release = "4.4-IV2" if each_kafka.at_least(4, 4) else "3.9-IV0"
    theirs, mine = tmp_path / "theirs", tmp_path / "mine"
    stock_props = controller_properties(tmp_path / "theirs.properties", theirs, 19095)
    each_kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", stock_props, "--no-initial-controllers",
                                    "--release-version", release])
    stock_records = _stock_bootstrap_records(theirs)
    my_props = controller_properties(tmp_path / "mine.properties", mine, 19095)
    out = io.StringIO()
    status = storage_cmd.format_command(load_config(str(my_props)), cluster_id=CLUSTER_ID,
                                        no_initial_controllers=True, release_version=release, out=out)
    assert status == 0 and f"with metadata.version {release}." in out.getvalue()
    boot = read_bootstrap_checkpoint(mine)
    assert boot is not None
    assert boot.records == stock_records
    levels = [(m.name, m.feature_level) for m, _ in boot.records]  # type: ignore[attr-defined]
    assert levels[0] == ("metadata.version", metadata_version_from_string(release).level)
    if each_kafka.at_least(4, 4):
        assert len(levels) == 6  # metadata.version + five features at their 4.4-IV2 defaults


SCRAM_ARGUMENTS = [
    'SCRAM-SHA-256=[name=alice,salt="c2FsdHNhbHQ=",iterations=8192,password=alice-secret]',
    'SCRAM-SHA-512=[name=bob,salt="c2FsdA==",saltedpassword="' + base64.b64encode(bytes(range(64))).decode() + '"]',
    "SCRAM-SHA-256=[name=carol,salt=c2FsdA==,password=carol-secret]",
]


def test_add_scram_writes_kafkas_credential_records(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    """``--add-scram`` (KIP-900's ``ScramParser``): with the salts given, kwire's bootstrap
    records equal the stock tool's, the credentials after the feature levels; and the
    arguments Kafka refuses are refused with its messages."""
    release = "4.4-IV2" if each_kafka.at_least(4, 4) else "3.9-IV0"
    theirs, mine = tmp_path / "theirs", tmp_path / "mine"
    stock_props = controller_properties(tmp_path / "theirs.properties", theirs, 19095)
    scram = [arg for argument in SCRAM_ARGUMENTS for arg in ("--add-scram", argument)]
    each_kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", stock_props, "--no-initial-controllers",
                                    "--release-version", release, *scram])
    stock_records = _stock_bootstrap_records(theirs)
    my_props = controller_properties(tmp_path / "mine.properties", mine, 19095)
    status = storage_cmd.format_command(load_config(str(my_props)), cluster_id=CLUSTER_ID, no_initial_controllers=True,
                                        release_version=release, add_scram=SCRAM_ARGUMENTS, out=io.StringIO())
    boot = read_bootstrap_checkpoint(mine)
    assert status == 0 and boot is not None
    assert [type(m).__name__ for m, _ in stock_records[-3:]] == ["UserScramCredentialRecord"] * 3, stock_records
    assert boot.records == stock_records
    if not each_kafka.at_least(4, 4):
        return
    for argument in ("SCRAM-SHA-1=[name=x,password=y]", "SCRAM-SHA-256=[name=x]", "SCRAM-SHA-256=[password=y]",
                     "SCRAM-SHA-256=[name=x,iterations=100,password=y]", "SCRAM-SHA-256=[name=x,password=y,pepper=z]",
                     "SCRAM-SHA-256=[name=x,saltedpassword=eQ==]", "SCRAM-SHA-256=name=x"):
        props = controller_properties(tmp_path / "bad.properties", tmp_path / "bad", 19095)
        stock = each_kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, "--no-initial-controllers",
                                                "--add-scram", argument], check=False)
        with pytest.raises(FormatError) as refused:
            storage_cmd.format_command(load_config(str(props)), cluster_id=CLUSTER_ID, no_initial_controllers=True,
                                       add_scram=[argument], out=io.StringIO())
        assert stock.returncode != 0 and str(refused.value) in stock.stdout + stock.stderr, (argument, stock.stdout, stock.stderr)
