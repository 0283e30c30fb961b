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
