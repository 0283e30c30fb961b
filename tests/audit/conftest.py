"""Fixtures of the audit tests: the shared Spark session, and the kwire failover run started in
the background as soon as the first audit test starts."""

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from tests.audit.session import shared_spark, stop_shared_spark
from tests.quorum_run import FailoverRun, run_failovers


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for every audit test (start-up is paid once); the compat audit
    tests use the same one (tests/audit/session.py)."""
    yield shared_spark()
    stop_shared_spark()


@pytest.fixture(scope="session")
def failover_run_future(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future[FailoverRun]]:
    """A 3-node kwire quorum run with three SIGKILLs of the leader under load
    (:func:`tests.quorum_run.run_failovers`), running in a background thread; the nodes are
    stopped when it ends, and the session waits for it at the end."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="kwire-failover-run")
    try:
        yield pool.submit(run_failovers, tmp_path_factory.mktemp("kwire-quorum") / "q", 3,
                          throughput=300)
    finally:
        pool.shutdown(wait=True)


@pytest.fixture(scope="session", autouse=True)
def _failover_run_in_background(request: pytest.FixtureRequest) -> None:
    """Start :func:`failover_run_future` at the first test under tests/audit when a collected
    test uses the run, so the run (about 17 s, mostly waiting for elections and commits) goes on
    while the synthetic-log tests start Spark and audit."""
    if any("failover_run_future" in getattr(item, "fixturenames", ())
           for item in request.session.items):
        request.getfixturevalue("failover_run_future")
