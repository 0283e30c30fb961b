"""Fixtures for tests that run stock Kafka (see compat/kafka.py; what the tests share is
compat/harness.py).

* ``kafka_version``: parametrizes a test over every pinned release (ids ``kafka-3.9.2`` ...)
  and requires its jars (fail under CI=true, skip elsewhere).
* ``each_kafka``: a :class:`~compat.harness.KafkaRelease` for ``kafka_version``, to run its
  classes and tools: the test runs once per pinned release. A test that runs releases against
  variants parametrizes ``kafka_version`` and its variant with :func:`compat.kafka.release_matrix`
  (every pair in ``make nightly``, a cover of both in ``make test``).
* ``newest_kafka``: the newest pinned release only, required the same way.
* ``newest_leader_pair``, ``newest_observer_pair``: a stock controller of the newest release
  and a kwire node in the same state, leaders or observers (compat/differential.py).
* ``java_oracles``: one long-lived Java codec oracle per release for the session
  (compat/oracle.py), started on first use.

Every test under compat/ gets the ``compat`` marker. ``compat/test_release_matrix.py`` is collected
only when ``$KWIRE_RELEASE_MATRIX`` names releases (:func:`compat.kafka.matrix_releases`), and
``compat/test_rolling_upgrade.py`` only when ``$KWIRE_ROLLING_UPGRADE`` is set,
``compat/test_old_broker_refused.py`` only when ``$KWIRE_OLD_BROKER_REFUSAL`` is set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat import kafka as _kafka
from compat.differential import PairNode, start_pair
from compat.harness import KafkaRelease, newest_pinned_release
from compat.oracle import JavaOracle

collect_ignore = [] if _kafka.matrix_releases() else ["test_release_matrix.py"]
"""The release matrix runs only when ``$KWIRE_RELEASE_MATRIX`` names releases (``make nightly``):
``make test`` neither runs nor skips it."""
if not os.environ.get("KWIRE_ROLLING_UPGRADE"):
    collect_ignore.append("test_rolling_upgrade.py")  # the 3.6.2 -> 4.4.0 rolling upgrade: nightly only
if not os.environ.get("KWIRE_MIXED_ELECTIONS"):
    collect_ignore.append("test_election_share.py")  # 30 leader kills per configuration: nightly only
if not os.environ.get("KWIRE_OLD_BROKER_REFUSAL"):
    collect_ignore.append("test_old_broker_refused.py")  # 3.6.2 brokers refused by 4.4 controllers: nightly only
if not os.environ.get("KWIRE_CONTROLLER_SWAP"):
    collect_ignore.append("test_controller_swap.py")  # stock -> kwire -> stock controllers, live: nightly only


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.compat)


@pytest.fixture(params=_kafka.PINNED_VERSIONS, ids=lambda v: f"kafka-{v}")
def kafka_version(request: pytest.FixtureRequest) -> str:
    version: str = request.param
    _kafka.require_kafka(version)
    return version


@pytest.fixture
def each_kafka(kafka_version: str) -> KafkaRelease:
    """A :class:`~compat.harness.KafkaRelease`: the test runs once for each pinned release, or
    for the releases a test parametrizes ``kafka_version`` with (:func:`compat.kafka.release_matrix`)."""
    _kafka.require_kafka(kafka_version)
    return KafkaRelease(kafka_version)


@pytest.fixture
def newest_kafka() -> KafkaRelease:
    """The newest pinned release only (a test against one stock controller of the release kwire
    answers as)."""
    return newest_pinned_release()


@pytest.fixture
def newest_leader_pair(newest_kafka: KafkaRelease, tmp_path: Path) -> Iterator[dict[str, PairNode]]:
    """A stock controller of the newest release and a kwire node, each the standalone leader of
    its own quorum in the same state (compat/differential.py)."""
    with start_pair(newest_kafka, tmp_path, "leader") as nodes:
        yield nodes


@pytest.fixture
def newest_observer_pair(newest_kafka: KafkaRelease, tmp_path: Path) -> Iterator[dict[str, PairNode]]:
    """A stock controller of the newest release and a kwire node, each an observer whose
    bootstrap server never answers (compat/differential.py)."""
    with start_pair(newest_kafka, tmp_path, "observer") as nodes:
        yield nodes


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
