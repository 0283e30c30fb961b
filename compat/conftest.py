"""Fixtures for tests that run stock Kafka (see compat/kafka.py).

* ``kafka_version``: parametrizes a test over every pinned release (ids ``kafka-3.9.2`` ...)
  and requires its jars (fail under CI=true, skip elsewhere).
* ``kafka``: a :class:`KafkaRelease` for ``kafka_version``, to run its classes and tools.
* ``java_oracles``: one long-lived Java codec oracle per release for the session
  (compat/oracle.py), started on first use.

Every test under compat/ gets the ``compat`` marker.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from compat import kafka as _kafka
from compat.oracle import JavaOracle


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.compat)


@dataclass(frozen=True)
class KafkaRelease:
    """One pinned Kafka release, ready to run."""

    version: str

    @property
    def home(self) -> Path:
        return _kafka.kafka_home(self.version)

    @property
    def classpath(self) -> str:
        return _kafka.classpath(self.version)

    def at_least(self, *parts: int) -> bool:
        """``kafka.at_least(4, 3)``: whether this release is 4.3 or newer."""
        return _kafka.version_tuple(self.version) >= parts

    def tool_class(self, tool: str) -> str:
        return _kafka.tool_class(self.version, tool)

    def tool_release(self, tool: str) -> str:
        """Which release's code runs ``tool`` (see compat.kafka.tool_release)."""
        return _kafka.tool_release(self.version, tool)

    def run(self, main_class: str, args: Sequence[str | os.PathLike[str]] = (),
            **kwargs: object) -> subprocess.CompletedProcess[str]:
        return _kafka.run_kafka_class(self.version, main_class, args, **kwargs)  # type: ignore[arg-type]

    def run_tool(self, tool: str, args: Sequence[str | os.PathLike[str]] = (),
                 **kwargs: object) -> subprocess.CompletedProcess[str]:
        return _kafka.run_tool(self.version, tool, args, **kwargs)

    def quorum_status(self, bootstrap: str) -> dict[str, str]:
        """``kafka-metadata-quorum --bootstrap-controller BOOTSTRAP describe --status`` as a
        ``{field: value}`` dict (ClusterId, LeaderId, LeaderEpoch, HighWatermark, ...)."""
        out = self.run_tool(
            "metadata-quorum", ["--bootstrap-controller", bootstrap, "describe", "--status"]
        ).stdout
        fields: dict[str, str] = {}
        for line in out.splitlines():
            name, sep, value = line.partition(":")
            if sep:
                fields[name.strip()] = value.strip()
        return fields

    def metadata_shell(self, snapshot: str | os.PathLike[str], *command: str) -> subprocess.CompletedProcess[str]:
        """``kafka-metadata-shell --snapshot SNAPSHOT COMMAND...``. The 3.9 shell sometimes never
        returns after loading a file (its loader waits for a high watermark its file reader has
        already passed; 2 of 16 runs on one file here): each attempt gets 30 s
        and the command is tried up to three times."""
        for attempt in range(3):
            try:
                return self.run_tool("metadata-shell", ["--snapshot", snapshot, *command], timeout=30.0)
            except subprocess.TimeoutExpired:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def kwire_dump(self, files: Sequence[str | os.PathLike[str]], **flags: bool) -> tuple[str, str]:
        """``(stdout, stderr)`` of ``kwire dump-log`` over ``files`` worded as this release's
        DumpLogSegments words it: LeaderChange records are decoded from Kafka 4.1 on
        (KAFKA-19069), and the Scala tool (up to 4.2) reports index problems differently from the
        Java port (4.3+, KAFKA-14579). ``flags`` are dump-log's options, e.g.
        ``cluster_metadata_decoder=True``."""
        import io

        from tools import dump_log

        out, err = io.StringIO(), io.StringIO()
        release = _kafka.version_tuple(self.tool_release("dump-log"))
        dump_log.dump_files(
            [str(f) for f in files], out=out, err=err, leader_change_as_type=release < (4, 1),
            scala_report=release < (4, 3), **flags,  # type: ignore[arg-type]
        )
        return out.getvalue(), err.getvalue()

    def start(self, main_class: str, args: Sequence[str | os.PathLike[str]] = (),
              **kwargs: object) -> subprocess.Popen[bytes]:
        return _kafka.start_kafka_class(self.version, main_class, args, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(params=_kafka.PINNED_VERSIONS, ids=lambda v: f"kafka-{v}")
def kafka_version(request: pytest.FixtureRequest) -> str:
    version: str = request.param
    _kafka.require_kafka(version)
    return version


@pytest.fixture
def kafka(kafka_version: str) -> KafkaRelease:
    return KafkaRelease(kafka_version)


@pytest.fixture(scope="session")
def java_oracles() -> Iterator[dict[str, JavaOracle]]:
    """``java_oracles[version]`` starts (once) and returns that release's codec oracle; all are
    closed at the end of the session. Call ``require_kafka(version)`` first."""
    started: dict[str, JavaOracle] = {}

    class _Lazy(dict[str, JavaOracle]):
        def __missing__(self, version: str) -> JavaOracle:
            oracle = JavaOracle(version)
            started[version] = oracle
            self[version] = oracle
            return oracle

    yield _Lazy()
    for oracle in started.values():
        oracle.close()
