"""The harness itself: every pinned release's tools start, link and do their job.

For each release: StorageTool formats a standalone controller's metadata directory, and
DumpLogSegments (from core up to 4.2, from kafka-tools from 4.3) decodes the bootstrap snapshot
that StorageTool wrote; MetadataQuorumCommand prints its usage. This is what catches a classpath
that resolves but does not link (as kafka-tools 4.3.1 on Kafka 4.4.0's classpath does not).
The release matrix's pins agree with kwire's MetadataVersion table, and a release missing from
the cache is fetched on demand (without the network: a stand-in fetch script).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compat import kafka as k
from compat.harness import KafkaRelease
from tools import stock_fetch, stock_kafka

pytestmark = pytest.mark.compat


def test_pins_are_well_formed() -> None:
    assert len(k.PINNED_VERSIONS) == len(set(k.PINNED_VERSIONS)) >= 2
    assert list(k.PINNED_VERSIONS) == sorted(k.PINNED_VERSIONS, key=k.version_tuple)
    assert k.PINNED_VERSIONS[0].startswith("3.9.")
    for v in k.PINNED_VERSIONS:
        assert re.fullmatch(r"\d+\.\d+\.\d+", v)
        assert re.fullmatch(r"\d+\.\d+\.\d+", k.tools_version(v))
        assert k.version_tuple(k.tools_version(v)) <= k.version_tuple(v)


def test_matrix_pins_every_line_with_its_newest_metadata_version() -> None:
    """kafka.releases: one release per line from 3.3, oldest first, holding kafka.versions and
    kafka.cover.releases; each release's pinned metadata.version is the newest level of its
    line in kwire's MetadataVersion table (storage.features), and the facts follow the KIPs."""
    from storage.features import METADATA_VERSIONS, metadata_version_from_string

    matrix = k.MATRIX_RELEASES
    lines = [v.rsplit(".", 1)[0] for v in matrix]
    assert lines[0] == "3.3" and lines[-1] == k.PINNED_VERSIONS[-1].rsplit(".", 1)[0]
    assert len(set(lines)) == len(lines) and list(matrix) == sorted(matrix, key=k.version_tuple)
    assert set(k.PINNED_VERSIONS) | set(stock_kafka.COVER_RELEASES) <= set(matrix)
    for v in matrix:
        facts = k.release_facts(v)
        level = metadata_version_from_string(facts.metadata_version)
        assert level.release == facts.release_version == v.rsplit(".", 1)[0]
        assert level == max((mv for mv in METADATA_VERSIONS if mv.release == level.release), key=lambda mv: mv.level)
        assert facts.dynamic_quorum == (k.version_tuple(v) >= (3, 9))
        assert facts.bootstrap_controller == (k.version_tuple(v) >= (3, 7))
        assert facts.log4j2 == (k.version_tuple(v) >= (4,)) == (k.logging_config(v).name == "log4j2.properties")
    with pytest.raises(ValueError, match="not pinned"):
        k.release_facts("3.2.3")


def test_matrix_releases_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(k.RELEASE_MATRIX_ENV, raising=False)
    assert k.matrix_releases() == ()
    monkeypatch.setenv(k.RELEASE_MATRIX_ENV, "all")
    assert k.matrix_releases() == k.MATRIX_RELEASES
    monkeypatch.setenv(k.RELEASE_MATRIX_ENV, f"{k.MATRIX_RELEASES[-1]},{k.MATRIX_RELEASES[0]}")
    assert k.matrix_releases() == (k.MATRIX_RELEASES[0], k.MATRIX_RELEASES[-1])
    monkeypatch.setenv(k.RELEASE_MATRIX_ENV, "2.8.2")
    with pytest.raises(ValueError, match="not in kafka.releases"):
        k.matrix_releases()


def test_a_release_not_fetched_is_fetched_on_demand(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """ensure_fetched runs the fetch script for a release missing from the cache, and reports
    the script's words when it fails; require_release skips (fails under CI) on that."""
    script = tmp_path / "fetch-kafka.sh"
    script.write_text('echo "fetch-kafka: fetched $1" >&2; mkdir -p "$CACHE/kafka-$1/lib"; exit 3\n')
    monkeypatch.setattr(stock_fetch, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(stock_fetch, "FETCH_SCRIPT", script)
    monkeypatch.setenv("CACHE", str(tmp_path / "cache"))
    version = k.MATRIX_RELEASES[0]
    assert not stock_fetch.is_fetched(version)
    with pytest.raises(k.KafkaUnavailable, match=f"fetch-kafka: fetched {version}"):
        k.ensure_fetched(version)
    assert (tmp_path / "cache" / f"kafka-{version}" / "lib").is_dir()  # the script did run
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match=f"fetching Kafka {version} failed"):
        k.require_release(version)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        k.require_release(version)


def test_require_kafka_fails_in_ci_when_jars_are_missing(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    monkeypatch.setattr(stock_fetch, "CACHE_DIR", tmp_path)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        k.require_kafka(k.PINNED_VERSIONS[0])
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="make compat-jars"):
        k.require_kafka(k.PINNED_VERSIONS[0])


def test_java_command_shape(each_kafka: KafkaRelease) -> None:
    cmd = k.java_command(each_kafka.version, "kafka.Kafka", ["x.properties"], server=True)
    assert cmd[-2:] == ["kafka.Kafka", "x.properties"]
    assert "-Xmx512m" in cmd
    cp = cmd[cmd.index("-cp") + 1].split(":")
    assert any(Path(e).name == f"kafka-clients-{each_kafka.version}.jar" for e in cp)
    assert any(f.startswith(("-Dlog4j.configuration=", "-Dlog4j2.configurationFile="))
               for f in cmd)


def test_dump_log_segments_class_follows_the_release(each_kafka: KafkaRelease) -> None:
    release = each_kafka.tool_release("dump-log")
    expected = ("org.apache.kafka.tools.DumpLogSegments"
                if k.version_tuple(release) >= (4, 3) else "kafka.tools.DumpLogSegments")
    assert each_kafka.tool_class("dump-log") == expected
    assert k.dump_log_segments_class(each_kafka.version) == expected


def test_format_and_dump_bootstrap_snapshot(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    data = tmp_path / "data"
    props = tmp_path / "controller.properties"
    props.write_text(
        "process.roles=controller\n"
        "node.id=1\n"
        "controller.quorum.bootstrap.servers=localhost:19093\n"
        "controller.listener.names=CONTROLLER\n"
        "listeners=CONTROLLER://localhost:19093\n"
        f"log.dirs={data}\n",
        encoding="utf-8",
    )
    cluster_id = each_kafka.run_tool("storage", ["random-uuid"]).stdout.strip()
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id), cluster_id
    each_kafka.run_tool("storage", ["format", "-t", cluster_id, "-c", props, "--standalone"])
    meta = (data / "meta.properties").read_text(encoding="utf-8")
    assert f"cluster.id={cluster_id}" in meta
    snapshot = data / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    assert snapshot.is_file()
    # Up to 4.1 the bootstrap records (metadata.version) go to a separate bootstrap.checkpoint;
    # from 4.2 into the 0-0 snapshot itself (KIP-1170).
    files = [snapshot] + ([data / "bootstrap.checkpoint"] if not each_kafka.at_least(4, 2) else [])

    out = each_kafka.run_tool(
        "dump-log", ["--cluster-metadata-decoder", "--files", ",".join(map(str, files))]
    ).stdout
    assert "SnapshotHeader" in out
    assert "SnapshotFooter" in out
    assert '"name":"metadata.version"' in out
    # Formatting with --standalone (KIP-853) writes this node as the only voter.
    assert "KRaftVersion" in out and "Voters" in out


def test_metadata_quorum_command_starts(each_kafka: KafkaRelease) -> None:
    result = each_kafka.run_tool("metadata-quorum", ["--help"])
    assert "--bootstrap-controller" in result.stdout + result.stderr
